"""/api/overview's GPU idle time by cause (`idle`): a synthetic step with one gap of each cause, read
through HTTP with exact numbers, and a demo run whose three causes add up to the idle time of its GPU
utilization."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from synth import Trace, write_trace

REPO = Path(__file__).resolve().parents[2]
DEMO_RUN = "loss_sync_before"
CAUSE_KEYS = {"idle_us", "host_wait_us", "kernel_wait_us", "other_us"}


def three_causes() -> Trace:
    """One step 0..200 on stream 7; GPU busy 20..40, 50..60, 100..110, 140..150 (50 us)."""
    t = Trace()
    t.step(1, 0, 200)
    t.launch(10, 2, 20, 20)     # launched at 10, after the step began: 0..20 host wait
    t.launch(13, 2, 50, 10)     # queued at 13: 40..50 (10 us < 30) kernel wait
    t.launch(16, 2, 100, 10)    # queued at 16: 60..100 (40 us) other
    t.launch(130, 2, 140, 10)   # launched at 130, after 110: 110..140 host wait; 150..200 host wait
    return t


@pytest.fixture(scope="module")
def api(start_app, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("idle_logdir")
    write_trace(root, "three_causes", "worker0", 1, three_causes().build())
    shutil.copytree(REPO / "examples/logdir" / DEMO_RUN, root / DEMO_RUN)
    app = start_app(root, cache_dir=tmp_path_factory.mktemp("idle_cache"), expect=["three_causes", DEMO_RUN])
    yield app
    app.stop()


def test_overview_idle_by_cause_of_a_synthetic_step(api):
    body = api.get("/api/overview", {"run": "three_causes"}).json()
    idle = body["idle"]
    # host 20 + 30 + 50 = 100, kernel 10, other 40: 150 = 200 - 50 busy.
    gpu = {"device": 0, "idle_us": 150, "host_wait_us": 100, "kernel_wait_us": 10, "other_us": 40}
    assert idle["devices"] == [{**gpu, "span_us": 200}]
    # The stream, as HTA: between its first and last kernel (20..150).
    stream = {"device": 0, "stream": 7, "idle_us": 80, "host_wait_us": 30, "kernel_wait_us": 10, "other_us": 40}
    assert idle["steps"] == [{"step": "1", **gpu, "stream": None}, {"step": "1", **stream}]
    assert idle["average"] == [{**gpu, "stream": None}, stream]
    assert idle["kernel_wait_threshold_us"] == 30
    assert body["gpus"][0]["utilization_ratio"] == 0.25  # the Overview's idle share: 150 / 200 = 1 - 0.25


def test_overview_idle_of_a_demo_run_adds_up_to_its_gpu_utilization(api):
    body = api.get("/api/overview", {"run": DEMO_RUN}).json()
    [gpu], [idle] = body["gpus"], body["idle"]["devices"]
    span = body["steps"][-1]["end_us"] - body["steps"][0]["start_us"]
    assert idle["span_us"] == pytest.approx(span, abs=0.002)
    assert idle["idle_us"] == pytest.approx(idle["host_wait_us"] + idle["kernel_wait_us"] + idle["other_us"], abs=0.003)
    assert idle["idle_us"] == pytest.approx(span * (1 - gpu["utilization_ratio"]), abs=0.01)
    assert idle["host_wait_us"] > 0.9 * idle["idle_us"]  # the GPU waits for a host that waits on .item()
    # Every step has a row for the GPU and one per stream; the average row is their mean.
    keys = {(r["device"], r["stream"]) for r in body["idle"]["steps"]}
    assert len(body["idle"]["steps"]) == len(keys) * len(body["steps"])
    for avg in body["idle"]["average"]:
        assert set(avg) == CAUSE_KEYS | {"device", "stream"}
        mine = [r for r in body["idle"]["steps"] if (r["device"], r["stream"]) == (avg["device"], avg["stream"])]
        for key in CAUSE_KEYS:
            assert avg[key] == pytest.approx(sum(r[key] for r in mine) / len(body["steps"]), abs=0.002)
