"""The Module view in Chromium: the nn.Module tree (ResNet_0 and its children, numbers as the API
gives them, toggles, expand/collapse all), the icicle drawn from the API's columns with a sector per
module whose widths follow the chosen metric (device, host, backward device time) and which zooms
onto a module named in the table, the main thread's operator tree, the compiled-region badge of
compile_resnet18, and a trace without module events that says how to record them while its
operator tree still works."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Locator, expect

from browser_pages import ShellPage, css_testid

pytestmark = pytest.mark.browser

RESNET_SEL = "run=resnet50_fp32&worker=h100_worker0&span=1"
COMPILE_SEL = "run=compile_resnet18&worker=h100_worker0&span=1"
NO_MODULES_SEL = "run=resnet50_num_workers_0&worker=worker0&span=1"


class ModulePage(ShellPage):
    view = "module"

    def wait_drawn(self) -> "ModulePage":
        """Waits until the icicle (or its note) and both trees (or their notes) are there and the view is idle."""
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
def module(page, server) -> ModulePage:
    return ModulePage(page, server)


def children_of(nodes: list[dict], parent: int) -> list[int]:
    return [n["id"] for n in nodes if n["parent_id"] == parent]


def descendants_of(nodes: list[dict], parent: int) -> list[int]:
    out, todo = [], [parent]
    while todo:
        kids = children_of(nodes, todo.pop())
        out += kids
        todo += kids
    return out


def deepest(nodes: list[dict], parent: int) -> int:
    """The id of a node furthest below `parent`."""
    depth = {parent: 0}
    for n in nodes:  # preorder: parents first
        if n["parent_id"] in depth:
            depth[n["id"]] = depth[n["parent_id"]] + 1
    return max(depth, key=depth.get)


def test_module_tree_shows_resnet_with_its_children_and_the_api_numbers(module, api, shots):
    data = api(f"/api/modules?{RESNET_SEL}")
    modules = data["modules"]
    by_name = {m["name"]: m for m in modules if m["parent_id"] is None}
    resnet = by_name["ResNet_0"]
    kids = children_of(modules, resnet["id"])
    assert len(kids) >= 8, "ResNet_0 holds conv1, bn1, relu, maxpool, layer1..4, avgpool, fc"
    module.open(RESNET_SEL).wait_drawn()

    tree = "modules-table"
    assert module.headers(tree) == ["Module", "Occurrences", "Operators", "Host total", "Host self", "Device total",
                                    "Device self", "Avg host total", "Avg device total", "Backward device total"]
    # Shown at first: the top levels, ResNet_0 open.
    expect(module.toggle(tree, resnet["id"])).to_have_attribute("aria-expanded", "true")
    for kid in kids:
        expect(module.row(tree, kid)).to_be_visible()

    # Collapsing hides every row under it; expanding brings its children back (not deeper rows).
    module.toggle(tree, resnet["id"]).click()
    expect(module.toggle(tree, resnet["id"])).to_have_attribute("aria-expanded", "false")
    roots = [m["id"] for m in modules if m["parent_id"] is None]
    assert module.visible_ids(tree) == roots
    module.toggle(tree, resnet["id"]).click()
    expect(module.toggle(tree, resnet["id"])).to_have_attribute("aria-expanded", "true")
    names = [module.row(tree, k).locator(css_testid("module-name")).inner_text() for k in kids]
    assert names == [m["name"] for m in modules if m["id"] in kids]

    # A layer's row holds the API's numbers, formatted by format.js.
    layer = next(m for m in modules if m["id"] in kids and m["name"].startswith("Sequential"))
    expected = [layer["name"], f"{layer['occurrences']:,}", f"{layer['operators']:,}"] + [
        module.format_us(layer[key]) for key in (
            "host_total_us", "host_self_us", "device_total_us", "device_self_us", "avg_host_total_us",
            "avg_device_total_us", "backward_device_total_us")]
    assert module.cells(tree, layer["id"]) == expected
    blocks = children_of(modules, layer["id"])
    expect(module.row(tree, blocks[0])).to_be_visible()
    module.toggle(tree, layer["id"]).click()
    for block in blocks:
        expect(module.row(tree, block)).to_be_hidden()

    # Expand all shows every module; collapse all only the top level.
    module.part("modules-expand-all").click()
    assert module.visible_ids(tree) == [m["id"] for m in modules]
    module.part("modules-collapse-all").click()
    assert module.visible_ids(tree) == roots
    module.part("modules-expand-all").click()

    expect(module.part("backward-summary")).to_contain_text(
        f"{data['backward']['ranges_attributed']} of {data['backward']['ranges']} autograd ranges")
    module.page.mouse.move(0, 0)  # no hover label in the picture
    module.screenshot(shots, "module_resnet50_fp32", full=True)
    assert module.page.errors == []


def test_module_icicle_draws_every_module_and_follows_the_width(module, api):
    data = api(f"/api/modules?{RESNET_SEL}")
    ice = data["icicle"]
    modules = {str(m["id"]): m for m in data["modules"]}
    module.open(RESNET_SEL).wait_drawn()

    expect(module.part("width-select")).to_have_value("device")
    drawn = module.icicle()
    assert drawn["type"] == "icicle" and drawn["branchvalues"] == "remainder"
    # Two top-level modules (ResNet_0, CrossEntropyLoss_0) sit under one named root.
    assert drawn["ids"] == ["all", *ice["ids"]]
    assert drawn["parents"] == ["", *[p or "all" for p in ice["parents"]]]
    assert drawn["values"] == pytest.approx([0, *ice["device_us"]])
    expect(module.part("icicle").locator(".slice")).to_have_count(len(ice["ids"]) + 1)

    resnet = next(m for m in data["modules"] if m["name"] == "ResNet_0")
    layer = next(m for m in data["modules"] if m["parent_id"] == resnet["id"] and m["name"] == "Sequential_0")
    rid, lid = str(resnet["id"]), str(layer["id"])

    def drawn_share() -> float:
        widths = module.sector_widths()
        return widths[lid] / widths[rid]

    assert drawn_share() == pytest.approx(layer["device_total_us"] / resnet["device_total_us"], abs=0.01)

    # Host time: other values, other widths, and the choice kept in the URL.
    module.part("width-select").select_option("host")
    expect(module.part("icicle")).to_have_attribute("data-width", "host")
    assert module.icicle()["values"] == pytest.approx([0, *ice["host_us"]])
    assert module.query()["width"] == "host"
    expect(module.part("icicle").locator(".slice")).to_have_count(len(ice["ids"]) + 1)
    assert drawn_share() == pytest.approx(layer["host_total_us"] / resnet["host_total_us"], abs=0.01)
    assert abs(layer["host_total_us"] / resnet["host_total_us"]
               - layer["device_total_us"] / resnet["device_total_us"]) > 0.02, "the two widths differ here"
    expect(module.part("icicle-meta")).to_contain_text("Host time")

    module.part("width-select").select_option("backward")
    expect(module.part("icicle")).to_have_attribute("data-width", "backward")
    assert module.icicle()["values"] == pytest.approx([0, *ice["backward_device_us"]])

    # A deep link restores the width; a module's name in the table zooms the icicle onto it.
    module.open(f"{RESNET_SEL}&width=host").wait_drawn()
    expect(module.part("width-select")).to_have_value("host")
    assert module.icicle()["values"] == pytest.approx([0, *ice["host_us"]])
    module.row("modules-table", layer["id"]).locator(css_testid("module-name")).click()
    expect(module.part("icicle").locator(".slice")).to_have_count(1 + len(descendants_of(data["modules"], layer["id"])))
    assert module.icicle()["level"] == lid
    expect(module.row("modules-table", layer["id"])).to_have_class("row-selected")

    # Clicking a sector opens and selects its module's row, even one hidden at first.
    block = children_of(data["modules"], layer["id"])[0]
    leaf = children_of(data["modules"], block)[0]
    module.part("modules-collapse-all").click()
    expect(module.row("modules-table", leaf)).to_be_hidden()
    box = module.part("icicle").evaluate(f"""(node) => {{
        const s = [...node.querySelectorAll('.slice')].find((e) => e.__data__.data.id === '{leaf}');
        const r = s.getBoundingClientRect();
        return {{x: r.x + r.width / 2, y: r.y + r.height / 2, w: r.width}};
    }}""")
    assert box["w"] > 10, "zoomed onto the layer, its sectors are wide enough to click"
    module.page.mouse.click(box["x"], box["y"])
    expect(module.row("modules-table", leaf)).to_be_visible()
    expect(module.row("modules-table", leaf)).to_have_class("row-selected")
    expect(module.part("modules-table").locator("tr.row-selected")).to_have_count(1)
    assert modules[str(leaf)]["name"] in module.row("modules-table", leaf).inner_text()
    assert module.page.errors == []


def test_module_operator_tree_expands(module, api):
    tree_data = api(f"/api/optree?{RESNET_SEL}")
    nodes = tree_data["nodes"]
    module.open(RESNET_SEL).wait_drawn()
    tree = "optree-table"
    assert module.headers(tree) == ["Name", "Calls", "Host total", "Host self", "Device total", "Device self"]
    expect(module.part("optree-meta")).to_contain_text(f"main thread {tree_data['thread']['tid']}")
    expect(module.part("optree-meta")).to_contain_text(f"{len(nodes):,} nodes")
    expect(module.part("optree-truncated")).to_be_hidden()
    expect(module.part(tree).locator("tbody tr")).to_have_count(len(nodes))

    step = nodes[0]
    assert step["name"].startswith("ProfilerStep#")
    # The module node of the model inside the first step: open it, its children show, with the API's numbers.
    model = next(n for n in nodes if n["parent_id"] == step["id"] and n["name"] == "nn.Module: ResNet_0")
    module.part("optree-collapse-all").click()
    expect(module.row(tree, model["id"])).to_be_hidden()
    module.toggle(tree, step["id"]).click()
    expect(module.row(tree, model["id"])).to_be_visible()
    for kid in model["children"]:
        expect(module.row(tree, kid)).to_be_hidden()
    module.toggle(tree, model["id"]).click()
    expect(module.toggle(tree, model["id"])).to_have_attribute("aria-expanded", "true")
    for kid in model["children"]:
        expect(module.row(tree, kid)).to_be_visible()
    conv = next(n for n in nodes if n["id"] in model["children"])
    assert module.cells(tree, conv["id"]) == [conv["name"], f"{conv['calls']:,}"] + [
        module.format_us(conv[k]) for k in ("host_total_us", "host_self_us", "device_total_us", "device_self_us")]

    # Alt+click opens a whole branch.
    deep = deepest(nodes, model["id"])
    module.toggle(tree, model["id"]).click()
    module.toggle(tree, model["id"]).click(modifiers=["Alt"])
    expect(module.row(tree, deep)).to_be_visible()
    assert set(descendants_of(nodes, model["id"])) <= set(module.visible_ids(tree))

    module.part("optree-expand-all").click()
    assert module.visible_ids(tree) == [n["id"] for n in nodes]
    assert module.page.errors == []


def test_module_compiled_model_shows_its_compiled_regions(module, api, shots):
    data = api(f"/api/modules?{COMPILE_SEL}")
    holder = next(m for m in data["modules"] if m["compiled_regions"] > 0)
    module.open(COMPILE_SEL).wait_drawn()
    expect(module.part("warnings")).to_contain_text("torch.compile region")
    badge = module.row("modules-table", holder["id"]).locator(css_testid("compiled-badge"))
    expect(badge).to_have_text(f"compiled ×{holder['compiled_regions']}")
    expect(module.part("modules-table").locator(css_testid("compiled-badge"))).to_have_count(
        sum(1 for m in data["modules"] if m["compiled_regions"] > 0))
    assert module.icicle()["ids"] == data["icicle"]["ids"], "one top-level module: no added root"
    expect(module.part("icicle").locator(".slice")).to_have_count(len(data["modules"]))
    expect(module.part("optree-table").locator("tbody tr")).to_have_count(len(api(f"/api/optree?{COMPILE_SEL}")["nodes"]))
    module.page.mouse.move(0, 0)
    module.screenshot(shots, "module_compile_resnet18", full=True)
    assert module.page.errors == []


def test_module_trace_without_modules_explains_and_keeps_the_operator_tree(module, api, shots):
    data = api(f"/api/modules?{NO_MODULES_SEL}")
    assert data["modules"] == [] and data["warnings"], "the sample was recorded without with_stack"
    nodes = api(f"/api/optree?{NO_MODULES_SEL}")["nodes"]
    module.open(NO_MODULES_SEL).wait_drawn()

    expect(module.part("warnings")).to_be_visible()
    expect(module.part("warnings")).to_contain_text(data["warnings"][0])
    expect(module.part("no-modules")).to_contain_text("with_stack=True")
    expect(module.part("icicle").locator("p.empty")).to_contain_text("No nn.Module events")
    expect(module.part("icicle").locator(".main-svg")).to_have_count(0)
    expect(module.part("width-select")).to_be_hidden()
    expect(module.part("modules-expand-all")).to_be_hidden()

    roots = [n["id"] for n in nodes if n["parent_id"] is None]
    tree = "optree-table"
    assert module.visible_ids(tree) == roots  # 7 roots; opening a level would show 100 rows
    step = next(n for n in nodes if n["name"].startswith("ProfilerStep#") and n["children"])
    module.part("optree-collapse-all").click()
    module.toggle(tree, step["id"]).click()
    for kid in step["children"]:
        expect(module.row(tree, kid)).to_be_visible()
    module.screenshot(shots, "module_resnet50_num_workers_0", full=True)
    assert module.page.errors == []
