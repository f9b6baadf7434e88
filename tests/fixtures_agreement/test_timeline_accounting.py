"""Trace view windows drop nothing: on real traces, for windows from the whole trace down to a
few microseconds, each lane's boxes plus merged blocks hold exactly the raw events of that
thread or stream that overlap the window (counts and summed durations), recomputed from the
raw JSON with plain Python."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures"
TRACES = [p for rel in ("h100/resnet50_fp32", "h200x4/ddp_resnet50", "kineto_samples/resnet50_num_workers_0")
          for p in sorted((FIXTURES / rel).glob("*.pt.trace.json*"))[:1]]
ZOOMS = (1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-5)

pytestmark = pytest.mark.skipif(not TRACES, reason=f"fixture traces not found under {FIXTURES}")


@lru_cache(maxsize=1)
def raw_by_thread(path: Path) -> dict[tuple[str, str], list[tuple[float, float]]]:
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as f:
        events = json.load(f)["traceEvents"]
    out = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float)) \
                and e["dur"] >= 0:
            out[(str(e.get("pid")), str(e.get("tid")))].append((float(e["ts"]), float(e["dur"])))
    return out


@lru_cache(maxsize=1)
def ours(path: Path):
    from profboard.server.analysis import timeline
    from profboard.server.trace.load import load_trace

    tables = load_trace(str(path), path.stat().st_size, path.stat().st_mtime)
    return tables, timeline.build_layout(tables)


def window_at(layout, zoom: float) -> tuple[float, float]:
    """A window `zoom` times the trace's length, centred 43 % of the way in."""
    lo, hi = layout.extent
    center = lo + 0.43 * (hi - lo)
    return center - zoom * (hi - lo) / 2, center + zoom * (hi - lo) / 2


@pytest.mark.parametrize("zoom", ZOOMS)
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_boxes_and_merged_blocks_account_for_every_raw_event(path, zoom):
    from profboard.server.analysis import timeline

    tables, layout = ours(path)
    start, end = window_at(layout, zoom)
    out = timeline.window(tables, layout, start, end, 1400)
    events = tables.events
    raw = raw_by_thread(path)
    checked = 0
    for lane in out["lanes"]:
        boxes, merged = lane["boxes"], lane["merged"]
        # the lane's (pid, tid), from any of its events
        any_row = int(layout.order[layout.lane_of[layout.order] == lane["id"]][0])
        key = (str(events["pid"].iat[any_row]), str(events["tid"].iat[any_row]))
        inside = [(ts, dur) for ts, dur in raw[key] if ts <= end and ts + dur >= start]
        got_count = len(boxes["id"]) + sum(merged["count"])
        got_time = sum(boxes["dur_us"]) + sum(merged["busy_us"])
        assert got_count == len(inside), (lane["id"], key)
        assert got_time == pytest.approx(sum(d for _, d in inside), rel=1e-9, abs=1e-6), (lane["id"], key)
        assert len(boxes["id"]) <= timeline.MAX_BOXES_PER_LANE
        checked += len(inside)
    assert checked > 0 or zoom < 1e-3


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_events_on_one_row_never_overlap(path):
    """Python frames and record_function ranges overlap in real traces; they must not share a row."""
    _, layout = ours(path)
    for (lane, row), (a, b) in layout.segments.items():
        overlap = layout.start[a + 1:b] < layout.end[a:b - 1] - 1e-3
        assert not overlap.any(), (lane, row, int(layout.order[a + 1 + overlap.argmax()]))


@lru_cache(maxsize=1)
def raw_flow_pairs(path: Path) -> list[tuple[str, tuple[float, float], tuple[float, float]]]:
    """(kind, (start, end) of one end, of the other) for every launch and every fwdbwd pair, from
    the raw JSON: launches by correlation id, fwdbwd by the operator starting at each flow point."""
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as f:
        events = json.load(f)["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]
    calls, work, ops = defaultdict(list), defaultdict(list), {}
    for e in complete:
        span = (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        cat, corr = str(e.get("cat")).lower(), (e.get("args") or {}).get("correlation")
        if cat in ("cuda_runtime", "cuda_driver", "runtime") and corr is not None:  # legacy Kineto: "Runtime"
            calls[corr].append(span)
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset") and corr is not None:
            work[corr].append(span)
        elif cat in ("cpu_op", "operator"):
            ops.setdefault((str(e["pid"]), str(e["tid"]), round(float(e["ts"]) * 1000)), span)
    pairs = [("ac2g", c, w) for corr in calls for c in calls[corr] for w in work.get(corr, [])]
    points = defaultdict(dict)
    for e in events:
        if e.get("cat") == "fwdbwd" and e.get("ph") in ("s", "f"):
            op = ops.get((str(e["pid"]), str(e["tid"]), round(float(e["ts"]) * 1000)))
            if op:
                points[e["id"]][e["ph"]] = op
    pairs += [("fwdbwd", p["s"], p["f"]) for p in points.values() if len(p) == 2]
    return pairs


@pytest.mark.parametrize("zoom", ZOOMS)
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name)
def test_window_flows_are_the_raw_pairs_with_an_end_inside(path, zoom):
    from profboard.server.analysis import flows

    tables, layout = ours(path)
    start, end = window_at(layout, zoom)
    index = flows.build_flows(tables, layout.lane_of >= 0)
    total, _ = flows.in_window(index, start, end)
    touches = lambda span: span[0] <= end and span[1] >= start  # noqa: E731
    expected = [kind for kind, a, b in raw_flow_pairs(path) if touches(a) or touches(b)]
    assert total == len(expected)
    answer = flows.window_flows(tables, index, layout.lane_of, layout.row_of, start, end)
    if total <= flows.MAX_WINDOW_FLOWS:
        assert sorted(answer["cat"]) == sorted(expected)
