"""/api/trace/lanes' flow types, steps and Python frame rows, and /api/trace/window's arrows of
the asked flow types, on real H200 traces: an FSDP rank (no Python stacks; its first step starts on
the GPU after its ProfilerStep starts on the host) and the demo's ResNet-50 (with_stack)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")

REPO = Path(__file__).resolve().parents[2]
RUNS = {"fsdp": REPO / "tests" / "data" / "h200x2" / "fsdp", "resnet": REPO / "examples" / "logdir" / "resnet50_fp32"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, start_app):
    logdir = tmp_path_factory.mktemp("logdir")
    for name, folder in RUNS.items():
        (logdir / name).mkdir()
        for trace in folder.glob("*.pt.trace.json*"):
            shutil.copy(trace, logdir / name / trace.name)
    app = start_app(logdir, cache_dir=tmp_path_factory.mktemp("cache"), expect=list(RUNS), timeout=120)
    yield app
    app.stop()


def raw_events(run: str, worker: str) -> list[dict]:
    path = next(RUNS[run].glob(f"{worker}.*.pt.trace.json.gz"))
    with gzip.open(path) as fh:
        return json.load(fh)["traceEvents"]


def test_lanes_list_the_flow_types_and_keep_their_keys(api):
    lanes = api.get("/api/trace/lanes", {"run": "fsdp", "worker": "vm_839"}).json()
    assert {"start_us", "end_us", "lanes", "steps", "kinds", "warnings"} <= set(lanes)
    assert lanes["flow_types"] == ["ac2g", "fwdbwd"]
    cats = {e.get("cat") for e in raw_events("fsdp", "vm_839") if e.get("ph") in ("s", "f")}
    assert {"ac2g", "fwdbwd"} <= cats


def test_window_lists_only_the_asked_flow_types(api):
    sel = {"run": "fsdp", "worker": "vm_839"}
    lanes = api.get("/api/trace/lanes", sel).json()
    # Around the first step's host range: arrows of both types, fewer than 500 of each.
    step = lanes["steps"][0]
    window = {**sel, "start_us": step["host_start_us"], "end_us": step["host_start_us"] + 2000, "width_px": 1000}
    every = api.get("/api/trace/window", window).json()["flows"]
    assert {"ac2g", "fwdbwd"} <= set(every["cat"])
    for kind in ("ac2g", "fwdbwd"):
        only = api.get("/api/trace/window", {**window, "flows": kind}).json()["flows"]
        assert set(only["cat"]) == {kind}
        assert only["total"] == every["cat"].count(kind)
        assert only["from_id"] == [i for i, c in zip(every["from_id"], every["cat"]) if c == kind]
    both = api.get("/api/trace/window", {**window, "flows": "fwdbwd,ac2g"}).json()["flows"]
    assert both == every
    none = api.get("/api/trace/window", {**window, "flows": "none"}).json()["flows"]
    assert none["total"] == 0 and none["cat"] == []
    bad = api.get("/api/trace/window", {**window, "flows": "ac2g,bogus"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_parameter"
    assert "bogus" in bad.json()["error"]["message"]


def test_steps_carry_their_profiler_step_on_the_host_and_its_lane(api):
    sel = {"run": "fsdp", "worker": "vm_839"}
    lanes = api.get("/api/trace/lanes", sel).json()
    host = {e["name"]: e for e in raw_events("fsdp", "vm_839")
            if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    assert [s["step"] for s in lanes["steps"]] == ["3", "4", "5"]
    for step in lanes["steps"]:
        event = host[f"ProfilerStep#{step['step']}"]
        assert step["host_start_us"] == pytest.approx(event["ts"], abs=1e-3)
        assert step["host_end_us"] == pytest.approx(event["ts"] + event["dur"], abs=1e-3)
        lane = lanes["lanes"][step["lane"]]
        assert lane["kind"] == "cpu" and lane["name"].startswith(f"thread {event['tid']}")
    # The steps analysis starts the first step when the GPU work before it ends: after its ProfilerStep.
    assert lanes["steps"][0]["start_us"] > lanes["steps"][0]["host_start_us"]


def test_lanes_say_how_many_rows_python_frames_take(api):
    fsdp = api.get("/api/trace/lanes", {"run": "fsdp", "worker": "vm_839"}).json()["lanes"]
    assert all(lane["stack_rows"] == 0 for lane in fsdp)
    resnet = api.get("/api/trace/lanes", {"run": "resnet"}).json()["lanes"]
    main = resnet[0]
    assert 0 < main["stack_rows"] < main["rows"]
    assert all(lane["stack_rows"] == 0 for lane in resnet if lane["kind"] == "gpu")
    # The top rows are frames, the rows below them operators: the first row below is a ProfilerStep.
    found = api.get("/api/trace/search", {"run": "resnet", "q": "ProfilerStep#"}).json()["matches"]
    on_main = [m for m in found if m["lane"] == main["id"]]
    event = api.get("/api/trace/event", {"run": "resnet", "id": on_main[0]["id"]}).json()
    assert event["row"] == main["stack_rows"]
