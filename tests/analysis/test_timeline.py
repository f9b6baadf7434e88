"""Trace view layout, windows, search and counters (server/analysis/timeline.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from profboard.server.analysis import timeline
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
