"""The Module view's helpers (web/static/js/lib/treetable.js and lib/moduleview.js), run in Chromium
as the page uses them, on small hand-made trees."""

from __future__ import annotations

import pytest

from browser_pages import module_runner

pytestmark = pytest.mark.browser

# r
# ├── a
# │   ├── a1
# │   └── a2
# │       └── a2x
# └── b
# s (a second root)
NODES = [
    {"id": 0, "parent_id": None, "name": "r"},
    {"id": 1, "parent_id": 0, "name": "a"},
    {"id": 3, "parent_id": 1, "name": "a1"},
    {"id": 4, "parent_id": 1, "name": "a2"},
    {"id": 6, "parent_id": 4, "name": "a2x"},
    {"id": 2, "parent_id": 0, "name": "b"},
    {"id": 5, "parent_id": None, "name": "s"},
]


@pytest.fixture
def lib(blank_page):
    """Evaluates `expression` with `tree` (lib/treetable.js), `view` (lib/moduleview.js) and `NODES` in scope."""
    run = module_runner(blank_page, {"tree": "lib/treetable.js", "view": "lib/moduleview.js"}, arg="NODES")
    return lambda expression: run(expression, NODES)


def test_tree_index_depths_roots_and_children(lib):
    out = lib("""(() => { const i = tree.treeIndex(NODES);
        return {roots: i.roots, depth: Object.fromEntries(i.depth), kids: Object.fromEntries(i.children)}; })()""")
    assert out["roots"] == [0, 5]
    assert out["depth"] == {"0": 0, "1": 1, "3": 2, "4": 2, "6": 3, "2": 1, "5": 0}
    assert out["kids"] == {"0": [1, 2], "1": [3, 4], "4": [6]}


def test_tree_unknown_parent_is_a_root(lib):
    assert lib('tree.treeIndex([{id: "x", parent_id: "gone"}, {id: "y", parent_id: "x"}]).roots') == ["x"]


@pytest.mark.parametrize("expanded, shown", [
    ([], [0, 5]),
    ([0], [0, 1, 2, 5]),
    ([0, 1], [0, 1, 3, 4, 2, 5]),
    ([1, 4], [0, 5]),  # a closed parent hides open children
    ([0, 1, 4], [0, 1, 3, 4, 6, 2, 5]),
], ids=["closed", "root-open", "two-levels", "hidden-by-parent", "all"])
def test_visible_ids_follow_the_open_ancestors(lib, expanded, shown):
    assert lib(f"tree.visibleIds(tree.treeIndex(NODES), new Set({expanded}))") == shown


@pytest.mark.parametrize("max_rows, depth", [(1, 0), (2, 0), (4, 1), (6, 2), (7, 3), (50, 3)])
def test_auto_depth_opens_levels_while_they_fit(lib, max_rows, depth):
    # rows per level: 2 roots, 2, 2, 1
    assert lib(f"tree.autoDepth(tree.treeIndex(NODES), {max_rows})") == depth


def test_expanded_to_depth_path_and_subtree(lib):
    assert sorted(lib("[...tree.expandedToDepth(tree.treeIndex(NODES), 2)]")) == [0, 1]
    assert sorted(lib("[...tree.expandableIds(tree.treeIndex(NODES))]")) == [0, 1, 4]
    assert lib("tree.pathTo(tree.treeIndex(NODES), 6)") == [0, 1, 4, 6]
    assert lib("tree.subtreeIds(tree.treeIndex(NODES), 1)") == [1, 3, 4, 6]


def test_tree_table_toggles_rows(lib):
    out = lib("""(() => {
        const t = tree.buildTreeTable({nodes: NODES, depth: 1, nameColumn: {key: "name", label: "Name"},
                                       columns: [{key: "id", label: "Id", numeric: true}]});
        document.body.append(t.element);
        const shown = () => [...t.element.querySelectorAll("tbody tr")].filter((r) => !r.hidden).map((r) => r.dataset.nodeId);
        const button = (id) => t.element.querySelector(`tr[data-node-id="${id}"] button`);
        const steps = {first: shown(), rootLabel: button(0).getAttribute("aria-label")};
        button(1).click();
        steps.openA = shown();
        steps.aState = button(1).getAttribute("aria-expanded");
        button(0).click();
        steps.closeRoot = shown();
        button(0).dispatchEvent(new MouseEvent("click", {bubbles: true, altKey: true}));
        steps.altOpen = shown();
        t.collapseAll();
        steps.collapsed = shown();
        t.reveal(6);
        steps.revealed = shown();
        steps.leafButtons = t.element.querySelectorAll('tr[data-node-id="6"] button').length;
        steps.depthVar = t.element.querySelector('tr[data-node-id="6"] .mod-tree-cell').style.getPropertyValue("--mod-depth");
        return steps;
    })()""")
    assert out["first"] == ["0", "1", "2", "5"]
    assert out["rootLabel"] == "Collapse r"
    assert out["openA"] == ["0", "1", "3", "4", "2", "5"] and out["aState"] == "true"
    assert out["closeRoot"] == ["0", "5"]
    assert out["altOpen"] == ["0", "1", "3", "4", "6", "2", "5"]
    assert out["collapsed"] == ["0", "5"]
    assert out["revealed"] == ["0", "1", "3", "4", "6", "2", "5"]
    assert out["leafButtons"] == 0
    assert out["depthVar"] == "3"


MODULES = {
    "modules": [
        {"id": 0, "parent_id": None, "name": "Net_0", "occurrences": 2, "host_self_us": 10, "host_total_us": 40,
         "device_self_us": 0, "device_total_us": 30, "backward_device_self_us": 0, "backward_device_total_us": 0},
        {"id": 1, "parent_id": 0, "name": "Linear_0", "occurrences": 2, "host_self_us": 30, "host_total_us": 30,
         "device_self_us": 30, "device_total_us": 30, "backward_device_self_us": 0, "backward_device_total_us": 0},
        {"id": 2, "parent_id": None, "name": "Loss_0", "occurrences": 1, "host_self_us": 5, "host_total_us": 5,
         "device_self_us": 0, "device_total_us": 0, "backward_device_self_us": 0, "backward_device_total_us": 0},
    ],
    "icicle": {"branchvalues": "remainder", "ids": ["0", "1", "2"], "labels": ["Net_0", "Linear_0", "Loss_0"],
               "parents": ["", "0", ""], "host_us": [10, 30, 5], "device_us": [0, 30, 0],
               "backward_device_us": [0, 0, 0]},
    "backward": None,
    "warnings": [],
}


@pytest.fixture
def shaped(blank_page):
    """Evaluates `expression` with `view` (lib/moduleview.js) and `DATA` (MODULES) in scope."""
    run = module_runner(blank_page, {"view": "lib/moduleview.js"}, arg="DATA")
    return lambda expression, data=MODULES: run(expression, data)


@pytest.mark.parametrize("wanted, width", [
    ("host", "host"), ("device", "device"), (None, "device"), ("junk", "device"),
    ("backward", "device"),  # no backward summary: not offered
], ids=lambda v: str(v))
def test_pick_width(shaped, wanted, width):
    assert shaped(f"view.pickWidth({'null' if wanted is None else repr(wanted)}, DATA)") == width


def test_pick_width_falls_back_to_host_without_device_time(shaped):
    data = {**MODULES, "icicle": {**MODULES["icicle"], "device_us": [0, 0, 0]}}
    assert shaped("view.pickWidth('device', DATA)", data) == "host"
    assert [c["available"] for c in shaped("view.widthChoices(DATA)", data)] == [False, True, False]


def test_icicle_trace_adds_a_root_above_several_top_modules(shaped):
    trace = shaped("view.icicleTrace(DATA, 'host')")
    assert trace["type"] == "icicle" and trace["branchvalues"] == "remainder"
    assert trace["ids"] == ["all", "0", "1", "2"]
    assert trace["parents"] == ["", "all", "0", "all"]
    assert trace["values"] == [0, 10, 30, 5]
    # Hover texts: total, self; the root's total is the sum of the self times (45 us).
    assert trace["customdata"][0][:2] == ["0 us", "45 us"]
    assert trace["customdata"][1] == ["10 us", "40 us", "2 occurrences"]
    assert trace["root"]["color"] == trace["marker"]["colors"][0]
    assert "level" not in trace


def test_icicle_trace_zooms_only_onto_a_module_with_time(shaped):
    assert shaped("view.icicleTrace(DATA, 'device', '1').level") == "1"
    assert shaped("view.icicleTrace(DATA, 'device', '2').level") is None  # Loss_0 has no device time
    assert shaped("view.icicleTrace(DATA, 'backward')") is None  # nothing to draw
    assert shaped("view.icicleChart(DATA, 'backward')") is None


def test_icicle_chart_height_follows_levels(shaped):
    chart = shaped("view.icicleChart(DATA, 'host')")
    assert shaped("view.levelCount({ids: ['all', '0', '1', '2'], parents: ['', 'all', '0', 'all']})") == 3
    assert 180 <= chart["height"] <= 460
    assert chart["layout"]["uniformtext"] == {"minsize": 10, "mode": "hide"}


def test_branch_colors_keep_a_branch_and_pale_with_depth(shaped):
    colors = shaped("view.branchColors(['0', '1', '2', '3', '4'], ['', '0', '1', '0', ''])")
    assert colors[0] == colors[4] == shaped("view.TOP_COLOR")
    assert colors[1] != colors[3]  # two children of a top module: two colours
    assert colors[2] != colors[1] and colors[2].startswith("rgb(")  # same branch, paler


def test_texts(shaped):
    assert shaped("view.isMoreNode({name: '… 12 more'})") is True
    assert shaped("view.isMoreNode({name: 'aten::mm'})") is False
    assert shaped("view.threadText({thread: {pid: '7', tid: '7'}, nodes: [1, 2]})") == "main thread 7, 2 nodes"
    assert shaped("view.threadText({thread: {pid: '7', tid: '9'}, nodes: []})") == "thread 9 of process 7, 0 nodes"
    assert shaped("view.moduleMeta(DATA)") == "3 module nodes, 2 top-level"
    text = shaped("view.backwardText({ranges: 10, ranges_attributed: 9, fwdbwd_flows: 4, host_us: 100, "
                  "host_attributed_us: 50, device_us: 200, device_attributed_us: 200})")
    assert text.startswith("Backward: 9 of 10 autograd ranges tied to a module through 4 fwdbwd flows, 100.0 %")
    assert "50.0 % of backward host time" in text
    assert shaped("view.backwardText(null)") == ""
