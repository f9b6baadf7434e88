"""GET /api/diff: the keys the issue fixed, the same answer as the analysis on the demo pair, defaults
and parameters, and the public errors of the selections (unknown run, worker or span; unreadable
trace)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from synth import write_trace

REPO = Path(__file__).resolve().parents[2]
BEFORE, AFTER = "loss_sync_before", "loss_sync_after"
ROW_KEYS = {"name", "status", "base_calls", "new_calls", "base_device_us", "new_device_us", "delta_device_us"}
HOST_KEYS = {"base_host_us", "new_host_us", "delta_host_us"}
STEP_KEYS = {"total_us", "kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us", "dataloader_us",
             "cpu_exec_us", "other_us"}


@pytest.fixture(scope="module")
def api(start_app, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("diff_logdir")
    for run in (BEFORE, AFTER):
        shutil.copytree(REPO / "examples/logdir" / run, root / run)
    write_trace(root, "broken", "worker0", 1, b'{"traceEvents": [{"ph": "X", "name": ')
    app = start_app(root, cache_dir=tmp_path_factory.mktemp("diff_cache"), expect=[BEFORE, AFTER, "broken"])
    yield app
    app.stop()


def pair(**extra: str) -> dict[str, str]:
    return {"base_run": BEFORE, "new_run": AFTER, **extra}


def assert_error(response, status: int, code: str, mentions: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code and mentions in body["error"]["message"], body


def test_diff_keys(api):
    body = api.get("/api/diff", pair()).json()
    assert set(body) == {"base", "new", "step_delta_ratio", "verdict", "step_count", "steps", "gpu", "memory",
                         "operators", "kernels", "modules", "recommendations", "warnings"}
    assert body["base"] == {"run": BEFORE, "worker": "vm_437", "span": "1"}  # defaults: first worker and span
    assert body["verdict"] == "improvement"
    assert set(body["steps"]) == {"base", "new", "delta"} and all(set(v) == STEP_KEYS for v in body["steps"].values())
    assert body["steps"]["delta"]["total_us"] == pytest.approx(
        body["steps"]["new"]["total_us"] - body["steps"]["base"]["total_us"], abs=2e-3)
    assert body["step_delta_ratio"] == pytest.approx(
        body["steps"]["new"]["total_us"] / body["steps"]["base"]["total_us"] - 1, abs=1e-6)
    assert all(set(row) == ROW_KEYS for row in body["kernels"])
    assert all(set(row) == ROW_KEYS | HOST_KEYS for row in body["operators"] + body["modules"])
    assert set(body["recommendations"]) == {"resolved", "new"}
    assert "host_device_sync" in body["recommendations"]["resolved"]
    deltas = [max(abs(r["delta_device_us"]), abs(r["delta_host_us"])) for r in body["operators"]]
    assert deltas == sorted(deltas, reverse=True)


def test_diff_parameters(api):
    named = api.get("/api/diff", pair(base_worker="vm_437", base_span="1", new_worker="vm_471", new_span="1")).json()
    assert named == api.get("/api/diff", pair()).json()
    limited = api.get("/api/diff", pair(limit="3")).json()
    assert len(limited["operators"]) == 3 and limited["operators"] == named["operators"][:3]
    shapes = api.get("/api/diff", pair(group_by="name_shape")).json()["operators"]
    assert all("input_shape" in row for row in shapes) and len(shapes) >= len(named["operators"])
    # The baseline as every view names its selection; the candidate defaults to the baseline itself.
    assert api.get("/api/diff", {"run": BEFORE, "worker": "vm_437", "span": "1", "new_run": AFTER}).json() == named
    same = api.get("/api/diff", {"run": AFTER}).json()
    assert same["base"] == same["new"] == {"run": AFTER, "worker": "vm_471", "span": "1"}
    assert same["verdict"] == "unchanged" and same["step_delta_ratio"] == 0
    assert {row["status"] for row in same["kernels"] + same["operators"]} == {"unchanged"}
    assert same["warnings"] == ["The candidate is the baseline itself: pick another with new_run, new_worker or new_span."]


@pytest.mark.parametrize("params, status, code, mentions", [
    pytest.param({"base_run": "no_such_run", "new_run": AFTER}, 404, "not_found", "no_such_run", id="unknown-base"),
    pytest.param({"base_run": BEFORE, "new_run": "no_such_run"}, 404, "not_found", "no_such_run", id="unknown-new"),
    pytest.param(pair(new_worker="nobody"), 404, "not_found", "nobody", id="unknown-worker"),
    pytest.param(pair(base_span="2"), 404, "not_found", "span", id="span-past-the-end"),
    pytest.param({"base_run": BEFORE, "new_run": "broken"}, 422, "trace_error", "broken", id="unreadable"),
    pytest.param({"new_run": AFTER}, 400, "bad_parameter", "run", id="no-baseline"),
])
def test_diff_errors(api, params, status, code, mentions):
    assert_error(api.get("/api/diff", params), status, code, mentions)
