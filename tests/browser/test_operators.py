"""The operators page in Chromium: pies and table agree with /api/operators, search, sort,
pagination and grouping live in the URL, call stacks open, and an operator links to its kernels."""

from __future__ import annotations

import re
from urllib.parse import quote, urlparse

import pytest
from playwright.sync_api import expect

from browser_pages import KernelPage, OperatorPage, css_testid, module_runner
from runs import LEGACY, RESNET, V100, each

pytestmark = pytest.mark.browser

SEL = RESNET.sel()  # PyTorch 2.x on an H200, with_stack=True: relative Python frames
PAGE_SIZE = 50
# PyTorch 1.x traces, whose call stacks hold absolute paths
LEGACY_RUNS = each(LEGACY, V100)


def count(n: int) -> str:
    return f"{n:,}"


def pager_text(start: int, end: int, total: int) -> str:
    return f"{count(start)}–{count(end)} of {count(total)}"


def parse_count(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.fixture
def operators(page, server) -> OperatorPage:
    page.set_viewport_size({"width": 1400, "height": 900})
    return OperatorPage(page, server)


@pytest.mark.parametrize("run", each(RESNET, LEGACY, V100))
def test_operators_renders_four_pies_and_the_table(operators, api, shots, run):
    sel = run.sel()
    operators.open(sel).wait_drawn()
    data = api(f"/api/operators?{sel}")
    rows = data["rows"]
    assert len(rows) > PAGE_SIZE or len(rows) > 0
    for pie in operators.pies:
        expect(operators.slices(pie).first).to_be_attached()
    # Top 10 by device self time (the first rows with time), plus Other when more rows have some.
    with_time = [r for r in rows if r["device_self_us"] > 0]
    legend = operators.legend("pie-device-self")
    assert len(legend) == min(10, len(with_time)) + (1 if len(with_time) > 10 else 0)
    if len(with_time) > 10:
        rest = len(with_time) - 10
        assert legend[-1] == f"Other ({rest} operator{'s' if rest > 1 else ''})"
    shown = min(PAGE_SIZE, len(rows))
    expect(operators.rows()).to_have_count(shown)
    expect(operators.pager_range()).to_have_text(pager_text(1, shown, len(rows)))
    # Default order: the API's (device self time, descending).
    assert operators.names() == [r["name"] for r in rows[:shown]]
    assert operators.column("Calls")[:5] == [count(r["calls"]) for r in rows[:5]]
    expect(operators.table().locator('th[aria-sort="descending"]')).to_have_text(re.compile("Device Self"))
    expect(operators.part("row-count")).to_have_text(f"{count(len(rows))} operators")
    expect(operators.about().locator("summary")).to_have_text("How these numbers are computed")
    # The API's warnings (e.g. kernels no operator launched), or none.
    if data["warnings"]:
        expect(operators.part("warnings").locator("li")).to_have_text(data["warnings"])
    else:
        expect(operators.part("warnings")).to_be_hidden()
    assert operators.selection()["view"] == "operators"
    operators.screenshot(shots, f"operators_{run.name}", full=True)
    assert operators.page.errors == []


def test_operators_search_filters_table_and_pies(operators, api, shots):
    operators.open(SEL).wait_drawn()
    rows = api(f"/api/operators?{SEL}")["rows"]
    matching = [r for r in rows if "conv" in r["name"].lower()]
    assert 0 < len(matching) < len(rows)
    operators.search("CONV")
    expect(operators.rows()).to_have_count(min(PAGE_SIZE, len(matching)))
    names = operators.names()
    assert names == [r["name"] for r in matching][:PAGE_SIZE]
    assert all("conv" in n.lower() for n in names)
    expect(operators.part("row-count")).to_contain_text(f"{len(matching)} of {len(rows)}")
    # The pies only count matching operators: no Other slice when they all fit.
    with_time = [r for r in matching if r["device_self_us"] > 0]
    expect(operators.slices("pie-device-self")).to_have_count(min(10, len(with_time)) + (len(with_time) > 10))
    assert operators.query()["q"] == "CONV"
    operators.screenshot(shots, "operators_search")
    # The search is in the URL: a reload restores it.
    operators.page.reload()
    operators.wait_drawn()
    expect(operators.part("search")).to_have_value("CONV")
    expect(operators.rows()).to_have_count(min(PAGE_SIZE, len(matching)))
    # Nothing matches: a calm note, empty pies.
    operators.search("no-such-operator-xyz")
    expect(operators.table().locator(css_testid("table-empty"))).to_contain_text("no-such-operator-xyz")
    expect(operators.part("pie-device-self")).to_contain_text("No device time")
    operators.search("")
    expect(operators.rows()).to_have_count(min(PAGE_SIZE, len(rows)))
    expect(operators.slices("pie-device-self").first).to_be_attached()
    assert "q" not in operators.query()
    assert operators.page.errors == []


def test_operators_sort_and_pagination_live_in_url(operators, api):
    operators.open(SEL).wait_drawn()
    rows = api(f"/api/operators?{SEL}")["rows"]
    assert len(rows) > PAGE_SIZE, "the run should need two pages"
    operators.sort_by("Calls")
    assert operators.query()["sort"] == "calls:desc"
    calls = [parse_count(c) for c in operators.column("Calls")]
    assert calls == sorted(calls, reverse=True)
    assert calls[0] == max(r["calls"] for r in rows)
    operators.sort_by("Name")  # a text column sorts ascending first
    names = operators.names()
    assert operators.query()["sort"] == "name:asc"
    assert names[0] == sorted((r["name"] for r in rows), key=str.lower)[0]

    operators.pager("next").click()
    end = min(2 * PAGE_SIZE, len(rows))
    expect(operators.pager_range()).to_have_text(pager_text(PAGE_SIZE + 1, end, len(rows)))
    expect(operators.rows()).to_have_count(end - PAGE_SIZE)
    second_page = operators.names()
    assert second_page[0] not in names
    assert operators.query()["page"] == "2"
    if end == len(rows):
        expect(operators.pager("next")).to_be_disabled()
    # Reload: the same sort and page.
    operators.page.reload()
    operators.wait_drawn()
    expect(operators.pager_range()).to_have_text(pager_text(PAGE_SIZE + 1, end, len(rows)))
    assert operators.names() == second_page
    # A new sort goes back to the first page.
    operators.sort_by("Host Total")
    expect(operators.pager_range()).to_have_text(pager_text(1, PAGE_SIZE, len(rows)))
    assert "page" not in operators.query()
    assert operators.page.errors == []


def test_operators_group_by_input_shape_adds_column(operators, api, shots):
    operators.open(SEL).wait_drawn()
    assert "Input Shape" not in operators.headers()
    operators.page.evaluate("window.__stillSamePage = true")
    operators.group_by().select_option("name_shape")
    operators.wait_drawn()
    expect(operators.table().locator("thead th").nth(1)).to_have_text("Input Shape")
    rows = api(f"/api/operators?{SEL}&group_by=name_shape")["rows"]
    expect(operators.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(rows)), len(rows)))
    assert operators.column("Input Shape")[:3] == [r["input_shape"] for r in rows[:3]]
    assert operators.query()["group_by"] == "name_shape"
    # The pies' legends tell one operator's shapes apart by their sizes, not by "#2", "#3".
    legend = operators.legend("pie-device-self")
    assert legend and not [label for label in legend if re.search(r" #\d+$", label)], legend
    assert any("×" in label for label in legend), legend
    assert operators.page.evaluate("window.__stillSamePage") is True
    operators.screenshot(shots, "operators_input_shape")
    # Back: the plain grouping again, still the same page.
    operators.page.go_back()
    expect(operators.group_by()).to_have_value("name")
    operators.wait_drawn()
    assert "Input Shape" not in operators.headers()
    assert operators.page.evaluate("window.__stillSamePage") is True
    assert operators.page.errors == []


def test_operators_deep_link_restores_controls(operators, api):
    operators.open(f"{SEL}&group_by=name_shape&top=3&q=batch&sort=calls:asc&page=1").wait_drawn()
    expect(operators.group_by()).to_have_value("name_shape")
    expect(operators.part("top-n")).to_have_value("3")
    expect(operators.part("search")).to_have_value("batch")
    expect(operators.table().locator('th[aria-sort="ascending"]')).to_have_text(re.compile("Calls"))
    assert all("batch" in n.lower() for n in operators.names())
    # Top 3 and Other.
    expect(operators.slices("pie-host-total")).to_have_count(4)
    operators.part("top-n").fill("5")
    operators.part("top-n").press("Enter")
    expect(operators.slices("pie-host-total")).to_have_count(6)
    assert operators.query()["top"] == "5"
    assert operators.page.errors == []


def test_operators_call_stacks_panel_shows_frames(operators, api, shots):
    operators.open(SEL).wait_drawn()
    rows = api(f"/api/operators?{SEL}")["rows"]
    first = next(r for r in rows[:PAGE_SIZE] if r["has_call_stack"])
    stacks = api(f"/api/operators/stacks?{SEL}&name={quote(first['name'])}")["rows"]
    assert stacks and stacks[0]["frames"]
    # Only rows with stacks get the button.
    expect(operators.rows().locator(css_testid("stacks-button"))).to_have_count(
        sum(r["has_call_stack"] for r in rows[:PAGE_SIZE]))

    panel = operators.open_stacks(first["name"])
    expect(panel.locator(css_testid("stack-title"))).to_have_text(first["name"])
    expect(panel.locator(css_testid("stack"))).to_have_count(len(stacks))
    frames = panel.locator(css_testid("stack")).first.locator(css_testid("frame"))
    expect(frames).to_have_count(len(stacks[0]["frames"]))
    f0 = stacks[0]["frames"][0]
    expect(frames.first).to_contain_text(f"{f0['file']}({f0['line']}): {f0['function']}")
    # PyTorch 2.x paths are relative: no editor links without --source-root, a note says so; copy buttons remain.
    expect(panel.locator(css_testid("stack-note"))).to_contain_text("--source-root")
    expect(panel.locator(css_testid("frame-link"))).to_have_count(0)
    expect(frames.first.locator(css_testid("copy-frame"))).to_have_attribute("data-copy", f"{f0['file']}:{f0['line']}")
    expect(panel).to_contain_text(count(stacks[0]["calls"]))
    expect(operators.row_named(first["name"]).first).to_have_class(re.compile("row-selected"))
    operators.screenshot(shots, "operators_stack_panel")
    operators.page.set_viewport_size({"width": 1000, "height": 800})
    operators.screenshot(shots, "operators_stack_panel_1000")

    panel.locator(css_testid("stack-close")).click()
    expect(panel).to_be_hidden()
    expect(operators.row_named(first["name"]).first).not_to_have_class(re.compile("row-selected"))
    operators.open_stacks(first["name"])
    operators.page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    assert operators.page.errors == []


@pytest.mark.parametrize("run", LEGACY_RUNS)
def test_operators_call_stacks_of_a_1x_trace_link_to_the_editor(operators, api, shots, run):
    """PyTorch 1.x recorded absolute paths: every frame with a file is a vscode:// link."""
    sel = run.sel()
    operators.open(sel).wait_drawn()
    rows = api(f"/api/operators?{sel}")["rows"]
    first = next(r for r in rows[:PAGE_SIZE] if r["has_call_stack"])
    stacks = api(f"/api/operators/stacks?{sel}&name={quote(first['name'])}")["rows"]
    frame = next(f for f in stacks[0]["frames"] if f["file"])
    assert frame["file"].startswith("/")
    panel = operators.open_stacks(first["name"])
    link = panel.locator(css_testid("stack")).first.locator(css_testid("frame-link")).first
    expect(link).to_have_attribute("href", f"vscode://file{quote(frame['file'], safe='/')}:{frame['line']}")
    expect(link).to_have_text(f"{frame['file']}({frame['line']})")
    # The script itself was recorded as run (e.g. "train.py"): relative, so no link for it.
    relative = [f for s in stacks for f in s["frames"] if f["file"] and not f["file"].startswith("/")]
    if relative:
        expect(panel.locator(css_testid("stack-note"))).to_contain_text("Some file paths here are relative")
    else:
        expect(panel.locator(css_testid("stack-note"))).to_have_count(0)
    operators.screenshot(shots, f"operators_stack_panel_{run.name}")
    assert operators.page.errors == []


def test_operators_stack_panel_absolute_paths_get_editor_links_and_copy(operators, server, shots):
    """PyTorch 1.x records absolute paths: each becomes a vscode:// link, and Copy copies path:line."""
    page = operators.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    fake = {"name": "aten::conv2d", "input_shape": None, "warnings": [], "rows": [{
        "calls": 3, "device_self_us": 1500.0, "device_total_us": 2500.0, "host_self_us": 120.0, "host_total_us": 900.0,
        "tc_self_ratio": None, "tc_total_ratio": 0.5,
        "frames": [
            {"file": "/home/me/my project/train.py", "line": 42, "function": "forward"},
            {"file": None, "line": None, "function": "<built-in method conv2d of type object at 0x7f>"},
            {"file": "C:\\work\\main.py", "line": 7, "function": "<module>"},
        ],
    }]}
    page.route("**/api/operators/stacks?*", lambda route: route.fulfill(json=fake))
    operators.open(SEL).wait_drawn()
    panel = operators.open_stacks("aten::conv2d")
    links = panel.locator(css_testid("frame-link"))
    expect(links).to_have_count(2)
    expect(links.first).to_have_attribute("href", "vscode://file/home/me/my%20project/train.py:42")
    expect(links.first).to_have_attribute("title", "Open in VS Code")
    expect(links.nth(1)).to_have_attribute("href", "vscode://file/C:/work/main.py:7")
    expect(panel.locator(css_testid("stack-note"))).to_have_count(0)
    frames = panel.locator(css_testid("frame"))
    expect(frames.nth(1)).to_have_text("<built-in method conv2d of type object at 0x7f>")
    expect(frames.nth(1).locator(css_testid("copy-frame"))).to_have_count(0)
    button = frames.first.locator(css_testid("copy-frame"))
    button.click()
    expect(button).to_have_text(re.compile("Copied|Selected"))
    if button.inner_text() == "Copied":
        assert page.evaluate("navigator.clipboard.readText()") == "/home/me/my project/train.py:42"
    operators.screenshot(shots, "operators_stack_panel_absolute")
    assert page.errors == []


def test_operators_kernels_link_lands_on_filtered_kernels_view(operators, api, shots):
    operators.open(SEL).wait_drawn()
    rows = api(f"/api/operators?{SEL}")["rows"]
    op = "aten::conv2d" if any(r["name"] == "aten::conv2d" for r in rows[:PAGE_SIZE]) else \
        next(r["name"] for r in rows[:PAGE_SIZE] if r["device_total_us"] > 0)
    # Host-only operators have no kernels to show.
    expect(operators.rows().locator(css_testid("kernels-link"))).to_have_count(
        sum(r["device_total_us"] > 0 for r in rows[:PAGE_SIZE]))
    operators.row_named(op).first.locator(css_testid("kernels-link")).click()

    kernels = KernelPage(operators.page, operators.base)
    kernels.wait_drawn()
    assert kernels.query() == {"run": RESNET.name, "worker": RESNET.worker, "span": "1", "group_by": "name_op", "op": op}
    expect(kernels.part("op-banner")).to_be_visible()
    expect(kernels.part("op-banner")).to_contain_text(f"Kernels launched by {op} (and the operators it called)")
    filtered = api(f"/api/kernels?{SEL}&group_by=name_op&op={quote(op)}")["rows"]
    everything = api(f"/api/kernels?{SEL}&group_by=name_op")["rows"]
    assert 0 < len(filtered) < len(everything)
    expect(kernels.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(filtered)), len(filtered)))
    assert kernels.names() == [r["name"] for r in filtered[:PAGE_SIZE]]
    assert "Operator" in kernels.headers()
    kernels.screenshot(shots, "kernels_op_filter")
    kernels.part("op-clear").click()
    kernels.wait_drawn()
    expect(kernels.part("op-banner")).to_be_hidden()
    assert "op" not in kernels.query()
    expect(kernels.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(everything)), len(everything)))
    assert kernels.page.errors == []


def test_operators_old_links_land_here(operators):
    """The page was /operator (or /?view=operator) before each view had one name (issue 20):
    both redirect to /operators with the rest of their query."""
    for old in (f"/operator?{SEL}&q=conv", f"/?view=operator&{SEL}&q=conv"):
        operators.page.goto(f"{operators.base}{old}")
        operators.wait_drawn()
        assert urlparse(operators.page.url).path == "/operators", old
        assert operators.query() == {"run": RESNET.name, "worker": RESNET.worker, "span": "1", "q": "conv"}, old
        expect(operators.part("search")).to_have_value("conv")
        assert operators.selection()["view"] == "operators"
    assert operators.page.errors == []


def test_operators_stack_panel_links_found_paths_and_maps_them_to_this_computer(operators, server, shots):
    """A relative frame the server found under a --source-root links to its path; the panel's mapping
    (kept in this browser) moves the server's paths to this computer's, e.g. for a server in Docker."""
    page = operators.page
    fake = {"name": "aten::conv2d", "input_shape": None, "warnings": [], "rows": [{
        "calls": 1, "device_self_us": 1.0, "device_total_us": 1.0, "host_self_us": 1.0, "host_total_us": 1.0,
        "tc_self_ratio": None, "tc_total_ratio": None,
        "frames": [
            {"file": "torch/nn/modules/conv.py", "line": 534, "function": "_conv_forward",
             "path": "/workspace/venv/torch/nn/modules/conv.py"},
            {"file": "train.py", "line": 9, "function": "<module>", "path": None},
        ],
    }]}
    page.route("**/api/operators/stacks?*", lambda route: route.fulfill(json=fake))
    operators.open(SEL).wait_drawn()
    panel = operators.open_stacks("aten::conv2d")
    link = panel.locator(css_testid("frame-link"))
    expect(link).to_have_count(1)
    expect(link).to_have_attribute("href", "vscode://file/workspace/venv/torch/nn/modules/conv.py:534")
    expect(panel.locator(css_testid("stack-note"))).to_contain_text("Some file paths here are relative")
    form = panel.locator(css_testid("source-map"))
    form.locator("summary").click()
    form.locator(css_testid("source-map-from")).fill("/workspace")
    form.locator(css_testid("source-map-to")).fill("/home/me/project")
    form.locator(css_testid("source-map-save")).click()
    expect(panel.locator(css_testid("frame-link"))).to_have_attribute(
        "href", "vscode://file/home/me/project/venv/torch/nn/modules/conv.py:534")
    expect(panel.locator(css_testid("source-map")).locator("summary")).to_contain_text("/workspace opens as /home/me/project")
    operators.screenshot(shots, "operators_stack_panel_source_map")
    # Kept for the next page load; an empty prefix clears it.
    panel.locator(css_testid("stack-close")).click()
    panel = operators.open_stacks("aten::conv2d")
    expect(panel.locator(css_testid("frame-link"))).to_have_attribute(
        "href", "vscode://file/home/me/project/venv/torch/nn/modules/conv.py:534")
    form = panel.locator(css_testid("source-map"))
    form.locator("summary").click()
    form.locator(css_testid("source-map-from")).fill("")
    form.locator(css_testid("source-map-save")).click()
    expect(panel.locator(css_testid("frame-link"))).to_have_attribute(
        "href", "vscode://file/workspace/venv/torch/nn/modules/conv.py:534")
    assert page.errors == []


@pytest.mark.parametrize("shape, label", [
    ("[[64, 256, 14, 14], [64, 256, 14, 14], [256, 256, 3, 3], [], []]", "64×256×14×14, 256×256×3×3"),
    ("[[8, 4], [4], [8, 4], [2, 2]]", "8×4, 4, …"),
    ("[[256], [], [0]]", "256, 0"),
    ("[[], []]", ""),
    ("not json", "not json"),
])
def test_operator_shape_labels(blank_page, shape, label):
    out = module_runner(blank_page, {"ops": "operators.js"})(f"ops.shapeLabel({shape!r})")
    assert out == label


def test_operator_pie_labels_keep_the_name_and_the_sizes(blank_page):
    run = module_runner(blank_page, {"ops": "operators.js", "pie": "lib/pie.js"})
    long = "autograd::engine::evaluate_function: ConvolutionBackward0"
    labels = run(f"""[
        ops.shapedLabel({{ name: {long!r}, input_shape: "[[], []]" }}),
        ops.shapedLabel({{ name: "aten::convolution_backward", input_shape: "[[64, 256, 14, 14], [256, 256, 3, 3]]" }}),
        ops.shapedLabel({{ name: "aten::mm", input_shape: null }}),
    ]""")
    assert labels[0] == long  # no tensors: the name alone (the pie shortens it as any name)
    assert labels[1].startswith("aten::co") and labels[1].endswith("backward 64×256×14×14, …")
    assert len(labels[1]) <= run("pie.LABEL_CHARS")
    assert labels[2] == "aten::mm"
