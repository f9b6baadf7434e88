"""Several ranks on one timeline: /api/distributed's `clock` (each rank's offset, the straggler and
the fastest) and /api/trace/collective (the same collective on every shown worker), on a synthetic
4-rank run whose ranks' clocks are shifted by known amounts (rank 1 also sleeps before every step)
and on the real two-rank run tests/data/h200x2/ddp_straggler_rank1 (one host)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from synth import BUCKETS_AT, shift_clock, slow_rank_run, write_trace

pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")

SHIFTED = "shifted"
REAL = "ddp_straggler_rank1"
SHIFTS = {0: 0.0, 1: -1234.5, 2: 250_000.0, 3: 7.25}
STEPS = 3
REAL_DIR = Path(__file__).resolve().parents[1] / "data" / "h200x2" / REAL


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, start_app):
    logdir = tmp_path_factory.mktemp("logdir")
    for name, trace in slow_rank_run(world=4, slow=1, steps=STEPS).items():
        write_trace(logdir, SHIFTED, name, 1700000000000 + int(name[-1]), shift_clock(trace, SHIFTS[int(name[-1])]).build())
    shutil.copytree(REAL_DIR, logdir / REAL)
    app = start_app(logdir, cache_dir=tmp_path_factory.mktemp("cache"), expect=[SHIFTED, REAL], timeout=120)
    yield app
    app.stop()


def kernels(api, run: str, worker: str) -> list[dict]:
    found = api.get("/api/trace/search", {"run": run, "worker": worker, "q": "ncclDevKernel"}).json()
    return found["matches"]


def collective(api, run: str, worker: str, id: int, workers: list[str]):
    return api.get("/api/trace/collective", {"run": run, "worker": worker, "id": id, "workers": ",".join(workers)})


def test_distributed_clock_recovers_the_shifts(api):
    clock = api.get("/api/distributed", {"run": SHIFTED}).json()["clock"]
    assert clock["reference"] == 0
    assert [r["rank"] for r in clock["ranks"]] == [0, 1, 2, 3]
    for row in clock["ranks"]:
        assert row["offset_us"] == pytest.approx(SHIFTS[row["rank"]], abs=1.0)
        assert row["used"] == STEPS * len(BUCKETS_AT)
    assert (clock["straggler"], clock["fastest"]) == (1, 0)


def test_distributed_clock_of_one_host_is_near_zero(api):
    clock = api.get("/api/distributed", {"run": REAL}).json()["clock"]
    assert [abs(r["offset_us"]) < 12.0 for r in clock["ranks"]] == [True, True]
    assert (clock["straggler"], clock["fastest"]) == (1, 0)


@pytest.mark.parametrize("k", [0, 4, 8])
def test_collective_from_a_kernel_marks_the_same_call_on_every_rank(api, k):
    shown = ["worker1", "worker0", "worker3"]
    picked = kernels(api, SHIFTED, "worker1")[k]
    response = collective(api, SHIFTED, "worker1", picked["id"], shown)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["name"] == "nccl:all_reduce" and body["group"] == "0" and body["matched"]
    assert [c["worker"] for c in body["calls"]] == shown
    assert body["calls"][0]["id"] == picked["id"]
    ends = set()
    for call in body["calls"]:
        rank = int(call["worker"][-1])
        # The k-th NCCL kernel of each rank is its k-th all-reduce: the same collective.
        assert call["id"] == kernels(api, SHIFTED, call["worker"])[k]["id"]
        ends.add(round(call["start_us"] + call["dur_us"] - SHIFTS[rank], 3))
    assert len(ends) == 1     # on one clock, the collective ends together on every rank


def test_collective_from_the_host_op_marks_host_ops(api):
    ops = api.get("/api/trace/search", {"run": SHIFTED, "worker": "worker2", "q": "nccl:all_reduce"}).json()["matches"]
    body = collective(api, SHIFTED, "worker2", ops[5]["id"], ["worker0", "worker2"]).json()
    # The picked worker comes first, then the others asked for.
    assert [c["worker"] for c in body["calls"]] == ["worker2", "worker0"]
    theirs = api.get("/api/trace/search", {"run": SHIFTED, "worker": "worker0", "q": "nccl:all_reduce"}).json()
    assert [c["id"] for c in body["calls"]] == [ops[5]["id"], theirs["matches"][5]["id"]]


def test_collective_on_the_real_run_follows_the_raw_kernels(api):
    workers = sorted(p.name.split(".")[0] for p in REAL_DIR.glob("*.pt.trace.json.gz"))
    raw = {}
    for path in REAL_DIR.glob("*.pt.trace.json.gz"):
        with gzip.open(path) as f:
            events = json.load(f)["traceEvents"]
        raw[path.name.split(".")[0]] = sorted(e["ts"] for e in events if e.get("cat") == "kernel"
                                              and e["name"].startswith("ncclDevKernel") and "External id" in e["args"])
    picked = [m for m in kernels(api, REAL, workers[0]) if m["start_us"] == raw[workers[0]][3]]
    assert len(picked) == 1
    body = collective(api, REAL, workers[0], picked[0]["id"], workers).json()
    assert [c["start_us"] for c in body["calls"]] == [raw[w][3] for w in workers]


def test_collective_from_the_gpu_annotation_marks_kernels(api):
    workers = sorted(p.name.split(".")[0] for p in REAL_DIR.glob("*.pt.trace.json.gz"))
    gpu = {lane["id"] for lane in api.get("/api/trace/lanes", {"run": REAL, "worker": workers[1]}).json()["lanes"]
           if lane["kind"] == "gpu"}
    found = api.get("/api/trace/search", {"run": REAL, "worker": workers[1], "q": "nccl:all_reduce"}).json()["matches"]
    annotation = [m for m in found if m["lane"] in gpu][2]
    body = collective(api, REAL, workers[1], annotation["id"], workers).json()
    # Its rank's NCCL kernel under the annotation, and the same collective's kernel on the other rank:
    # what picking that kernel gives.
    mine = body["calls"][0]
    assert mine["worker"] == workers[1] and mine["lane"] == annotation["lane"]
    assert annotation["start_us"] <= mine["start_us"] < annotation["start_us"] + annotation["dur_us"]
    assert [c["id"] for c in body["calls"]] == [
        c["id"] for c in collective(api, REAL, workers[1], mine["id"], workers).json()["calls"]]
    assert all(api.get("/api/trace/event", {"run": REAL, "worker": c["worker"], "id": c["id"]}).json()["name"]
               .startswith("ncclDevKernel") for c in body["calls"])


def test_collective_refuses_other_events_and_workers(api):
    op = api.get("/api/trace/search", {"run": SHIFTED, "worker": "worker0", "q": "ProfilerStep"}).json()["matches"][0]
    response = collective(api, SHIFTED, "worker0", op["id"], ["worker1"])
    assert response.status_code == 404 and "no collective" in response.json()["error"]["message"]
    picked = kernels(api, SHIFTED, "worker0")[0]
    response = collective(api, SHIFTED, "worker0", picked["id"], ["worker9"])
    assert response.status_code == 404 and "worker9" in response.json()["error"]["message"]
