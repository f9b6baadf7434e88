"""Several ranks on one timeline, the shaping (web/static/js/lib/rankview.js), run in Chromium on
small inline answers whose expected output can be checked by hand: which ranks, the headers, ids
kept apart per rank, times moved to the common clock."""

from __future__ import annotations

import pytest

from browser_pages import module_runner

pytestmark = pytest.mark.browser

STRIDE = 2 ** 32
HELD = [{"rank": 0, "worker": "a"}, {"rank": 1, "worker": "b"}, {"rank": 2, "worker": "c"}]
CLOCK = {"reference": 0, "straggler": 2, "fastest": 0, "ranks": [
    {"rank": 0, "offset_us": 0.0, "used": 9, "spread_us": 0.0},
    {"rank": 1, "offset_us": None, "used": 0, "spread_us": None},
    {"rank": 2, "offset_us": -1234.5, "used": 9, "spread_us": 1.5}]}


@pytest.fixture
def rv(blank_page):
    """Evaluates `expression` with lib/rankview.js imported as `rv`."""
    return module_runner(blank_page, {"rv": "lib/rankview.js"})


@pytest.mark.parametrize("asked, picked", [
    ("2,0", [2, 0]), (" 1, 1 ,0", [1, 0]), ("auto", [2, 0]), ("7,x", [2, 0]), ("", [2, 0]), ("7,1", [1])])
def test_pick_ranks(rv, asked, picked):
    assert rv("rv.pickRanks(rv.parseRanks(ARG.asked), ARG.held, ARG.clock)",
              {"asked": asked, "held": HELD, "clock": CLOCK}) == picked


def test_pick_ranks_without_a_straggler_takes_the_first_two(rv):
    clock = {**CLOCK, "straggler": None, "fastest": None}
    assert rv("rv.pickRanks([], ARG.held, ARG.clock)", {"held": HELD, "clock": clock}) == [0, 1]


def test_headers_and_notes_name_rank_offset_and_worker(rv):
    got = rv("rv.shownRanks([2, 0, 1], ARG.held, ARG.clock).map((s) => [rv.rankHeader(s, 0), rv.rankNote(s, 0), s.offset_us])",
             {"held": HELD, "clock": CLOCK})
    assert got == [
        ["Rank 2 · −1.23 ms", "Rank 2 (c): −1.23 ms ±1.5 us from 9 collectives", -1234.5],
        ["Rank 0 · reference", "Rank 0 (a): the reference clock", 0],
        ["Rank 1 · clock unknown",
         "Rank 1 (b): clock unknown: no collective shared with the other ranks, drawn on its own clock", 0],
    ]


def lanes(start, end, ids):
    return {"start_us": start, "end_us": end, "kinds": ["kernel"], "warnings": ["w"],
            "steps": [{"step": "1", "start_us": start + 10, "end_us": start + 20}],
            "lanes": [{"id": i, "process": "GPU 0", "name": f"stream {i}", "kind": "gpu" if i else "cpu",
                       "rows": 1, "events": 1} for i in ids]}


def shown(rank, offset):
    return {"rank": rank, "worker": f"w{rank}", "offset_us": offset,
            "clock": {"rank": rank, "offset_us": offset, "used": 3, "spread_us": 0.5}}


def test_merge_lanes_on_the_common_clock(rv):
    parts = [{"shown": shown(1, 100.0), "info": lanes(1000, 2000, [0, 3])},
             {"shown": shown(0, 0.0), "info": lanes(950, 1800, [3])}]
    got = rv("rv.mergeLanes(ARG, 0)", parts)
    assert [(lane["id"], lane["process"]) for lane in got["lanes"]] == [
        (0, "Rank 1 · +100 us · GPU 0"), (3, "Rank 1 · +100 us · GPU 0"), (STRIDE + 3, "Rank 0 · reference · GPU 0")]
    assert (got["start_us"], got["end_us"]) == (900, 1900)
    assert got["steps"] == [{"step": "1", "start_us": 910, "end_us": 920}]
    assert got["warnings"] == ["Rank 1: w", "Rank 0: w"]
    assert rv("rv.hostLanes(ARG.lanes)", got) == [0]


def window(ids, names, t):
    boxes = {"id": ids, "start_us": [t] * len(ids), "dur_us": [5] * len(ids), "row": [0] * len(ids),
             "name": list(range(len(ids))), "kind": [0] * len(ids)}
    merged = {"start_us": [t], "end_us": [t + 50], "row": [0], "count": [3], "busy_us": [9], "kind": [0]}
    flows = {"total": 1, "cat": ["ac2g"], "from_id": [ids[0]], "from_lane": [0], "from_row": [0], "from_us": [t],
             "to_id": [ids[-1]], "to_lane": [3], "to_row": [0], "to_us": [t + 2]}
    return {"start_us": 0, "end_us": 1, "width_px": 10, "names": names, "lanes": [{"id": 3, "boxes": boxes,
            "merged": merged}], "flows": flows, "warnings": []}


def test_merge_windows_keeps_ranks_apart(rv):
    parts = [{"shown": shown(1, 100.0), "body": window([7, 8], ["a", "b"], 1100)},
             {"shown": shown(0, 0.0), "body": window([7], ["c"], 1000)}]
    got = rv("rv.mergeWindows(ARG, {start_us: 990, end_us: 1010, width_px: 10})", parts)
    assert got["names"] == ["a", "b", "c"]
    assert (got["start_us"], got["end_us"], got["width_px"]) == (990, 1010, 10)
    first, second = got["lanes"]
    assert (first["id"], second["id"]) == (3, STRIDE + 3)
    assert first["boxes"]["id"] == [7, 8] and second["boxes"]["id"] == [STRIDE + 7]
    assert first["boxes"]["start_us"] == [1000, 1000] and second["boxes"]["start_us"] == [1000]
    assert second["boxes"]["name"] == [2]
    assert first["merged"]["end_us"] == [1050] and second["merged"]["start_us"] == [1000]
    f = got["flows"]
    assert f["total"] == 2 and f["from_id"] == [7, STRIDE + 7] and f["to_lane"] == [3, STRIDE + 3]
    assert f["from_us"] == [1000, 1000] and f["to_us"] == [1002, 1002]
    # Each rank's request is the common window on its own clock.
    assert rv("rv.ownWindow({start_us: 990, end_us: 1010, width_px: 10}, 100)") == \
        {"start_us": 1090, "end_us": 1110, "width_px": 10}


def test_events_searches_and_collectives_in_the_timeline_terms(rv):
    event = {"id": 5, "lane": 3, "start_us": 1100, "dur_us": 2,
             "links": [{"id": 6, "lane": 1, "start_us": 1090, "dur_us": 1, "relation": "launched by"}]}
    got = rv("rv.placeEvent(ARG, 1, 100)", event)
    assert (got["id"], got["lane"], got["start_us"]) == (STRIDE + 5, STRIDE + 3, 1000)
    assert (got["links"][0]["id"], got["links"][0]["lane"], got["links"][0]["start_us"]) == (STRIDE + 6, STRIDE + 1, 990)
    assert rv("rv.localId(ARG)", STRIDE * 3 + 12) == {"k": 3, "id": 12}
    answers = [{"q": "x", "total": 2, "warnings": [], "matches": [{"id": 1, "lane": 0, "start_us": 1200, "dur_us": 1},
                                                                   {"id": 2, "lane": 0, "start_us": 1050, "dur_us": 1}]},
               {"q": "x", "total": 1, "warnings": [], "matches": [{"id": 1, "lane": 0, "start_us": 1000, "dur_us": 1}]}]
    found = rv("rv.mergeSearches(ARG.answers, ARG.shown)", {"answers": answers, "shown": [shown(1, 100.0), shown(0, 0.0)]})
    assert found["total"] == 3
    assert [(m["id"], m["start_us"]) for m in found["matches"]] == [(2, 950), (STRIDE + 1, 1000), (1, 1100)]
    answer = {"calls": [{"worker": "w0", "id": 9}, {"worker": "w1", "id": None}, {"worker": "w1", "id": 4}]}
    assert rv("rv.collectiveIds(ARG.answer, ARG.shown)", {"answer": answer, "shown": [shown(1, 0.0), shown(0, 0.0)]}) \
        == [STRIDE + 9, 4]


@pytest.mark.parametrize("name, picks", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", True), ("ncclKernel_AllGather_RING_LL_Sum_int8_t", True),
    ("nccl:all_reduce", True), ("record_param_comms", True), ("gloo:all_reduce", True),
    ("sm90_xmma_gemm", False), ("aten::mm", False), ("ProfilerStep#3", False)])
def test_which_events_pick_a_collective(rv, name, picks):
    assert rv("rv.isCollectiveEvent(ARG)", name) is picks
