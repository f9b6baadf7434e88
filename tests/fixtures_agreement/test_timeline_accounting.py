"""Trace view windows drop nothing: on real traces, for windows from the whole trace down to a
few microseconds, each lane's boxes plus merged blocks hold exactly the raw events of that
thread or stream that overlap the window (counts and summed durations), recomputed from the
raw JSON with plain Python."""

from __future__ import annotations

from collections import defaultdict

import pytest

from shared_traces import FixtureTrace, first_trace

FIRST_TRACES = first_trace("h100/resnet50_fp32", "h200x4/ddp_resnet50", "kineto_samples/resnet50_num_workers_0")
ZOOMS = (1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-5)


def _raw_by_thread(trace: FixtureTrace) -> dict[tuple[str, str], list[tuple[float, float]]]:
    out = defaultdict(list)
    for e in trace.raw["traceEvents"]:
        if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float)) \
                and e["dur"] >= 0:
            out[(str(e.get("pid")), str(e.get("tid")))].append((float(e["ts"]), float(e["dur"])))
    return out


def raw_by_thread(trace: FixtureTrace) -> dict[tuple[str, str], list[tuple[float, float]]]:
    return trace.derived(_raw_by_thread)


def _layout(trace: FixtureTrace):
    from profboard.server.analysis import timeline

    return timeline.build_layout(trace.tables)


def _blocks(trace: FixtureTrace):
    from profboard.server.analysis import lod

    return lod.build_blocks(trace.tables, trace.derived(_layout))


def ours(trace: FixtureTrace):
    return trace.tables, trace.derived(_layout)


def window_at(layout, zoom: float) -> tuple[float, float]:
    """A window `zoom` times the trace's length, centred 43 % of the way in."""
    lo, hi = layout.extent
    center = lo + 0.43 * (hi - lo)
    return center - zoom * (hi - lo) / 2, center + zoom * (hi - lo) / 2


@pytest.mark.parametrize("path", ["events", "blocks"])
@pytest.mark.parametrize("zoom", ZOOMS)
@FIRST_TRACES
def test_boxes_and_merged_blocks_account_for_every_raw_event(fixture_trace, zoom, path):
    """Whether a window reads the events or the level-of-detail blocks the server keeps."""
    from profboard.server.analysis import timeline

    tables, layout = ours(fixture_trace)
    start, end = window_at(layout, zoom)
    blocks = fixture_trace.derived(_blocks) if path == "blocks" else None
    out = timeline.window(tables, layout, start, end, 1400, blocks=blocks)
    events = tables.events
    raw = raw_by_thread(fixture_trace)
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


@FIRST_TRACES
def test_events_on_one_row_never_overlap(fixture_trace):
    """Python frames and record_function ranges overlap in real traces; they must not share a row."""
    _, layout = ours(fixture_trace)
    for (lane, row), (a, b) in layout.segments.items():
        overlap = layout.start[a + 1:b] < layout.end[a:b - 1] - 1e-3
        assert not overlap.any(), (lane, row, int(layout.order[a + 1 + overlap.argmax()]))


def _raw_flow_pairs(trace: FixtureTrace) -> list[tuple[str, tuple[float, float], tuple[float, float]]]:
    """(kind, (start, end) of one end, of the other) for every launch and every fwdbwd pair, from
    the raw JSON: launches by correlation id, fwdbwd by the operator starting at each flow point."""
    events = trace.raw["traceEvents"]
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
@FIRST_TRACES
def test_window_flows_are_the_raw_pairs_with_an_end_inside(fixture_trace, zoom):
    from profboard.server.analysis import flows

    tables, layout = ours(fixture_trace)
    start, end = window_at(layout, zoom)
    index = flows.build_flows(tables, layout.lane_of >= 0)
    total, _ = flows.in_window(index, start, end)
    touches = lambda span: span[0] <= end and span[1] >= start  # noqa: E731
    expected = [kind for kind, a, b in fixture_trace.derived(_raw_flow_pairs) if touches(a) or touches(b)]
    assert total == len(expected)
    answer = flows.window_flows(tables, index, layout.lane_of, layout.row_of, start, end)
    if total <= flows.MAX_WINDOW_FLOWS:
        assert sorted(answer["cat"]) == sorted(expected)
