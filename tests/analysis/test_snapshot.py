"""Allocator snapshots (server/snapshot/): safe loading, totals, timeline, state replay, sites.

Hand-built snapshots use a 2 MiB segment at SEG (or two) and a few blocks; each expected
number is spelled out next to the assertion.
"""

from __future__ import annotations

import copyreg
import gzip
import importlib.util
import json
import os
import pickle
import pickletools
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from processes import memory_rise

from profboard.server.snapshot import (NotASnapshot, SnapshotError, SnapshotTooLarge, UnsafeSnapshot,
                                       active_timeline, allocator_state, build_history, load_snapshot,
                                       summary, top_sites)
from profboard.server.snapshot.cache import SnapshotCache
from profboard.server.snapshot.worker import AnalysisFailed, Loaded

MiB = 2**20
SEG = 0x7F0000000000
REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures"


# ---------------------------------------------------------------- builders


def frames(*lines: int, file: str = "/home/me/train.py") -> list[dict]:
    return [{"filename": file, "line": line, "name": "step"} for line in lines]


def block(addr: int, size: int, state: str = "active_allocated", requested: int | None = None, **extra) -> dict:
    return {"address": addr, "size": size, "requested_size": size if requested is None else requested,
            "state": state, "frames": extra.get("frames", frames(1)), **extra}


def segment(addr: int, blocks: list[dict], total: int = 2 * MiB, **extra) -> dict:
    used = [b for b in blocks if b["state"] != "inactive"]
    covered = sum(b["size"] for b in blocks)
    if covered < total:  # the rest of the segment is one inactive block
        blocks = blocks + [block(addr + covered, total - covered, "inactive")]
    return {"device": 0, "address": addr, "total_size": total, "stream": 0, "segment_type": "small",
            "allocated_size": sum(b["size"] for b in used if b["state"] == "active_allocated"),
            "active_size": sum(b["size"] for b in used),
            "requested_size": sum(b["requested_size"] for b in used), "blocks": blocks, **extra}


def ev(action: str, addr: int = 0, size: int = 0, t: float | None = None, **extra) -> dict:
    out = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": extra.pop("frames", frames(2))}
    if t is not None:
        out["time_us"] = t
    return {**out, **extra}


def snap(segments: list[dict], entries: list[dict] | None) -> dict:
    out = {"segments": segments}
    if entries is not None:
        out["device_traces"] = [entries]
    return out


def roundtrip(s: dict) -> dict:
    """Through pickle and the restricted loader, as a real file would go."""
    return load_snapshot(pickle.dumps(s, protocol=4))


def blocks_of(state: dict) -> list[tuple[int, int, str]]:
    return [(b["address"] - SEG, b["size_bytes"], b["state"]) for s in state["segments"] for b in s["blocks"]]


def stack_agrees(tl: dict) -> None:
    """Bands and `other_bytes` add up to `total_bytes` at every point."""
    stacked = np.array(tl["other_bytes"], dtype=np.int64)
    for band in tl["bands"]:
        stacked[band["first"]: band["last"] + 1] += band["size_bytes"]
    assert stacked.tolist() == tl["total_bytes"]
    assert min(tl["other_bytes"]) >= 0


# ---------------------------------------------------------------- recorded snapshots


@dataclass(frozen=True)
class Recorded:
    """A snapshot PyTorch recorded, and what it holds."""

    path: Path
    segments: int
    entries: int  # in the recorded history
    allocations: int
    model_file: str  # where its forward allocations are made
    cxx_frames: bool  # recorded with C++ frames: autograd-thread allocations name their ATen operator


RECORDED = {
    # the demo's resnet50_fp32 (the collectors' model; Python frames only), in the repository
    "demo": Recorded(REPO / "examples/logdir/resnet50_fp32/memory_snapshot.pickle.gz", 104, 5136, 1712,
                     "collectors/models.py", False),
    # torchvision's ResNet-18, in ../shared/fixtures
    "shared": Recorded(FIXTURES / "snapshots/resnet18_snapshot.pickle", 44, 3243, 1233,
                       "torchvision/models/resnet.py", True),
}


@pytest.fixture(scope="module", params=sorted(RECORDED))
def recorded(request) -> Recorded:
    if request.param == "shared":
        request.getfixturevalue("fixtures_dir")  # skips when ../shared/fixtures is absent
    return RECORDED[request.param]


@pytest.fixture(scope="module")
def recorded_snap(recorded) -> dict:
    return load_snapshot(recorded.path)


def test_recorded_summary_agrees_with_segment_sizes(recorded, recorded_snap):
    segs = recorded_snap["segments"]
    s = summary(recorded_snap)
    assert s["devices"] == [0] and s["segments"] == len(segs) == recorded.segments
    assert s["reserved_bytes"] == sum(g["total_size"] for g in segs)
    assert s["allocated_bytes"] == sum(g["allocated_size"] for g in segs)
    assert s["active_bytes"] == sum(g["active_size"] for g in segs)
    assert s["requested_bytes"] == sum(g["requested_size"] for g in segs)
    assert s["inactive_bytes"] == s["reserved_bytes"] - s["active_bytes"]
    assert s["history"] is True and s["trace_entries"] == len(recorded_snap["device_traces"][0]) == recorded.entries
    assert s["per_device"][0]["actions"]["alloc"] == recorded.allocations
    assert s["ooms"]["count"] == 0 and s["warnings"] == []


def live_before_history(snapshot: dict) -> dict[int, int]:
    """Address -> requested bytes of the allocations made before the recorded history: those it frees
    before allocating at their address, and active blocks at addresses it never allocates."""
    entries = snapshot["device_traces"][0]
    allocated_in_history = {e["addr"] for e in entries if e["action"] == "alloc"}
    allocated, live = set(), {}
    for e in entries:
        if e["action"] == "free_completed" and e["addr"] not in allocated:
            live[e["addr"]] = e["size"]
        elif e["action"] == "alloc":
            allocated.add(e["addr"])
    for g in snapshot["segments"]:
        for b in g["blocks"]:
            if b["state"].startswith("active") and b["address"] not in allocated_in_history:
                live[b["address"]] = b["requested_size"]
    return live


def direct_live(snapshot: dict) -> list[int]:
    """Live requested bytes, replayed forwards in plain Python: before the first entry, then after each."""
    entries = snapshot["device_traces"][0]
    total = sum(live_before_history(snapshot).values())
    out, current = [total], {}
    for e in entries:
        if e["action"] == "alloc":
            current[e["addr"]] = e["size"]
            total += e["size"]
        elif e["action"] == "free_completed":
            total -= current.pop(e["addr"], e["size"])
        out.append(total)
    return out


def test_recorded_timeline_peak_equals_direct_recomputation(recorded, recorded_snap):
    tl = active_timeline(recorded_snap, 0, max_allocations=50, max_points=300)
    assert tl["peak"]["bytes"] == max(direct_live(recorded_snap)) == max(tl["total_bytes"])
    assert tl["peak"]["index"] in tl["x"]
    old = live_before_history(recorded_snap)
    assert len(tl["bands"]) == 50 and tl["other_allocations"] == recorded.allocations + len(old) - 50
    assert len(tl["x"]) < 300 + 2 * 50 + 3  # down-sampled
    stack_agrees(tl)
    # the largest 50 allocations became the bands
    made = [e["size"] for e in recorded_snap["device_traces"][0] if e["action"] == "alloc"]
    sizes = sorted(made + list(old.values()), reverse=True)
    assert sorted((b["size_bytes"] for b in tl["bands"]), reverse=True) == sizes[:50]
    # the final point holds the final active blocks' requested bytes
    assert tl["total_bytes"][-1] == sum(g["requested_size"] for g in recorded_snap["segments"])


def test_recorded_state_at_the_end_equals_the_stored_segments(recorded, recorded_snap):
    state = allocator_state(recorded_snap, 0)
    stored = [(b["address"], b["size"], b["state"])
              for g in sorted(recorded_snap["segments"], key=lambda g: g["address"]) for b in g["blocks"]]
    got = [(b["address"], b["size_bytes"], b["state"]) for s in state["segments"] for b in s["blocks"]]
    assert got == stored
    totals, s = state["totals"], summary(recorded_snap)
    for key in ("reserved_bytes", "allocated_bytes", "pending_free_bytes", "inactive_bytes", "requested_bytes"):
        assert totals[key] == s[key], key
    assert state["approximate"] is False and state["warnings"] == []
    last = allocator_state(recorded_snap, 0, at=recorded.entries - 1)
    assert last["segments"] == state["segments"]


def test_recorded_state_replays_segments_back_to_the_start(recorded_snap):
    entries = recorded_snap["device_traces"][0]

    def made(upto: int) -> int:
        """Segment bytes the history's first `upto` entries reserved, less what they released."""
        return sum(e["size"] if e["action"] == "segment_alloc" else -e["size"] for e in entries[:upto]
                   if e["action"] in ("segment_alloc", "segment_free"))

    # what was reserved before the history: the stored segments, less what the whole history reserved
    before = sum(g["total_size"] for g in recorded_snap["segments"]) - made(len(entries))
    assert allocator_state(recorded_snap, 0, at=-1)["totals"]["reserved_bytes"] == before
    at = 1000
    state = allocator_state(recorded_snap, 0, at=at)
    assert state["totals"]["reserved_bytes"] == before + made(at + 1)
    assert state["totals"]["requested_bytes"] == direct_live(recorded_snap)[at + 1]
    assert state["approximate"] is True  # some blocks of that point were freed later: sizes estimated


def test_recorded_top_sites_account_for_every_allocation(recorded, recorded_snap):
    entries = recorded_snap["device_traces"][0]
    sites = top_sites(recorded_snap, None, n=1000)
    old = live_before_history(recorded_snap)
    assert sites["allocations"] == sum(r["calls"] for r in sites["rows"]) == recorded.allocations + len(old)
    assert sites["total_bytes"] == sum(e["size"] for e in entries if e["action"] == "alloc") + sum(old.values())
    assert sum(r["live_bytes"] for r in sites["rows"]) == sum(g["requested_size"] for g in recorded_snap["segments"])
    assert sum(r["peak_bytes"] for r in sites["rows"]) == max(direct_live(recorded_snap))
    totals = [r["total_bytes"] for r in sites["rows"]]
    assert totals == sorted(totals, reverse=True)
    if recorded.cxx_frames:
        # autograd-thread allocations have no Python frames: charged to their ATen operator
        assert "aten::convolution_backward" in [r["site"] for r in sites["rows"]]
    # forward allocations go to the model's line, not to torch.nn internals
    assert any(r["file"] and r["file"].endswith(recorded.model_file) for r in sites["rows"])
    assert not any(r["file"] and "/site-packages/torch/" in r["file"] for r in sites["rows"])


def test_recorded_gzip_and_plain_read_the_same(recorded, recorded_snap, tmp_path):
    data = recorded.path.read_bytes()
    other = gzip.decompress(data) if recorded.path.suffix == ".gz" else gzip.compress(data)
    path = tmp_path / ("snap.pickle" if recorded.path.suffix == ".gz" else "snap.pickle.gz")
    path.write_bytes(other)
    assert summary(load_snapshot(path)) == summary(recorded_snap)


# ---------------------------------------------------------------- replay and pairing edge cases


def test_free_of_an_allocation_made_before_the_history():
    s = roundtrip(snap(
        [segment(SEG, [block(SEG, 1024, requested=1000)])],
        [ev("free_requested", SEG + 4096, 3000), ev("free_completed", SEG + 4096, 3000),
         ev("alloc", SEG, 1000)]))
    tl = active_timeline(s, 0)
    # x = -1: the 3000 B allocation made before the history; after entry 1 it is gone; then 1000 B
    assert tl["x"] == [-1, 0, 1, 2]
    assert tl["total_bytes"] == [3000, 3000, 0, 1000]
    old = next(b for b in tl["bands"] if b["size_bytes"] == 3000)
    assert old["start_index"] == -1 and old["end_index"] == 1 and old["alloc_recorded"] is False
    assert blocks_of(allocator_state(s, 0, at=-1)) == [
        (0, 4096, "inactive"), (4096, 3072, "active_allocated"), (7168, 2 * MiB - 7168, "inactive")]
    assert (4096, 3072, "active_pending_free") in blocks_of(allocator_state(s, 0, at=0))
    assert blocks_of(allocator_state(s, 0, at=1)) == [(0, 2 * MiB, "inactive")]
    assert blocks_of(allocator_state(s, 0)) == [(0, 1024, "active_allocated"), (1024, 2 * MiB - 1024, "inactive")]
    # top sites: the old one has no allocating stack
    rows = {r["site"]: r for r in top_sites(s, 0)["rows"]}
    assert rows["(allocated before the recorded history)"]["total_bytes"] == 3000


def test_block_live_before_the_history_and_never_freed_counts_from_the_start():
    s = roundtrip(snap([segment(SEG, [block(SEG, 512 * 3, requested=1500, frames=[]),
                                      block(SEG + 1536, 512)])],
                       [ev("alloc", SEG + 1536, 512)]))
    tl = active_timeline(s, 0)
    assert tl["total_bytes"] == [1500, 2012]
    assert allocator_state(s, 0, at=-1)["totals"]["allocated_bytes"] == 1536  # exact: it is in the final state
    site = top_sites(s, 0)["rows"]
    assert {r["site"]: r["live_bytes"] for r in site}["(no stack recorded)"] == 1500


def test_segment_alloc_and_free_are_undone():
    a, b = SEG, SEG + 2 * MiB
    s = roundtrip(snap(
        [segment(b, [block(b, 512)])],
        [ev("segment_alloc", a, 2 * MiB), ev("alloc", a, 100), ev("free_requested", a, 100),
         ev("free_completed", a, 100), ev("segment_free", a, 2 * MiB),
         ev("segment_alloc", b, 2 * MiB), ev("alloc", b, 512)]))
    reserved = [allocator_state(s, 0, at=i)["totals"]["reserved_bytes"] for i in range(-1, 7)]
    assert reserved == [0, 2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB, 0, 2 * MiB, 2 * MiB]
    at1 = allocator_state(s, 0, at=1)
    assert at1["segments"][0]["address"] == a and at1["segments"][0]["segment_type"] is None
    assert blocks_of(at1) == [(0, 512, "active_allocated"), (512, 2 * MiB - 512, "inactive")]
    assert blocks_of(allocator_state(s, 0, at=2))[0] == (0, 512, "active_pending_free")
    assert allocator_state(s, 0, at=2)["totals"]["pending_free_bytes"] == 512
    assert allocator_state(s, 0, at=3)["totals"]["active_bytes"] == 0
    assert allocator_state(s, 0, at=1)["approximate"] is True  # 100 B rounded up to a 512 B block
    assert allocator_state(s, 0)["approximate"] is False


def test_expandable_segment_map_and_unmap_are_undone():
    base = SEG
    s = roundtrip(snap(
        [segment(base, [block(base, 512)], total=4 * MiB, is_expandable=True, segment_type="large")],
        [ev("segment_map", base, 2 * MiB), ev("segment_map", base + 2 * MiB, 4 * MiB),
         ev("segment_unmap", base + 4 * MiB, 2 * MiB), ev("alloc", base, 512)]))
    sizes = [[g["total_bytes"] for g in allocator_state(s, 0, at=i)["segments"]] for i in range(-1, 4)]
    # nothing; 2 MiB; 2 + 4 MiB joined; 4 MiB after unmapping the top 2 MiB; unchanged
    assert sizes == [[], [2 * MiB], [6 * MiB], [4 * MiB], [4 * MiB]]


def test_oom_is_reported_without_disturbing_the_curve():
    s = roundtrip(snap([segment(SEG, [block(SEG, 1024)])],
                       [ev("alloc", SEG, 1024, t=10.0),
                        {"action": "oom", "size": 80 * 2**30, "device_free": 3 * MiB, "stream": 0, "frames": [],
                         "time_us": 20.0}]))
    su = summary(s)
    assert su["ooms"] == {"count": 1, "events": [{"device": 0, "index": 1, "time_us": 20.0,
                                                  "size_bytes": 80 * 2**30, "device_free_bytes": 3 * MiB}]}
    assert active_timeline(s, 0)["total_bytes"] == [0, 1024, 1024]
    state = allocator_state(s, 0, at=0)
    assert state["ooms"] == [{"index": 1, "time_us": 20.0, "size_bytes": 80 * 2**30,
                              "device_free_bytes": 3 * MiB, "before": False}]
    assert allocator_state(s, 0)["entry"]["action"] == "oom"


def test_pending_free_at_the_end():
    s = roundtrip(snap([segment(SEG, [block(SEG, 1024, "active_pending_free")])],
                       [ev("alloc", SEG, 1024), ev("free_requested", SEG, 1024)]))
    assert summary(s)["pending_free_bytes"] == 1024 and summary(s)["allocated_bytes"] == 0
    assert blocks_of(allocator_state(s, 0))[0] == (0, 1024, "active_pending_free")
    assert blocks_of(allocator_state(s, 0, at=0))[0] == (0, 1024, "active_allocated")
    assert active_timeline(s, 0)["total_bytes"] == [0, 1024, 1024]  # still active until free_completed


def test_odd_histories_warn_instead_of_failing():
    s = roundtrip(snap([segment(SEG, [block(SEG, 512)])],
                       [ev("alloc", SEG, 512), ev("alloc", SEG, 512),  # a free is missing
                        ev("free_completed", SEG + 512, 10), ev("free_completed", SEG + 512, 10),  # freed twice
                        "not an entry", {"action": "mystery", "addr": "x", "size": None}]))
    tl = active_timeline(s, 0)
    assert tl["total_bytes"][-1] == 512
    assert any("still live" in w for w in tl["warnings"])
    assert any("no live allocation" in w for w in tl["warnings"])
    assert allocator_state(s, 0, at=99)["index"] == 5  # clamped, with a warning
    assert summary(s)["per_device"][0]["actions"]["mystery"] == 1


def test_garbage_values_give_plain_json_and_warnings():
    s = roundtrip({
        "segments": [segment(SEG, [block(SEG, 512)]), "junk",
                     {"device": 0, "address": "0x10", "total_size": None, "stream": {1}, "blocks": "none"},
                     {"device": 0, "address": SEG + 4 * MiB, "total_size": 4096, "segment_type": 7,
                      "blocks": [{"size": "big", "state": "active_allocated", "frames": "none"}, 3]}],
        "device_traces": [[ev("alloc", SEG, 512, t=float("nan")),
                           {"action": "oom", "size": "huge", "device_free": b"x", "time_us": "late"},
                           {"action": "snapshot", "time_us": 10**400},
                           {"action": "alloc", "addr": None, "size": 2**70, "frames": [None, 3]}], "bad"],
        "allocator_settings": {"ok": 1, "weird": {2, 3}}})
    outputs = [summary(s), active_timeline(s, 0), allocator_state(s, 0), allocator_state(s, 0, at=-1),
               top_sites(s), active_timeline(s, 5)]
    for out in outputs:
        json.dumps(out, allow_nan=False)
    assert outputs[0]["allocator_settings"] == {"ok": 1}
    assert outputs[0]["ooms"]["events"][0]["size_bytes"] is None
    assert any("device 5" in w for w in outputs[-1]["warnings"])


def test_no_history_recorded():
    s = roundtrip(snap([segment(SEG, [block(SEG, 1024)])], None))
    su = summary(s)
    assert su["history"] is False and su["trace_entries"] == 0 and su["allocated_bytes"] == 1024
    tl = active_timeline(s, 0)
    assert tl["x"] == [-1] and tl["total_bytes"] == [1024]
    assert blocks_of(allocator_state(s, 0)) == [(0, 1024, "active_allocated"), (1024, 2 * MiB - 1024, "inactive")]


def test_legacy_blocks_without_address_or_frames():
    legacy = {"device": 0, "address": SEG, "total_size": 2 * MiB, "stream": 0, "segment_type": "small",
              "allocated_size": 1024, "active_size": 1024,
              "blocks": [{"size": 1024, "state": "active_allocated", "history": [{"real_size": 1000, "frames": frames(7)}]},
                         {"size": 2 * MiB - 1024, "state": "inactive"}]}
    s = roundtrip({"segments": [legacy]})
    assert summary(s)["requested_bytes"] == 1000
    assert blocks_of(allocator_state(s, 0))[1] == (1024, 2 * MiB - 1024, "inactive")
    assert top_sites(s)["rows"][0]["line"] == 7
    assert summary(load_snapshot(pickle.dumps([legacy])))["allocated_bytes"] == 1024  # bare list form


def test_downsampling_keeps_the_peak_and_the_stack():
    # 20 000 allocations of 1 KiB freed right away, with one 1 MiB spike in the middle
    entries = []
    for i in range(20000):
        size = MiB if i == 12345 else 1024
        entries += [ev("alloc", SEG + i * 4096, size), ev("free_completed", SEG + i * 4096, size)]
    s = snap([segment(SEG, [], total=128 * MiB)], entries)
    tl = active_timeline(s, 0, max_allocations=5, max_points=200)
    assert len(tl["x"]) <= 200 + 2 * 5 + 3
    assert tl["peak"] == {"index": 2 * 12345, "bytes": MiB, "time_us": None}
    assert max(tl["total_bytes"]) == MiB and 2 * 12345 in tl["x"]
    stack_agrees(tl)


def test_timeline_bands_are_the_largest_allocations_in_allocation_order():
    sizes = [3000, 100, 5000, 200, 4000]
    entries = [ev("alloc", SEG + 8192 * i, size) for i, size in enumerate(sizes)]
    s = snap([segment(SEG, [block(SEG + 8192 * i, -(-size // 512) * 512, requested=size)
                            for i, size in enumerate(sizes)], total=2 * MiB)], entries)
    tl = active_timeline(s, 0, max_allocations=3)
    assert [b["size_bytes"] for b in tl["bands"]] == [3000, 5000, 4000]
    assert tl["other_bytes"] == [0, 0, 100, 100, 300, 300]
    assert tl["sites"][tl["bands"][0]["site"]]["site"] == "/home/me/train.py:2 step"


def test_history_built_once_can_be_shared():
    s = snap([segment(SEG, [block(SEG, 512)])], [ev("alloc", SEG, 512)])
    history = build_history(s, 0)
    assert active_timeline(s, 0, history=history) == active_timeline(s, 0)
    assert allocator_state(s, 0, history=history) == allocator_state(s, 0)
    assert top_sites(s, 0, histories={0: history}) == top_sites(s, 0)


# ---------------------------------------------------------------- refusing what is not plain data


class _RunsShell:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


class _OpensFile:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


class _Evaluates:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (eval, (f"open({str(self.path)!r}, 'w')",))


@pytest.mark.parametrize("payload", [_RunsShell, _OpensFile, _Evaluates], ids=["os.system", "open", "builtins.eval"])
def test_code_carrying_pickle_is_refused_and_nothing_runs(payload, tmp_path):
    marker = tmp_path / "ran"
    data = pickle.dumps({"segments": [], "x": payload(marker)})
    with pytest.raises(UnsafeSnapshot, match="refused: the pickle asks for the global"):
        load_snapshot(data)
    assert not marker.exists()
    # the payload is live: an ordinary unpickler runs it (so the check above can fail)
    pickle.loads(data)
    assert marker.exists()


def test_protocol_0_global_is_refused(tmp_path):
    marker = tmp_path / "ran"
    data = f"cos\nsystem\n(Vtouch {marker}\ntR.".encode()
    with pytest.raises(UnsafeSnapshot, match="os.system"):
        load_snapshot(data)
    assert not marker.exists()


def test_pickled_function_and_class_are_refused():
    with pytest.raises(UnsafeSnapshot, match=r"posix.getcwd|os.getcwd"):
        load_snapshot(pickle.dumps({"segments": [], "f": os.getcwd}))
    from collections import OrderedDict
    with pytest.raises(UnsafeSnapshot, match="collections.OrderedDict"):
        load_snapshot(pickle.dumps({"segments": [], "d": OrderedDict(a=1)}))


def test_code_object_is_refused():
    import marshal
    code = compile("print('hi')", "<x>", "exec")
    # a code object cannot be pickled directly; its usual carrier is marshal + a global loader
    data = pickle.dumps({"segments": [], "c": _Carrier(marshal.dumps(code))})
    with pytest.raises(UnsafeSnapshot, match="marshal.loads"):
        load_snapshot(data)


class _Carrier:
    def __init__(self, blob):
        self.blob = blob

    def __reduce__(self):
        import marshal
        return (marshal.loads, (self.blob,))


def test_extension_registry_and_persistent_ids_are_refused(tmp_path):
    code, module = 0x7A11, os.system.__module__  # "posix" on Linux
    copyreg.add_extension(module, "system", code)
    try:
        data = pickle.dumps({"segments": [], "x": _RunsShell(tmp_path / "ran")}, protocol=2)
        assert any(op.name.startswith("EXT") for op, _, _ in pickletools.genops(data))
        with pytest.raises(UnsafeSnapshot, match=f"{module}.system"):
            load_snapshot(data)
    finally:
        copyreg.remove_extension(module, "system", code)
    assert not (tmp_path / "ran").exists()

    class Persistent(pickle.Pickler):
        def persistent_id(self, obj):
            return "handle" if obj == "secret" else None

    import io
    buf = io.BytesIO()
    Persistent(buf).dump({"segments": [], "x": "secret"})
    with pytest.raises(UnsafeSnapshot, match="persistent id"):
        load_snapshot(buf.getvalue())


# ---------------------------------------------------------------- not a snapshot, too large


@pytest.mark.parametrize("data, message", [
    (b"", "empty"),
    (b'{"segments": []}', "not a readable pickle"),
    (b"\x80\x04\x95\x10\x00\x00", "not a readable pickle"),  # truncated
    (pickle.dumps([1, 2, 3]), "holds a list"),
    (pickle.dumps({"traceEvents": []}), "no 'segments'"),
    (b"PK\x03\x04rest", "zip archive"),
    (b"\x1f\x8b\x08\x00garbage", "corrupt|cut short"),
    (gzip.compress(pickle.dumps({"segments": []}))[:-12], "cut short"),
], ids=["empty", "json", "truncated", "list", "no-segments", "zip", "bad-gzip", "cut-short-gzip"])
def test_not_a_snapshot(data, message):
    with pytest.raises(NotASnapshot, match=message):
        load_snapshot(data)


def test_size_limits(tmp_path):
    data = pickle.dumps({"segments": [], "pad": "x" * 5000})
    path = tmp_path / "big.pickle"
    path.write_bytes(data)
    with pytest.raises(SnapshotTooLarge):
        load_snapshot(path, max_bytes=1000)
    assert load_snapshot(path, max_bytes=10_000)["segments"] == []
    bomb = gzip.compress(b"\0" * (10 * MiB))
    with pytest.raises(SnapshotTooLarge, match="inflates"):
        load_snapshot(bomb, max_bytes=MiB)
    with pytest.raises(SnapshotError, match="cannot read"):
        load_snapshot(tmp_path / "missing.pickle")


# ---------------------------------------------------------------- hostile files: bombs, laughs, hangs


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak memory from /proc")
def test_gzip_bomb_snapshot_is_refused_within_its_limit(tmp_path):
    """Refusing a snapshot that inflates past its limit takes the limit plus a few MiB, not twice it."""
    limit = 128 * MiB
    path = tmp_path / "bomb.pickle.gz"
    path.write_bytes(gzip.compress(b"\0" * (3 * limit), 6))
    outcome, peak = memory_rise("from profboard.server.snapshot import load_snapshot",
                                'len(load_snapshot(sys.argv[1], max_bytes=int(sys.argv[2]))["segments"])',
                                str(path), str(limit))
    assert "limit" in outcome
    assert peak < limit + 8 * MiB, f"peak {peak / MiB:.0f} MiB for a {limit // MiB} MiB limit"


def laughs(n: int) -> bytes:
    """n segments that are one segment, holding n blocks that are one block: 8 KB for n = 2000,
    which the analyses walk as 4 million blocks."""
    b = block(SEG, 512)
    s = segment(SEG, [b])
    s["blocks"] = [b] * n
    return pickle.dumps({"segments": [s] * n}, protocol=4)


def nested(depth: int, fan: int = 10) -> list:
    x = ["lol"]
    for _ in range(depth):
        x = [x] * fan
    return x


def deep_list(depth: int) -> bytes:
    """{"segments": [], "x": [[[...]]]} nested `depth` deep, from opcodes (pickle.dumps would recurse)."""
    return b"\x80\x04}(\x8c\x08segments]\x8c\x01x" + b"]" * depth + b"a" * (depth - 1) + b"u."


@pytest.mark.parametrize("data, message", [
    (laughs(2000), "expand"),
    (pickle.dumps({"segments": [], "allocator_settings": {"x": nested(12)}}, protocol=4), "expand"),
    (deep_list(100_000), "nested"),
], ids=["segments-of-blocks", "nested-lists", "deep"])
def test_billion_laughs_is_refused_quickly(data, message):
    assert len(data) < 400_000
    start = time.perf_counter()
    with pytest.raises(SnapshotError, match=message):
        load_snapshot(data)
    assert time.perf_counter() - start < 2


def test_recorded_snapshots_expand_within_the_budget(recorded):
    """Frames shared between entries are no laughs: the budget leaves them room."""
    assert load_snapshot(recorded.path)["segments"]


def test_synthetic_snapshots_expand_within_the_budget():
    spec = importlib.util.spec_from_file_location("bench_snapshot", REPO / "bench/snapshot.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert load_snapshot(pickle.dumps(bench.synthetic(20_000), protocol=4))["segments"]


def test_refusal_is_remembered_until_the_file_changes(tmp_path):
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "x": _RunsShell(tmp_path / "ran")}))
    cache = SnapshotCache(MiB)
    identity = (str(path), path.stat().st_size, path.stat().st_mtime)
    with pytest.raises(UnsafeSnapshot, match="system"):
        cache.get(*identity)
    path.unlink()  # were it read again, the answer would be "cannot read the file"
    with pytest.raises(UnsafeSnapshot, match="system"):
        cache.get(*identity)
    path.write_bytes(pickle.dumps({"segments": []}))  # changed: read again
    cache.get(str(path), path.stat().st_size, path.stat().st_mtime)
    assert not (tmp_path / "ran").exists()


def test_snapshots_answer_from_their_own_process_and_make_room(tmp_path):
    paths = []
    for n in (1, 2):
        path = tmp_path / f"s{n}.pickle"
        path.write_bytes(pickle.dumps(snap([segment(SEG, [block(SEG, 512 * n)])], [ev("alloc", SEG, 512 * n)])))
        paths.append((str(path), path.stat().st_size, path.stat().st_mtime))
    cache = SnapshotCache(MiB, keep=1)
    first = cache.get(*paths[0])
    assert cache.call(*paths[0], Loaded.summary)["allocated_bytes"] == 512
    assert cache.call(*paths[1], Loaded.summary)["allocated_bytes"] == 1024  # closes the first's process
    with pytest.raises(SnapshotError, match="unloaded"):
        first.call(Loaded.devices)
    assert cache.call(*paths[0], Loaded.entries, 0) == 1  # loaded again
    # An analysis that raises is reported; the file is not refused for it.
    with pytest.raises(AnalysisFailed, match="could not analyse"):
        cache.call(*paths[0], Loaded.state, 0, "not an index")
    assert cache.call(*paths[0], Loaded.state, 0, None)["totals"]["allocated_bytes"] == 512


def hash_bomb(depth: int) -> bytes:
    """A dict key that is a pair of pairs of pairs ... `depth` deep: 100 bytes, 2**depth to hash."""
    return b"\x80\x04}(\x8c\x08segments])" + b"2\x86" * depth + b"K\x01u."


def deep_key(depth: int) -> bytes:
    """A dict key nested `depth` deep: hashing it overflows the C stack of the process."""
    return b"\x80\x04}(\x8c\x08segments]N" + b"\x85" * depth + b"K\x01u."


def empty_sets(n: int) -> bytes:
    """n empty sets: one byte of pickle each, about 200 bytes of memory each."""
    return b"\x80\x04}(\x8c\x08segments]\x8c\x01x](" + b"\x8f" * n + b"eu."


@pytest.mark.parametrize("data, message", [
    (hash_bomb(40), "processor time"),
    (deep_key(1_000_000), "crashed"),
    (empty_sets(4_000_000), "memory"),
], ids=["hash-bomb", "deep-key", "empty-sets"])
def test_hostile_pickles_are_stopped_without_stalling_the_caller(data, message, tmp_path):
    """What the unpickler itself does (hash, recurse, allocate) is bounded in its own process;
    the caller's threads keep running meanwhile."""
    path = tmp_path / "hostile.pickle"
    path.write_bytes(data)
    ticks, stop = [], threading.Event()

    def tick() -> None:
        while not stop.wait(0.05):
            ticks.append(time.perf_counter())

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    start = time.perf_counter()
    try:
        with pytest.raises(SnapshotError, match=message):
            SnapshotCache(1 << 30, cpu_seconds=1).get(str(path), len(data), path.stat().st_mtime)
    finally:
        stop.set()
        ticker.join()
    assert time.perf_counter() - start < 30
    gaps = [b - a for a, b in zip([start, *ticks], ticks)]
    assert max(gaps) < 1, f"the caller stalled for {max(gaps):.1f} s"
