"""The Memory and Memory Snapshot APIs (in-process app, tests/conftest.py) on the demo's resnet50_fp32
(memory records, and the CUDA allocator snapshot recorded with it), a PyTorch 1.x trace from
tests/synth.py (no totals, no addresses), a trace without memory records, a run holding only a
snapshot, snapshot files that are unsafe or not snapshots at all, and hostile ones (a gzip bomb, a
billion laughs, a pickle that hashes for hours)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
import threading
import time
from pathlib import Path

import pytest

from synth import legacy_training, write_trace

REPO = Path(__file__).resolve().parents[2]
RESNET = REPO / "examples/logdir/resnet50_fp32"
SNAPSHOT = "memory_snapshot.pickle.gz"


class _Payload:
    """Unpickling this would run a shell command that creates a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def memory_server(start_app, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("memory_logdir")
    shutil.copytree(RESNET, root / "resnet50")
    write_trace(root, "legacy", "worker0", 1, legacy_training().build())
    shutil.copytree(REPO / "tests/data/h200/reduce_overhead", root / "no_memory")
    (root / "snapshot_only").mkdir()
    shutil.copyfile(RESNET / SNAPSHOT, root / "snapshot_only" / SNAPSHOT)
    marker = tmp_path_factory.mktemp("marker") / "ran"
    (root / "unsafe").mkdir()
    (root / "unsafe" / "evil_snapshot.pickle").write_bytes(pickle.dumps(_Payload(marker)))
    (root / "unsafe" / "notes.pickle").write_bytes(b"this is not a pickle")
    (root / "hostile").mkdir()
    (root / "hostile" / "bomb.pickle.gz").write_bytes(gzip.compress(b"\0" * (80 << 20), 9))
    block = {"address": 0, "size": 512, "requested_size": 512, "state": "active_allocated"}
    laughs = {"device": 0, "address": 0, "total_size": 512, "blocks": [block] * 2000}
    (root / "hostile" / "laughs.pickle").write_bytes(pickle.dumps({"segments": [laughs] * 2000}))
    # A dict key that is a pair of pairs ... 40 deep: 2**40 steps to hash, inside the unpickler.
    (root / "hostile" / "slow.pickle").write_bytes(b"\x80\x04}(\x8c\x08segments])" + b"2\x86" * 40 + b"K\x01u.")
    # slow.pickle is refused after 1 s of processor time rather than the default 5
    server = start_app(root, max_snapshot_bytes=64 << 20, snapshot_cpu_seconds=1,
                       expect=["resnet50", "legacy", "no_memory", "snapshot_only", "unsafe", "hostile"])
    server.marker = marker
    yield server
    server.stop()


def raw_memory_records(path: Path) -> list[dict]:
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as f:
        events = json.load(f)["traceEvents"]
    return [e for e in events if e.get("name") == "[memory]"]


def test_runs_list_their_snapshots_and_views(memory_server):
    runs = memory_server.runs()
    assert runs["resnet50"]["snapshots"] == [SNAPSHOT]
    assert {"memory", "snapshot", "trace"} <= set(runs["resnet50"]["views"])
    assert "snapshot" not in runs["legacy"]["views"] and "memory" in runs["legacy"]["views"]
    assert "memory" not in runs["no_memory"]["views"]
    only = runs["snapshot_only"]
    assert only["status"] == "ready" and only["workers"] == [] and only["views"] == ["snapshot"]
    # Trace views of a run without traces: a clear 404, not a crash.
    response = memory_server.get("/api/overview", {"run": "snapshot_only"})
    assert response.status_code == 404 and "no trace files" in response.json()["error"]["message"]


def test_devices_curve_and_peak_agree_with_the_raw_records(memory_server):
    trace = sorted(memory_server.logdir.joinpath("resnet50").glob("*.pt.trace.json*"))[0]
    records = raw_memory_records(trace)
    devices = memory_server.get("/api/memory/devices", {"run": "resnet50"}).json()
    assert devices["default"] == "GPU0"
    kinds = {"CPU" if r["args"]["Device Type"] == 0 else f"GPU{r['args']['Device Id']}" for r in records}
    assert {d["device"] for d in devices["devices"]} == kinds
    assert devices["steps"] and devices["start_us"] < devices["end_us"]
    gpu = [r for r in records if r["args"].get("Device Type") == 1]
    curve = memory_server.get("/api/memory/curve", {"run": "resnet50", "width_px": 300}).json()
    peak = max(r["args"]["Total Allocated"] for r in gpu)
    assert curve["peak_allocated"]["bytes"] == peak == max(curve["allocated_bytes"])
    assert curve["records"] == len(gpu) and 0 < curve["points"] < len(gpu)
    assert curve["capacity_bytes"] and curve["capacity_bytes"] > peak


def test_a_range_narrows_events_and_stats(memory_server):
    devices = memory_server.get("/api/memory/devices", {"run": "resnet50"}).json()
    lo, hi = devices["start_us"], devices["end_us"]
    whole = memory_server.get("/api/memory/events", {"run": "resnet50", "device": "GPU0"}).json()
    mid = {"start_us": lo + (hi - lo) * 0.4, "end_us": lo + (hi - lo) * 0.6}
    part = memory_server.get("/api/memory/events", {"run": "resnet50", "device": "GPU0", **mid}).json()
    assert 0 < part["total"] < whole["total"] == len(whole["rows"])
    for row in part["rows"]:
        inside = [t for t in (row["alloc_us"], row["free_us"]) if t is not None and mid["start_us"] <= t <= mid["end_us"]]
        assert inside, row
    stats = memory_server.get("/api/memory/stats", {"run": "resnet50", "device": "GPU0", **mid}).json()
    everything = memory_server.get("/api/memory/stats", {"run": "resnet50", "device": "GPU0"}).json()
    assert stats["rows"] and sum(r["allocation_count"] for r in stats["rows"]) < sum(
        r["allocation_count"] for r in everything["rows"])
    limited = memory_server.get("/api/memory/events", {"run": "resnet50", "device": "GPU0", "limit": 5}).json()
    assert len(limited["rows"]) == 5 and limited["total"] == whole["total"] and limited["warnings"]


def test_legacy_and_memoryless_traces_say_why(memory_server):
    curve = memory_server.get("/api/memory/curve", {"run": "legacy"}).json()
    assert curve["t_us"] == [] and "Total Allocated" in curve["reason"]
    stats = memory_server.get("/api/memory/stats", {"run": "legacy"}).json()
    assert stats["rows"]
    events = memory_server.get("/api/memory/events", {"run": "legacy"}).json()
    assert events["rows"] == [] and "addresses" in events["reason"]
    none = memory_server.get("/api/memory/curve", {"run": "no_memory"}).json()
    assert none["device"] is None and "profile_memory" in none["reason"]
    devices = memory_server.get("/api/memory/devices", {"run": "no_memory"}).json()
    assert devices["devices"] == [] and devices["warnings"]


def test_bad_memory_parameters(memory_server):
    wrong = memory_server.get("/api/memory/curve", {"run": "resnet50", "device": "GPU7"})
    assert wrong.status_code == 404 and "GPU0" in wrong.json()["error"]["message"]
    backwards = memory_server.get("/api/memory/stats", {"run": "resnet50", "start_us": 10, "end_us": 5})
    assert backwards.status_code == 400 and backwards.json()["error"]["code"] == "bad_parameter"
    assert memory_server.get("/api/memory/curve", {"run": "resnet50", "width_px": 0}).status_code == 400


def test_snapshot_summary_timeline_state_and_sites(memory_server):
    summary = memory_server.get("/api/snapshot", {"run": "resnet50"}).json()
    assert summary["file"] == SNAPSHOT and summary["devices"] == [0]
    assert summary["reserved_bytes"] == summary["allocated_bytes"] + summary["inactive_bytes"] + summary["pending_free_bytes"]
    timeline = memory_server.get("/api/snapshot/timeline", {"run": "resnet50"}).json()
    assert timeline["bands"] and max(timeline["total_bytes"]) == timeline["peak"]["bytes"]
    state = memory_server.get("/api/snapshot/state", {"run": "resnet50"}).json()
    assert sum(s["total_bytes"] for s in state["segments"]) == summary["reserved_bytes"]
    earlier = memory_server.get("/api/snapshot/state",
                                {"run": "resnet50", "at": timeline["peak"]["index"]}).json()
    assert earlier["totals"]["allocated_bytes"] >= timeline["peak"]["bytes"] > state["totals"]["allocated_bytes"]
    sites = memory_server.get("/api/snapshot/sites", {"run": "resnet50", "n": 5}).json()
    assert len(sites["rows"]) == 5 and sites["rows"][0]["total_bytes"] >= sites["rows"][-1]["total_bytes"]
    only = memory_server.get("/api/snapshot", {"run": "snapshot_only"}).json()
    assert only["reserved_bytes"] == summary["reserved_bytes"]


@pytest.mark.parametrize("part", ["", "/timeline", "/state", "/sites"])
def test_snapshot_old_paths_redirect_to_the_same_answers(memory_server, part):
    """/api/memory/snapshot* were these routes' paths before each view had one name (issue 20):
    scripts that use them get a 307 to /api/snapshot* with their query, then the same answer."""
    params = {"run": "resnet50", "device": 0}
    old = memory_server.get(f"/api/memory/snapshot{part}", params)
    assert old.status_code == 307 and old.headers["location"] == f"/api/snapshot{part}?run=resnet50&device=0"
    followed = memory_server.client.get(f"/api/memory/snapshot{part}", params=params, follow_redirects=True)
    assert followed.status_code == 200 and followed.url.path == f"/api/snapshot{part}"
    assert followed.json() == memory_server.get(f"/api/snapshot{part}", params).json()


def test_unsafe_and_broken_snapshots_are_refused_without_running_anything(memory_server):
    runs = memory_server.runs()
    assert runs["unsafe"]["snapshots"] == ["evil_snapshot.pickle", "notes.pickle"]
    evil = memory_server.get("/api/snapshot", {"run": "unsafe", "file": "evil_snapshot.pickle"})
    assert evil.status_code == 422 and evil.json()["error"]["code"] == "snapshot_error"
    assert "refused" in evil.json()["error"]["message"] and "system" in evil.json()["error"]["message"]
    assert not memory_server.marker.exists()
    junk = memory_server.get("/api/snapshot/timeline", {"run": "unsafe", "file": "notes.pickle"})
    assert junk.status_code == 422 and "notes.pickle" in junk.json()["error"]["message"]
    # ... and the server goes on serving.
    assert memory_server.get("/api/snapshot", {"run": "resnet50"}).status_code == 200


def test_bad_snapshot_parameters(memory_server):
    cases = [
        ({"run": "nope"}, 404), ({"run": "legacy"}, 404), ({"run": "resnet50", "file": "other.pickle"}, 404),
        ({"run": "resnet50", "device": 3}, 404), ({"run": "resnet50", "device": "x"}, 400),
    ]
    for params, status in cases:
        response = memory_server.get("/api/snapshot/timeline", params)
        assert response.status_code == status, (params, response.text)
        assert set(response.json()) == {"error"}
    too_far = memory_server.get("/api/snapshot/state", {"run": "resnet50", "at": 10**7})
    assert too_far.status_code == 400 and "entries" in too_far.json()["error"]["message"]


def test_hostile_snapshots_are_refused_without_holding_up_other_requests(memory_server):
    answers = {}
    slow = threading.Thread(target=lambda: answers.setdefault("slow.pickle", memory_server.get(
        "/api/snapshot", {"run": "hostile", "file": "slow.pickle"}, timeout=120)))
    slow.start()
    slowest = 0.0
    while slow.is_alive():  # the server answers others while the pickle hashes away in its own process
        start = time.perf_counter()
        assert memory_server.get("/api/runs", timeout=10).status_code == 200
        slowest = max(slowest, time.perf_counter() - start)
        time.sleep(0.1)
    assert slowest < 2, f"/api/runs took {slowest:.1f} s while a snapshot loaded"
    expected = {"slow.pickle": "processor time", "laughs.pickle": "billion laughs",
                "bomb.pickle.gz": "inflates beyond this server's limit of 64 MiB"}
    answers["laughs.pickle"] = memory_server.get("/api/snapshot/timeline", {"run": "hostile", "file": "laughs.pickle"})
    answers["bomb.pickle.gz"] = memory_server.get("/api/snapshot/state", {"run": "hostile", "file": "bomb.pickle.gz"})
    for name, words in expected.items():
        response = answers[name]
        assert response.status_code == 422 and words in response.json()["error"]["message"], response.text
    # Asked again, each answers its remembered refusal at once (loading slow.pickle took seconds).
    for name, words in expected.items():
        start = time.perf_counter()
        response = memory_server.get("/api/snapshot/sites", {"run": "hostile", "file": name})
        assert time.perf_counter() - start < 1
        assert response.status_code == 422 and words in response.json()["error"]["message"]
