"""The modules view (/modules) in Chromium: the nn.Module tree (ResNet_0 and its children, numbers as the API
gives them, toggles, expand/collapse all), the icicle drawn from the API's columns with a sector per
module whose widths follow the chosen metric (device, host, backward device time) and which zooms
onto a module named in the table, the main thread's operator tree, the compiled-region badge of
compile_graph_breaks, and a trace without module events that says how to record them while its
operator tree still works."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Locator, expect

from browser_pages import ShellPage, css_testid
from formats import fmt_count
from runs import FIRST_CALL, GRAPH_BREAKS, RESNET, V100, each

pytestmark = pytest.mark.browser

RESNET_SEL = RESNET.sel()
COMPILE_SEL = GRAPH_BREAKS.sel()
AUTO_ROWS = 50  # lib/treetable.js opens the levels of a tree that fit in this many rows


class ModulesPage(ShellPage):
    view = "modules"

    def wait_drawn(self) -> "ModulesPage":
        """Waits until the icicle (or its note) and both trees (or their notes) are there and the view is idle."""
        self.wait_mounted()
        expect(self.root()).to_be_visible()
        expect(self.part("icicle").locator(".main-svg, p").first).to_be_attached()
        expect(self.part("modules").locator("table, p").first).to_be_attached()
        expect(self.part("optree").locator("table, p").first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        return self

    def row(self, tree: str, node_id: int) -> Locator:
        """The row of a node of a tree table ("modules-table" or "optree-table") by its API id."""
        return self.part(tree).locator(f'tbody tr[data-node-id="{node_id}"]')

    def visible_ids(self, tree: str) -> list[int]:
        return [int(i) for i in self.part(tree).evaluate(
            "(t) => [...t.querySelectorAll('tbody tr')].filter((r) => !r.hidden).map((r) => r.dataset.nodeId)")]

    def toggle(self, tree: str, node_id: int) -> Locator:
        return self.row(tree, node_id).locator(css_testid("tree-toggle"))

    def cells(self, tree: str, node_id: int) -> list[str]:
        return [" ".join(t.split()) for t in self.row(tree, node_id).locator("td").all_inner_texts()]

    def headers(self, tree: str) -> list[str]:
        return [" ".join(h.split()) for h in self.part(tree).locator("thead th").all_inner_texts()]

    def icicle(self) -> dict:
        """The icicle trace Plotly drew (its `data[0]`), as JSON."""
        return json.loads(self.part("icicle").evaluate("(node) => JSON.stringify(node.data[0])"))

    def sector_widths(self) -> dict[str, float]:
        """Drawn width in pixels of each icicle sector on screen, by sector id."""
        return self.part("icicle").evaluate("""(node) => Object.fromEntries(
            [...node.querySelectorAll('.slice')].map((s) => [s.__data__.data.id, s.getBoundingClientRect().width]))""")

    def format_us(self, value: float) -> str:
        """format.js's formatUs, the only place the app turns microseconds into text."""
        return self.page.evaluate("async (v) => (await import('/static/js/lib/format.js')).formatUs(v)", value)


@pytest.fixture
def modules(page, server) -> ModulesPage:
    return ModulesPage(page, server)


def children_of(nodes: list[dict], parent: int) -> list[int]:
    return [n["id"] for n in nodes if n["parent_id"] == parent]


def descendants_of(nodes: list[dict], parent: int) -> list[int]:
    out, todo = [], [parent]
    while todo:
        kids = children_of(nodes, todo.pop())
        out += kids
        todo += kids
    return out


def depths(nodes: list[dict]) -> dict[int, int]:
    depth: dict[int, int] = {}
    for n in nodes:  # preorder: parents first
        depth[n["id"]] = 0 if n["parent_id"] is None else depth[n["parent_id"]] + 1
    return depth


def shown_at_first(nodes: list[dict]) -> list[int]:
    """The ids of the levels that fit in AUTO_ROWS rows together, from the roots down (the roots at least)."""
    depth = depths(nodes)
    per_level = [list(depth.values()).count(d) for d in range(max(depth.values()) + 1)]
    levels = next((d for d in range(1, len(per_level)) if sum(per_level[:d + 1]) > AUTO_ROWS), len(per_level))
    return [n["id"] for n in nodes if depth[n["id"]] < levels]


def deepest(nodes: list[dict], parent: int) -> int:
    """The id of a node furthest below `parent`."""
    depth = {parent: 0}
    for n in nodes:  # preorder: parents first
        if n["parent_id"] in depth:
            depth[n["id"]] = depth[n["parent_id"]] + 1
    return max(depth, key=depth.get)


def test_modules_tree_shows_resnet_with_its_children_and_the_api_numbers(modules, api, shots):
    data = api(f"/api/modules?{RESNET_SEL}")
    mods = data["modules"]
    by_name = {m["name"]: m for m in mods if m["parent_id"] is None}
    resnet = by_name["ResNet_0"]
    kids = children_of(mods, resnet["id"])
    assert len(kids) >= 3, "ResNet_0 holds its stem, its layers and the classifier"
    modules.open(RESNET_SEL).wait_drawn()

    tree = "modules-table"
    assert modules.headers(tree) == ["Module", "Occurrences", "Operators", "Host total", "Host self", "Device total",
                                    "Device self", "Avg host total", "Avg device total", "Backward device total"]
    # Shown at first: the top levels, ResNet_0 open.
    expect(modules.toggle(tree, resnet["id"])).to_have_attribute("aria-expanded", "true")
    for kid in kids:
        expect(modules.row(tree, kid)).to_be_visible()

    # Collapsing hides every row under it; expanding brings its children back (not deeper rows).
    modules.toggle(tree, resnet["id"]).click()
    expect(modules.toggle(tree, resnet["id"])).to_have_attribute("aria-expanded", "false")
    roots = [m["id"] for m in mods if m["parent_id"] is None]
    assert modules.visible_ids(tree) == roots
    modules.toggle(tree, resnet["id"]).click()
    expect(modules.toggle(tree, resnet["id"])).to_have_attribute("aria-expanded", "true")
    names = [modules.row(tree, k).locator(css_testid("module-name")).inner_text() for k in kids]
    assert names == [m["name"] for m in mods if m["id"] in kids]

    # A layer's row holds the API's numbers, formatted by format.js.
    layer = next(m for m in mods if m["id"] in kids and m["name"].startswith("Sequential"))
    expected = [layer["name"], f"{layer['occurrences']:,}", f"{layer['operators']:,}"] + [
        modules.format_us(layer[key]) for key in (
            "host_total_us", "host_self_us", "device_total_us", "device_self_us", "avg_host_total_us",
            "avg_device_total_us", "backward_device_total_us")]
    assert modules.cells(tree, layer["id"]) == expected
    blocks = children_of(mods, layer["id"])
    expect(modules.row(tree, blocks[0])).to_be_visible()
    modules.toggle(tree, layer["id"]).click()
    for block in blocks:
        expect(modules.row(tree, block)).to_be_hidden()

    # Expand all shows every module; collapse all only the top level.
    modules.part("modules-expand-all").click()
    assert modules.visible_ids(tree) == [m["id"] for m in mods]
    modules.part("modules-collapse-all").click()
    assert modules.visible_ids(tree) == roots
    modules.part("modules-expand-all").click()

    expect(modules.part("backward-summary")).to_contain_text(
        f"{fmt_count(data['backward']['ranges_attributed'])} of {fmt_count(data['backward']['ranges'])} autograd ranges")
    modules.page.mouse.move(0, 0)  # no hover label in the picture
    modules.screenshot(shots, "modules_resnet50_fp32", full=True)
    assert modules.page.errors == []


def test_modules_icicle_draws_every_module_and_follows_the_width(modules, api):
    data = api(f"/api/modules?{RESNET_SEL}")
    ice = data["icicle"]
    by_id = {str(m["id"]): m for m in data["modules"]}
    modules.open(RESNET_SEL).wait_drawn()

    expect(modules.part("width-select")).to_have_value("device")
    drawn = modules.icicle()
    assert drawn["type"] == "icicle" and drawn["branchvalues"] == "remainder"
    # Two top-level modules (ResNet_0, CrossEntropyLoss_0) sit under one named root.
    assert drawn["ids"] == ["all", *ice["ids"]]
    assert drawn["parents"] == ["", *[p or "all" for p in ice["parents"]]]
    assert drawn["values"] == pytest.approx([0, *ice["device_us"]])
    expect(modules.part("icicle").locator(".slice")).to_have_count(len(ice["ids"]) + 1)

    resnet = next(m for m in data["modules"] if m["name"] == "ResNet_0")
    mods = data["modules"]
    # A part of the model whose first block holds modules: three levels to zoom through.
    layer = next(m for m in mods if m["parent_id"] == resnet["id"]
                 and any(children_of(mods, block) for block in children_of(mods, m["id"])[:1]))
    rid, lid = str(resnet["id"]), str(layer["id"])

    def drawn_share() -> float:
        widths = modules.sector_widths()
        return widths[lid] / widths[rid]

    assert drawn_share() == pytest.approx(layer["device_total_us"] / resnet["device_total_us"], abs=0.01)

    # Host time: other values, other widths, and the choice kept in the URL.
    modules.part("width-select").select_option("host")
    expect(modules.part("icicle")).to_have_attribute("data-width", "host")
    assert modules.icicle()["values"] == pytest.approx([0, *ice["host_us"]])
    assert modules.query()["width"] == "host"
    expect(modules.part("icicle").locator(".slice")).to_have_count(len(ice["ids"]) + 1)
    assert drawn_share() == pytest.approx(layer["host_total_us"] / resnet["host_total_us"], abs=0.01)
    assert abs(layer["host_total_us"] / resnet["host_total_us"]
               - layer["device_total_us"] / resnet["device_total_us"]) > 0.02, "the two widths differ here"
    expect(modules.part("icicle-meta")).to_contain_text("Host time")

    modules.part("width-select").select_option("backward")
    expect(modules.part("icicle")).to_have_attribute("data-width", "backward")
    assert modules.icicle()["values"] == pytest.approx([0, *ice["backward_device_us"]])

    # A deep link restores the width; a module's name in the table zooms the icicle onto it.
    modules.open(f"{RESNET_SEL}&width=host").wait_drawn()
    expect(modules.part("width-select")).to_have_value("host")
    assert modules.icicle()["values"] == pytest.approx([0, *ice["host_us"]])
    modules.row("modules-table", layer["id"]).locator(css_testid("module-name")).click()
    expect(modules.part("icicle").locator(".slice")).to_have_count(1 + len(descendants_of(data["modules"], layer["id"])))
    assert modules.icicle()["level"] == lid
    expect(modules.row("modules-table", layer["id"])).to_have_class("row-selected")

    # Clicking a sector opens and selects its module's row, even one hidden at first.
    block = children_of(data["modules"], layer["id"])[0]
    leaf = children_of(data["modules"], block)[0]
    modules.part("modules-collapse-all").click()
    expect(modules.row("modules-table", leaf)).to_be_hidden()
    box = modules.part("icicle").evaluate(f"""(node) => {{
        const s = [...node.querySelectorAll('.slice')].find((e) => e.__data__.data.id === '{leaf}');
        const r = s.getBoundingClientRect();
        return {{x: r.x + r.width / 2, y: r.y + r.height / 2, w: r.width}};
    }}""")
    assert box["w"] > 10, "zoomed onto the layer, its sectors are wide enough to click"
    modules.page.mouse.click(box["x"], box["y"])
    expect(modules.row("modules-table", leaf)).to_be_visible()
    expect(modules.row("modules-table", leaf)).to_have_class("row-selected")
    expect(modules.part("modules-table").locator("tr.row-selected")).to_have_count(1)
    assert by_id[str(leaf)]["name"] in modules.row("modules-table", leaf).inner_text()
    assert modules.page.errors == []


def test_modules_operator_tree_expands(modules, api):
    tree_data = api(f"/api/modules/optree?{RESNET_SEL}")
    nodes = tree_data["nodes"]
    modules.open(RESNET_SEL).wait_drawn()
    tree = "optree-table"
    assert modules.headers(tree) == ["Name", "Calls", "Host total", "Host self", "Device total", "Device self"]
    expect(modules.part("optree-meta")).to_contain_text(f"main thread {tree_data['thread']['tid']}")
    expect(modules.part("optree-meta")).to_contain_text(f"{len(nodes):,} nodes")
    expect(modules.part("optree-truncated")).to_be_hidden()
    expect(modules.part(tree).locator("tbody tr")).to_have_count(len(nodes))

    step = nodes[0]
    assert step["name"].startswith("ProfilerStep#")
    # The module node of the model inside the first step: open it, its children show, with the API's numbers.
    model = next(n for n in nodes if n["parent_id"] == step["id"] and n["name"] == "nn.Module: ResNet_0")
    modules.part("optree-collapse-all").click()
    expect(modules.row(tree, model["id"])).to_be_hidden()
    modules.toggle(tree, step["id"]).click()
    expect(modules.row(tree, model["id"])).to_be_visible()
    for kid in model["children"]:
        expect(modules.row(tree, kid)).to_be_hidden()
    modules.toggle(tree, model["id"]).click()
    expect(modules.toggle(tree, model["id"])).to_have_attribute("aria-expanded", "true")
    for kid in model["children"]:
        expect(modules.row(tree, kid)).to_be_visible()
    conv = next(n for n in nodes if n["id"] in model["children"])
    assert modules.cells(tree, conv["id"]) == [conv["name"], f"{conv['calls']:,}"] + [
        modules.format_us(conv[k]) for k in ("host_total_us", "host_self_us", "device_total_us", "device_self_us")]

    # Alt+click opens a whole branch.
    deep = deepest(nodes, model["id"])
    modules.toggle(tree, model["id"]).click()
    modules.toggle(tree, model["id"]).click(modifiers=["Alt"])
    expect(modules.row(tree, deep)).to_be_visible()
    assert set(descendants_of(nodes, model["id"])) <= set(modules.visible_ids(tree))

    modules.part("optree-expand-all").click()
    assert modules.visible_ids(tree) == [n["id"] for n in nodes]
    assert modules.page.errors == []


def test_modules_compiled_model_shows_its_compiled_regions(modules, api, shots):
    data = api(f"/api/modules?{COMPILE_SEL}")
    holder = next(m for m in data["modules"] if m["compiled_regions"] > 0)
    modules.open(COMPILE_SEL).wait_drawn()
    expect(modules.part("warnings")).to_contain_text("torch.compile region")
    badge = modules.row("modules-table", holder["id"]).locator(css_testid("compiled-badge"))
    expect(badge).to_have_text(f"compiled ×{holder['compiled_regions']}")
    expect(modules.part("modules-table").locator(css_testid("compiled-badge"))).to_have_count(
        sum(1 for m in data["modules"] if m["compiled_regions"] > 0))
    assert modules.icicle()["ids"] == data["icicle"]["ids"], "one top-level module: no added root"
    expect(modules.part("icicle").locator(".slice")).to_have_count(len(data["modules"]))
    expect(modules.part("optree-table").locator("tbody tr")).to_have_count(len(api(f"/api/modules/optree?{COMPILE_SEL}")["nodes"]))
    modules.page.mouse.move(0, 0)
    modules.screenshot(shots, "modules_compile_graph_breaks", full=True)
    assert modules.page.errors == []


@pytest.mark.parametrize("run", each(FIRST_CALL, V100))
def test_modules_trace_without_modules_explains_and_keeps_the_operator_tree(modules, api, shots, run):
    data = api(f"/api/modules?{run.sel()}")
    assert data["modules"] == [] and data["warnings"], "the trace was recorded without with_stack"
    nodes = api(f"/api/modules/optree?{run.sel()}")["nodes"]
    modules.open(run.sel()).wait_drawn()

    expect(modules.part("warnings")).to_be_visible()
    expect(modules.part("warnings")).to_contain_text(data["warnings"][0])
    expect(modules.part("no-modules")).to_contain_text("with_stack=True")
    expect(modules.part("icicle").locator("p.empty")).to_contain_text("No nn.Module events")
    expect(modules.part("icicle").locator(".main-svg")).to_have_count(0)
    expect(modules.part("width-select")).to_be_hidden()
    expect(modules.part("modules-expand-all")).to_be_hidden()

    tree = "optree-table"
    assert modules.visible_ids(tree) == shown_at_first(nodes)
    step = next(n for n in nodes if n["name"].startswith("ProfilerStep#") and n["children"])
    modules.part("optree-collapse-all").click()
    modules.toggle(tree, step["id"]).click()
    for kid in step["children"]:
        expect(modules.row(tree, kid)).to_be_visible()
    modules.screenshot(shots, f"modules_without_modules_{run.name}", full=True)
    assert modules.page.errors == []
