"""Trace view layout, windows, search and counters (server/analysis/timeline.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from profboard.server.analysis import lod, timeline
from profboard.server.analysis.flows import build_flows
from profboard.server.analysis.names import BadPattern, regex_mask
from profboard.server.analysis.optree import build_op_tree
from synth import TC_GEMM, Trace, parse


def layout_of(t: Trace):
    tables = parse(t.build())
    return tables, timeline.build_layout(tables)


def two_lanes() -> Trace:
    t = Trace()
    t.step(1, 0, 1000)
    t.op("aten::linear", 10, 200)
    t.op("aten::addmm", 20, 100)
    t.op("aten::relu", 300, 50, tid=2000)
    t.launch(30, 5, 400, 50, name=TC_GEMM)
    t.kernel("overlapping", 420, 50)  # overlaps the GEMM on the same stream
    return t


def test_lanes_rows_and_labels():
    tables, layout = layout_of(two_lanes())
    names = [(lane["kind"], lane["name"]) for lane in layout.lanes]
    assert names == [("cpu", "thread 1000"), ("cpu", "thread 2000"), ("gpu", "stream 7")]
    main, _, stream = layout.lanes
    assert main["rows"] == 4 and main["events"] == 4  # step > linear > addmm > the launch call
    assert stream["rows"] == 2 and stream["events"] == 2  # the overlapping kernel gets its own row
    assert layout.extent == (0.0, 1000.0)


def test_window_boxes_merge_narrow_events_and_account_for_everything():
    t = Trace()
    t.op("aten::big", 0, 1000)
    for i in range(100):  # 100 events of 1 us, 2 us apart
        t.op("aten::tiny", 10 + 2 * i, 1)
    t.op("aten::after", 600, 100)
    tables, layout = layout_of(t)
    out = timeline.window(tables, layout, 0, 1000, 100)  # 10 us per pixel
    (lane,) = out["lanes"]
    names = [out["names"][i] for i in lane["boxes"]["name"]]
    assert sorted(names) == ["aten::after", "aten::big"]
    assert lane["merged"]["count"] == [100] and lane["merged"]["busy_us"] == [100.0]
    assert lane["merged"]["kind"] == [timeline.KINDS.index("cpu_op")]
    assert lane["merged"]["start_us"] == [10.0] and lane["merged"]["end_us"] == [209.0]
    zoomed = timeline.window(tables, layout, 0, 99, 990)["lanes"][0]  # 0.1 us per pixel: all visible
    assert len(zoomed["boxes"]["id"]) == 1 + 45 and zoomed["merged"]["count"] == []


def test_window_caps_boxes_per_lane(monkeypatch):
    monkeypatch.setattr(timeline, "MAX_BOXES_PER_LANE", 10)
    t = Trace()
    for i in range(50):
        t.op("aten::x", 10 * i, 5)
    tables, layout = layout_of(t)
    lane = timeline.window(tables, layout, 0, 500, 2000)["lanes"][0]
    assert len(lane["boxes"]["id"]) <= 10
    assert len(lane["boxes"]["id"]) + sum(lane["merged"]["count"]) == 50


def busy_trace(seed: int = 0) -> Trace:
    """Bursts of 1-2 us events with gaps of 0.5-3 us between idle stretches of 0.1-3 ms, around
    longer events that nest runtime calls and tiny ops (and some an op that outlasts them), on two
    threads, and kernels on a stream (some overlapping, so a second row), over about 0.1 s: about
    5,000 events."""
    rng = np.random.default_rng(seed)
    t = Trace()
    t.annotation("step", 0, 100_000)
    for tid, stream in ((1000, 7), (2000, 8)):
        now = 10.0
        while now < 95_000:
            if rng.random() < 0.3:  # a long operator with runtime calls and tiny ops inside
                dur = float(rng.uniform(50, 800))
                t.op("aten::long", now, dur, tid=tid)
                inner = now + 1
                while inner < now + dur - 5:
                    small = float(rng.uniform(0.5, 2))
                    t.runtime("cudaLaunchKernel", inner, small, tid=tid) if rng.random() < 0.5 else \
                        t.op("aten::tiny", inner, small, tid=tid)
                    inner += small + float(rng.uniform(0.5, 3))
                if rng.random() < 0.3:  # one that outlasts its parent
                    t.op("aten::outlasts", now + dur - 2, float(rng.uniform(3, 400)), tid=tid)
                now += dur + float(rng.uniform(1, 5))
            for _ in range(int(rng.integers(20, 120))):  # a burst of tiny events
                small = float(rng.uniform(0.5, 2))
                t.runtime("cudaLaunchKernel", now, small, tid=tid)
                t.kernel("k", now + 30, small, stream=stream)
                if rng.random() < 0.05:
                    t.kernel("k_side", now + 30.2, small, stream=stream)  # overlaps: a second row
                now += small + float(rng.uniform(0.5, 3))
            now += float(rng.uniform(100, 3000))
    return t


def walk(lo: float, hi: float) -> list[tuple[float, float]]:
    """The whole trace, zooming in 1.6x a step towards 37 % of the way in with a small pan each
    step, down to 2 us, then out by 3x a step."""
    out = [(lo, hi)]
    center, width = lo + 0.37 * (hi - lo), hi - lo
    while width > 2:
        width /= 1.6
        center += 0.03 * width
        out.append((center - width / 2, center + width / 2))
    while width < hi - lo:
        width *= 3
        center -= 0.1 * width
        out.append((center - width / 2, center + width / 2))
    return out


def covered(starts: list[float], ends: list[float], lo: float, hi: float) -> np.ndarray:
    """Which of the window's `len(x)` sample points the intervals cover."""
    x = np.linspace(lo, hi, 4001)
    hit = np.zeros(len(x), dtype=bool)
    for a, b in zip(starts, ends):
        hit |= (x >= a) & (x <= b)
    return hit


@pytest.fixture(scope="module")
def busy():
    tables, layout = layout_of(busy_trace())
    return tables, layout, lod.build_blocks(tables, layout)


@pytest.mark.parametrize("width_px, max_boxes", [
    pytest.param(700, timeline.MAX_BOXES_PER_LANE, id="700px"),
    pytest.param(700, 25, id="700px-25-boxes"),
    pytest.param(60, timeline.MAX_BOXES_PER_LANE, id="60px"),
])
def test_window_from_blocks_is_the_window_from_events_at_every_zoom(busy, monkeypatch, width_px, max_boxes):
    monkeypatch.setattr(timeline, "MAX_BOXES_PER_LANE", max_boxes)
    tables, layout, blocks = busy
    steps = walk(*layout.extent)
    levels = {lod.level_for(blocks, (hi - lo) / width_px) for lo, hi in steps}
    assert -1 in levels and len(levels) >= 4  # the events zoomed in, and three levels or more
    for lo, hi in steps:
        ours = timeline.window(tables, layout, lo, hi, width_px, blocks=blocks)
        read = timeline.window(tables, layout, lo, hi, width_px)
        assert ours["names"] == read["names"]
        for got, want in zip(ours["lanes"], read["lanes"]):
            assert got["boxes"] == want["boxes"]
            assert len(got["boxes"]["id"]) <= max_boxes
            g, w = got["merged"], want["merged"]
            assert (g["start_us"], g["end_us"], g["row"], g["count"]) == (w["start_us"], w["end_us"], w["row"], w["count"])
            assert g["busy_us"] == pytest.approx(w["busy_us"], rel=1e-12)
            for row in set(w["row"]):  # what the page paints: equal within a pixel
                mine = [i for i, r in enumerate(g["row"]) if r == row]
                theirs = [i for i, r in enumerate(w["row"]) if r == row]
                assert (covered([g["start_us"][i] for i in mine], [g["end_us"][i] for i in mine], lo, hi)
                        == covered([w["start_us"][i] for i in theirs], [w["end_us"][i] for i in theirs], lo, hi)).all()
            stream = layout.lanes[got["id"]]["kind"] == "gpu"
            assert g["kind"] == w["kind"] or not stream  # one kind per stream row: the same kind


def test_window_from_blocks_accounts_for_every_event_in_it(busy):
    tables, layout, blocks = busy
    ts, dur = tables.events["ts"].to_numpy(), tables.events["dur"].to_numpy()
    for lo, hi in walk(*layout.extent):
        out = timeline.window(tables, layout, lo, hi, 500, blocks=blocks)
        for lane in out["lanes"]:
            rows = np.flatnonzero((layout.lane_of == lane["id"]) & (ts <= hi) & (ts + dur >= lo))
            boxes, merged = lane["boxes"], lane["merged"]
            assert len(boxes["id"]) + sum(merged["count"]) == len(rows)
            assert sum(boxes["dur_us"]) + sum(merged["busy_us"]) == pytest.approx(dur[rows].sum(), rel=1e-9)


def test_levels_keep_only_widths_that_merge():
    t = Trace()
    for i in range(100):  # 1 us every 10 us: 9 us gaps
        t.op("aten::tiny", 10 * i, 1)
    tables, layout = layout_of(t)
    blocks = lod.build_blocks(tables, layout)
    # 1 and 4 us merge nothing (100 blocks, more than a quarter of 100 events); 16, 64 and 256 us
    # merge all into one; 1024 us is longer than the trace (991 us)
    assert blocks.width_us.tolist() == [16, 64, 256]
    assert np.diff(blocks.bounds).tolist() == [1, 1, 1] and blocks.wide.tolist() == []
    assert all(isinstance(getattr(blocks, f), np.ndarray) for f in blocks.__dataclass_fields__)  # storable
    # [305, 705] at 20 us a pixel reads the 16 us level: the block cut to events 31..70
    (lane,) = timeline.window(tables, layout, 305, 705, 20, blocks=blocks)["lanes"]
    assert lane["merged"]["count"] == [40] and lane["merged"]["busy_us"] == [40.0]
    assert lane["merged"]["start_us"] == [310.0] and lane["merged"]["end_us"] == [701.0]


def test_window_from_blocks_reads_an_event_that_outlasts_its_parent():
    t = Trace()
    t.op("aten::parent", 0, 60)
    t.op("aten::outlasts", 50, 1500)  # ends at 1550, after its parent: nested, clipped to 60
    t.op("aten::next_parent", 1990, 110)
    t.op("aten::next", 2000, 1)  # the row below, 450 us after aten::outlasts: one block at 1024 us
    for i in range(100):
        t.op("aten::tiny", 5000 + 2 * i, 1)
    t.op("aten::last", 9000, 1)
    tables, layout = layout_of(t)
    blocks = lod.build_blocks(tables, layout)
    assert lod.level_for(blocks, 1100) >= 0 and blocks.width_us[lod.level_for(blocks, 1100)] == 1024
    # [200, 1300] at one pixel: aten::outlasts alone, before the row's first event in the window
    for answer in (timeline.window(tables, layout, 200, 1300, 1, blocks=blocks), timeline.window(tables, layout, 200, 1300, 1)):
        (lane,) = answer["lanes"]
        assert lane["boxes"]["id"] == [] and lane["merged"]["count"] == [1] and lane["merged"]["busy_us"] == [1500.0]
        assert (lane["merged"]["start_us"], lane["merged"]["end_us"]) == ([50.0], [1550.0])


def test_blocks_of_several_kinds_take_the_kind_of_most_busy_time():
    t = Trace()
    for i in range(10):  # 10 runtime calls of 1 us, then 5 ops of 3 us, 1 us apart
        t.runtime("cudaLaunchKernel", 2 * i, 1)
    for i in range(5):
        t.op("aten::tiny", 20 + 4 * i, 3)
    t.op("aten::far", 5000, 1)
    tables, layout = layout_of(t)
    blocks = lod.build_blocks(tables, layout)
    (lane,) = timeline.window(tables, layout, 0, 5001, 50, blocks=blocks)["lanes"]  # 100 us a pixel
    # runtime calls 10 us busy, ops 15 us
    assert lane["merged"]["count"] == [15, 1] and lane["merged"]["busy_us"] == [25.0, 1.0]
    assert lane["merged"]["kind"] == [timeline.KINDS.index("cpu_op")] * 2


def test_search_and_bad_regex():
    tables, layout = layout_of(two_lanes())
    found = timeline.search(tables, layout, "ATEN::")
    assert [m["name"] for m in found["matches"]] == ["aten::linear", "aten::addmm", "aten::relu"]
    assert timeline.search(tables, layout, r"^aten::(relu|addmm)$", regex=True)["total"] == 2
    with pytest.raises(BadPattern):
        timeline.search(tables, layout, "(", regex=True)
    with pytest.raises(BadPattern, match="escape"):  # RE2 has no backreferences
        timeline.search(tables, layout, r"(a)\1", regex=True)


def test_search_regex_that_backtracks_is_linear():
    """`(((a*)*)*)*b` made Python's re search each name in exponential time, freezing the server
    (62 s for ten levels on a real trace); RE2 answers at once."""
    t = Trace()
    for i in range(200):
        t.op("a" * 40 + str(i), 10 * i, 5)
    tables, layout = layout_of(t)
    started = time.perf_counter()
    found = timeline.search(tables, layout, "((((((((((a*)*)*)*)*)*)*)*)*)*)*b", regex=True)
    assert found["total"] == 0
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("pattern, expected", [
    pytest.param("CONV", ["aten::conv2d", "conv\nnewline"], id="case-insensitive"),
    pytest.param("^aten", ["aten::conv2d", "aten::mm"], id="caret-at-each-name"),
    pytest.param("mm$", ["aten::mm"], id="dollar-at-each-name"),
    pytest.param("conv.*newline", [], id="never-across-a-newline"),
    pytest.param("a?", ["aten::conv2d", "aten::mm", "conv\nnewline", "cudaLaunchKernel"], id="empty-match"),
    pytest.param("kernel|mm", ["aten::mm", "cudaLaunchKernel"], id="alternation"),
])
def test_regex_mask(pattern, expected):
    texts = ["aten::conv2d", "aten::mm", "conv\nnewline", "cudaLaunchKernel"]
    assert [t for t, hit in zip(texts, regex_mask(texts, pattern)) if hit] == expected


def test_counters_utilization_and_memory():
    t = Trace()
    t.kernel("k", 0, 50, blocks_per_sm=0.5)
    t.kernel("k", 25, 50, blocks_per_sm=0.25)
    t.memory(10, 100, 1, 100, 1000)
    t.memory(60, 50, 2, 150, 1000)
    tables = parse(t.build())
    series = {s["id"]: s for s in timeline.counters(tables, 0, 100, 4)}
    assert series["gpu0_utilization"]["value"] == [1.0, 1.0, 1.0, 0.0]
    assert series["gpu0_sm_efficiency"]["value"] == [0.5, 0.75, 0.25, 0.0]
    assert series["gpu0_memory_allocated"]["value"] == [100.0, 100.0, 150.0, 150.0]


def test_event_fields_and_links():
    t = Trace()
    op = t.op("aten::mm", 0, 100)
    corr = t.launch(10, 5, 200, 30, name=TC_GEMM, external_id=op["args"]["External id"])
    tables, layout = layout_of(t)
    tree = build_op_tree(tables.events)
    pairs = build_flows(tables, layout.lane_of >= 0)
    names = tables.events["name"].astype(str).to_numpy()
    kernel = int(np.flatnonzero(names == TC_GEMM)[0])
    links = timeline.event_links(tables, layout, tree, pairs, kernel)
    assert {(l["relation"], l["name"]) for l in links} == {("launched by", "cudaLaunchKernel"), ("operator", "aten::mm")}
    mm = int(np.flatnonzero(names == "aten::mm")[0])
    links = timeline.event_links(tables, layout, tree, pairs, mm)
    assert {(l["relation"], l["name"]) for l in links} == {("launches", TC_GEMM)}
    assert timeline.event_fields(tables, kernel)["correlation"] == corr


def test_forward_and_backward_ops_link_through_fwdbwd_flows():
    t = Trace()
    t.op("aten::mm", 0, 10)
    t.op("MmBackward0", 100, 20, tid=2000)
    t.add({"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 7, "pid": 1000, "tid": 1000, "ts": 0})
    t.add({"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 7, "pid": 1000, "tid": 2000, "ts": 100, "bp": "e"})
    tables, layout = layout_of(t)
    tree = build_op_tree(tables.events)
    pairs = build_flows(tables, layout.lane_of >= 0)
    names = tables.events["name"].astype(str).to_numpy()
    fwd, bwd = (int(np.flatnonzero(names == n)[0]) for n in ("aten::mm", "MmBackward0"))
    assert [(l["relation"], l["id"]) for l in timeline.event_links(tables, layout, tree, pairs, fwd)] == [("backward", bwd)]
    assert [(l["relation"], l["id"]) for l in timeline.event_links(tables, layout, tree, pairs, bwd)] == [("forward", fwd)]
