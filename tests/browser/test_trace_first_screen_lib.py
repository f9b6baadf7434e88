"""The Trace view's first screen and flow types, the shaping (web/static/js/lib/lanes.js), run in
Chromium on small inline lanes whose expected layout can be checked by hand: Python frames folded
to three rows, the rows under a fold, the lanes folded to fit the GPU streams, where the ruler
names a step, and which flow types are drawn."""

from __future__ import annotations

import pytest

from browser_pages import module_runner

pytestmark = pytest.mark.browser

# A main thread of 12 rows (8 of Python frames, 4 of operators), a helper thread of 5 rows (all
# frames), a backward thread of 6 rows, and a GPU stream of 2 rows.
LANES = [
    {"id": 0, "process": "python (pid 1)", "name": "main", "kind": "cpu", "rows": 12, "events": 900, "stack_rows": 8},
    {"id": 1, "process": "python (pid 1)", "name": "pin", "kind": "cpu", "rows": 5, "events": 40, "stack_rows": 5},
    {"id": 2, "process": "python (pid 1)", "name": "backward", "kind": "cpu", "rows": 6, "events": 1200,
     "stack_rows": 0},
    {"id": 3, "process": "GPU 0", "name": "stream 7", "kind": "gpu", "rows": 2, "events": 500, "stack_rows": 0},
]


@pytest.fixture
def lanes(blank_page):
    """Evaluates `expression` with lib/lanes.js imported as `lanes`."""
    return module_runner(blank_page, {"lanes": "lib/lanes.js"})


def test_python_frames_fold_to_three_rows(lanes):
    got = lanes("""(() => {
        const l = lanes.laneLayout(ARG, { stackRows: lanes.STACK_ROWS });
        return { stack: lanes.STACK_ROWS, items: [...l.lanes.values()].map((i) => [i.lane.id, i.y, i.h, i.fold]),
                 height: l.height };
    })()""", LANES)
    assert got["stack"] == 3
    # Main: rows 0, 1, then frames 2..7 on row 2, then its 4 operator rows: 7 rows, 7 * 14 + 6 = 104 px.
    # Pin: 5 frame rows, 2..4 on row 2: 3 rows, 48 px. Backward: no frames, 6 rows, 90 px. GPU: 34 px.
    assert got["items"] == [[0, 22, 104, [2, 8]], [1, 126, 48, [2, 5]], [2, 174, 90, None], [3, 286, 34, None]]
    assert got["height"] == 320
    # Unfolded (every frame row), the same lanes are as tall as their rows.
    assert lanes("lanes.laneLayout(ARG).lanes.get(0).h", LANES) == 12 * 14 + 6


def test_rows_under_a_fold_share_its_row_and_hits_take_the_deepest(lanes):
    got = lanes("""(() => {
        const l = lanes.laneLayout(ARG, { stackRows: 3 });
        const main = l.lanes.get(0);
        const at = (y) => { const a = lanes.laneAt(l, y); return a && [a.item.lane.id, a.row, a.rows]; };
        const data = lanes.prepareWindow({ start_us: 0, end_us: 100, width_px: 1000, names: ["f", "op"], lanes: [
            { id: 0, boxes: { id: [10, 11, 12, 13], start_us: [0, 0, 0, 0], dur_us: [50, 50, 50, 50],
                              row: [1, 2, 7, 8], name: [0, 0, 0, 1], kind: [4, 4, 4, 1] },
              merged: { start_us: [], end_us: [], row: [], count: [], busy_us: [], kind: [] } }] },
            ["other", "cpu_op", "user_annotation", "gpu_user_annotation", "python_function"]);
        const hit = (y) => lanes.hitTest(data, l, { start_us: 0, end_us: 100 }, 1000, 100, y)?.id;
        return {
            shown: [0, 1, 2, 5, 7, 8, 11].map((r) => lanes.shownRow(main, r)),
            tops: [2, 7, 8].map((r) => lanes.rowTop(l, main, r)),
            at: [22 + 3 + 14 + 1, 22 + 3 + 28 + 1, 22 + 3 + 42 + 1].map(at),
            hits: [22 + 3 + 14 + 1, 22 + 3 + 28 + 1, 22 + 3 + 42 + 1].map(hit),
        };
    })()""", LANES)
    # Rows 2..7 are drawn on row 2; row 8 (the first operator row) on row 3, row 11 on row 6.
    assert got["shown"] == [0, 1, 2, 2, 2, 3, 6]
    assert got["tops"] == [22 + 3 + 28, 22 + 3 + 28, 22 + 3 + 42]
    assert got["at"] == [[0, 1, [1, 1]], [0, 2, [2, 7]], [0, 3, [8, 8]]]
    # On the fold's row, the deepest frame under the pointer (row 7) wins over row 2's.
    assert got["hits"] == [10, 12, 13]


@pytest.mark.parametrize("height, folded", [
    (400, []),          # everything fits: the GPU stream ends at 320 px
    (300, [1]),         # the pin thread (fewest events) folded: 320 - 28 = 292
    (250, [1, 2]),      # then the backward thread: 292 - 70 = 222
    (100, [1, 2]),      # the main thread is never folded, even when the GPU stream still does not fit
])
def test_first_screen_folds_host_lanes_until_the_gpu_fits(lanes, height, folded):
    got = lanes("""lanes.firstScreenFolds(lanes.laneLayout(ARG.lanes, { stackRows: 3 }), ARG.height,
                                         [{ step: "3", start_us: 0, end_us: 1, lane: 0 }])""",
                {"lanes": LANES, "height": height})
    assert got == folded


def test_first_screen_folds_nothing_without_a_gpu_lane(lanes):
    assert lanes("lanes.firstScreenFolds(lanes.laneLayout(ARG.slice(0, 3)), 10, [])", LANES) == []


def test_step_range_is_the_host_range_with_the_device_tail_apart(lanes):
    got = lanes("""[
        lanes.stepRange({ step: "3", start_us: 130, end_us: 300, host_start_us: 100, host_end_us: 250, lane: 0 }),
        lanes.stepRange({ step: "4", start_us: 300, end_us: 400, host_start_us: 300, host_end_us: 400 }),
        lanes.stepRange({ step: "0", start_us: 5, end_us: 9 }),
    ]""")
    assert got == [{"start_us": 100, "end_us": 250, "tail": [250, 300]},
                   {"start_us": 300, "end_us": 400, "tail": None},
                   {"start_us": 5, "end_us": 9, "tail": None}]


@pytest.mark.parametrize("text, chosen, param", [
    (None, ["ac2g", "fwdbwd"], None),
    ("0", [], "0"),
    ("fwdbwd", ["fwdbwd"], "fwdbwd"),
    ("fwdbwd, ac2g,bogus", ["ac2g", "fwdbwd"], None),
    ("bogus", [], "0"),
])
def test_flow_types_from_and_to_the_url(lanes, text, chosen, param):
    got = lanes("""(() => { const c = lanes.parseFlowTypes(ARG.text ?? undefined, ["ac2g", "fwdbwd"]);
                           return [c, lanes.flowTypesParam(c, ["ac2g", "fwdbwd"])]; })()""", {"text": text})
    assert got == [chosen, param]


def test_link_arrows_follow_their_flow_type(lanes):
    got = lanes("""["launches", "launched by", "forward", "backward", "operator", "parent"].map((r) =>
        [lanes.linkDrawn(r, ["fwdbwd"]), lanes.linkDrawn(r, [])])""")
    assert got == [[False, False], [False, False], [True, False], [True, False], [True, True], [True, True]]
