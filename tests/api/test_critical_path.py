"""/api/trace/critical_path on the loss_sync_before trace recorded with CUDA sync events on an H200
(tests/data/h200_sync): the analysis' path (server/analysis/critical_path.py) with each event's
lane and row as /api/trace/event gives them, the first step by default, another by name, and the
errors of the other trace routes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "data" / "h200_sync" / "loss_sync_before"
SEL = {"run": "before", "worker": "vm_489"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, start_app):
    logdir = tmp_path_factory.mktemp("logdir")
    (logdir / "before").mkdir()
    for trace in RUN.glob("*.pt.trace.json*"):
        shutil.copy(trace, logdir / "before" / trace.name)
    app = start_app(logdir, cache_dir=tmp_path_factory.mktemp("cache"), expect=["before"], timeout=120)
    yield app
    app.stop()


def test_first_step_by_default_with_lanes_rows_and_a_breakdown_that_sums(api):
    lanes = api.get("/api/trace/lanes", SEL).json()
    path = api.get("/api/trace/critical_path", SEL).json()
    first = lanes["steps"][0]
    assert (path["step"], path["start_us"], path["end_us"]) == (first["step"], first["start_us"], first["end_us"])
    assert path["steps"] == [s["step"] for s in lanes["steps"]]
    assert sum(path["breakdown"].values()) == pytest.approx(path["total_us"], abs=0.01)
    assert path["approximated"] == [
        "a host thread other than the main one hands over to the main thread where its run of operators began"]
    kinds = {s["kind"] for s in path["segments"]}
    assert {"host", "launch", "gpu", "sync"} <= kinds
    for segment in path["segments"]:
        if segment["id"] is None:
            assert segment["lane"] is None and segment["kind"] in ("host", "gpu_gap")
            continue
        event = api.get("/api/trace/event", {**SEL, "id": segment["id"]}).json()
        assert (segment["lane"], segment["row"]) == (event["lane"], event["row"])
        assert event["start_us"] <= segment["start_us"] + 1e-3
    syncs = [s for s in path["segments"] if s["kind"] == "sync"]
    assert {api.get("/api/trace/event", {**SEL, "id": s["id"]}).json()["name"] for s in syncs} == {
        "cudaStreamSynchronize"}
    assert all(s["sync_event_id"] is not None for s in syncs)


def test_another_step_by_name_and_errors(api):
    steps = api.get("/api/trace/lanes", SEL).json()["steps"]
    last = api.get("/api/trace/critical_path", {**SEL, "step": steps[-1]["step"]}).json()
    assert (last["step"], last["end_us"]) == (steps[-1]["step"], steps[-1]["end_us"])
    missing = api.get("/api/trace/critical_path", {**SEL, "step": "999"})
    assert missing.status_code == 404 and "no step '999'" in missing.json()["error"]["message"]
    assert api.get("/api/trace/critical_path", {**SEL, "worker": "nobody"}).status_code == 404
