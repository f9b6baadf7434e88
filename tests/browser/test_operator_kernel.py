"""The Operator and Kernel pages in Chromium: pies and tables agree with the API, search, sort,
pagination and grouping live in the URL, call stacks open, and an operator links to its kernels."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from browser_pages import KernelPage, OperatorPage, css_testid

pytestmark = pytest.mark.browser

H100_RUN = "resnet50_fp32"  # PyTorch 2.x on H100, with_stack=True: relative Python frames
V100_RUN = "resnet50_num_workers_0"  # the reference plugin's own sample (PyTorch 1.9)
H100_SEL = f"run={H100_RUN}&worker=h100_worker0&span=1"
V100_SEL = f"run={V100_RUN}&worker=worker0&span=1"
PAGE_SIZE = 50


def count(n: int) -> str:
    return f"{n:,}"


def pager_text(start: int, end: int, total: int) -> str:
    return f"{count(start)}–{count(end)} of {count(total)}"


def parse_count(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.fixture
def operator(page, server) -> OperatorPage:
    page.set_viewport_size({"width": 1400, "height": 900})
    return OperatorPage(page, server)


@pytest.fixture
def kernel(page, server) -> KernelPage:
    page.set_viewport_size({"width": 1400, "height": 900})
    return KernelPage(page, server)


# ---------------------------------------------------------------- operator view


@pytest.mark.parametrize("sel", [H100_SEL, V100_SEL], ids=["h100", "v100"])
def test_operator_renders_four_pies_and_the_table(operator, api, shots, sel):
    operator.open(sel).wait_drawn()
    rows = api(f"/api/operators?{sel}")["rows"]
    assert len(rows) > PAGE_SIZE or len(rows) > 0
    for pie in operator.pies:
        expect(operator.slices(pie).first).to_be_attached()
    # Top 10 by device self time (the first rows with time), plus Other when more rows have some.
    with_time = [r for r in rows if r["device_self_us"] > 0]
    legend = operator.legend("pie-device-self")
    assert len(legend) == min(10, len(with_time)) + (1 if len(with_time) > 10 else 0)
    if len(with_time) > 10:
        rest = len(with_time) - 10
        assert legend[-1] == f"Other ({rest} operator{'s' if rest > 1 else ''})"
    shown = min(PAGE_SIZE, len(rows))
    expect(operator.rows()).to_have_count(shown)
    expect(operator.pager_range()).to_have_text(pager_text(1, shown, len(rows)))
    # Default order: the API's (device self time, descending).
    assert operator.names() == [r["name"] for r in rows[:shown]]
    assert operator.column("Calls")[:5] == [count(r["calls"]) for r in rows[:5]]
    expect(operator.table().locator('th[aria-sort="descending"]')).to_have_text(re.compile("Device Self"))
    expect(operator.part("row-count")).to_have_text(f"{count(len(rows))} operators")
    expect(operator.about().locator("summary")).to_have_text("How these numbers are computed")
    expect(operator.part("warnings")).to_be_hidden()
    assert operator.selection()["view"] == "operator"
    name = "h100" if sel == H100_SEL else "v100"
    operator.screenshot(shots, f"operator_{name}", full=True)
    assert operator.page.errors == []


def test_operator_search_filters_table_and_pies(operator, api, shots):
    operator.open(H100_SEL).wait_drawn()
    rows = api(f"/api/operators?{H100_SEL}")["rows"]
    matching = [r for r in rows if "conv" in r["name"].lower()]
    assert 0 < len(matching) < len(rows)
    operator.search("CONV")
    expect(operator.rows()).to_have_count(min(PAGE_SIZE, len(matching)))
    names = operator.names()
    assert names == [r["name"] for r in matching][:PAGE_SIZE]
    assert all("conv" in n.lower() for n in names)
    expect(operator.part("row-count")).to_contain_text(f"{len(matching)} of {len(rows)}")
    # The pies only count matching operators: no Other slice when they all fit.
    with_time = [r for r in matching if r["device_self_us"] > 0]
    expect(operator.slices("pie-device-self")).to_have_count(min(10, len(with_time)) + (len(with_time) > 10))
    assert operator.query()["q"] == "CONV"
    operator.screenshot(shots, "operator_search")
    # The search is in the URL: a reload restores it.
    operator.page.reload()
    operator.wait_drawn()
    expect(operator.part("search")).to_have_value("CONV")
    expect(operator.rows()).to_have_count(min(PAGE_SIZE, len(matching)))
    # Nothing matches: a calm note, empty pies.
    operator.search("no-such-operator-xyz")
    expect(operator.table().locator(css_testid("table-empty"))).to_contain_text("no-such-operator-xyz")
    expect(operator.part("pie-device-self")).to_contain_text("No device time")
    operator.search("")
    expect(operator.rows()).to_have_count(min(PAGE_SIZE, len(rows)))
    expect(operator.slices("pie-device-self").first).to_be_attached()
    assert "q" not in operator.query()
    assert operator.page.errors == []


def test_operator_sort_and_pagination_live_in_url(operator, api):
    operator.open(H100_SEL).wait_drawn()
    rows = api(f"/api/operators?{H100_SEL}")["rows"]
    assert len(rows) > PAGE_SIZE, "the fixture should need two pages"
    operator.sort_by("Calls")
    assert operator.query()["sort"] == "calls:desc"
    calls = [parse_count(c) for c in operator.column("Calls")]
    assert calls == sorted(calls, reverse=True)
    assert calls[0] == max(r["calls"] for r in rows)
    operator.sort_by("Name")  # a text column sorts ascending first
    names = operator.names()
    assert operator.query()["sort"] == "name:asc"
    assert names[0] == sorted((r["name"] for r in rows), key=str.lower)[0]

    operator.pager("next").click()
    end = min(2 * PAGE_SIZE, len(rows))
    expect(operator.pager_range()).to_have_text(pager_text(PAGE_SIZE + 1, end, len(rows)))
    expect(operator.rows()).to_have_count(end - PAGE_SIZE)
    second_page = operator.names()
    assert second_page[0] not in names
    assert operator.query()["page"] == "2"
    if end == len(rows):
        expect(operator.pager("next")).to_be_disabled()
    # Reload: the same sort and page.
    operator.page.reload()
    operator.wait_drawn()
    expect(operator.pager_range()).to_have_text(pager_text(PAGE_SIZE + 1, end, len(rows)))
    assert operator.names() == second_page
    # A new sort goes back to the first page.
    operator.sort_by("Host Total")
    expect(operator.pager_range()).to_have_text(pager_text(1, PAGE_SIZE, len(rows)))
    assert "page" not in operator.query()
    assert operator.page.errors == []


def test_operator_group_by_input_shape_adds_column(operator, api, shots):
    operator.open(H100_SEL).wait_drawn()
    assert "Input Shape" not in operator.headers()
    operator.page.evaluate("window.__stillSamePage = true")
    operator.group_by().select_option("name_shape")
    operator.wait_drawn()
    expect(operator.table().locator("thead th").nth(1)).to_have_text("Input Shape")
    rows = api(f"/api/operators?{H100_SEL}&group_by=name_shape")["rows"]
    expect(operator.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(rows)), len(rows)))
    assert operator.column("Input Shape")[:3] == [r["input_shape"] for r in rows[:3]]
    assert operator.query()["group_by"] == "name_shape"
    assert operator.page.evaluate("window.__stillSamePage") is True
    operator.screenshot(shots, "operator_input_shape")
    # Back: the plain grouping again, still the same page.
    operator.page.go_back()
    expect(operator.group_by()).to_have_value("name")
    operator.wait_drawn()
    assert "Input Shape" not in operator.headers()
    assert operator.page.evaluate("window.__stillSamePage") is True
    assert operator.page.errors == []


def test_operator_deep_link_restores_controls(operator, api):
    operator.open(f"{H100_SEL}&group_by=name_shape&top=3&q=batch&sort=calls:asc&page=1").wait_drawn()
    expect(operator.group_by()).to_have_value("name_shape")
    expect(operator.part("top-n")).to_have_value("3")
    expect(operator.part("search")).to_have_value("batch")
    expect(operator.table().locator('th[aria-sort="ascending"]')).to_have_text(re.compile("Calls"))
    assert all("batch" in n.lower() for n in operator.names())
    # Top 3 and Other.
    expect(operator.slices("pie-host-total")).to_have_count(4)
    operator.part("top-n").fill("5")
    operator.part("top-n").press("Enter")
    expect(operator.slices("pie-host-total")).to_have_count(6)
    assert operator.query()["top"] == "5"
    assert operator.page.errors == []


def test_operator_call_stacks_panel_shows_frames(operator, api, shots):
    operator.open(H100_SEL).wait_drawn()
    rows = api(f"/api/operators?{H100_SEL}")["rows"]
    first = next(r for r in rows[:PAGE_SIZE] if r["has_call_stack"])
    stacks = api(f"/api/operators/stacks?{H100_SEL}&name={quote(first['name'])}")["rows"]
    assert stacks and stacks[0]["frames"]
    # Only rows with stacks get the button.
    expect(operator.rows().locator(css_testid("stacks-button"))).to_have_count(
        sum(r["has_call_stack"] for r in rows[:PAGE_SIZE]))

    panel = operator.open_stacks(first["name"])
    expect(panel.locator(css_testid("stack-title"))).to_have_text(first["name"])
    expect(panel.locator(css_testid("stack"))).to_have_count(len(stacks))
    frames = panel.locator(css_testid("stack")).first.locator(css_testid("frame"))
    expect(frames).to_have_count(len(stacks[0]["frames"]))
    f0 = stacks[0]["frames"][0]
    expect(frames.first).to_contain_text(f"{f0['file']}({f0['line']}): {f0['function']}")
    # PyTorch 2.x paths are relative: no editor links, a note says why; copy buttons remain.
    expect(panel.locator(css_testid("stack-note"))).to_contain_text("absolute paths")
    expect(panel.locator(css_testid("frame-link"))).to_have_count(0)
    expect(frames.first.locator(css_testid("copy-frame"))).to_have_attribute("data-copy", f"{f0['file']}:{f0['line']}")
    expect(panel).to_contain_text(count(stacks[0]["calls"]))
    expect(operator.row_named(first["name"]).first).to_have_class(re.compile("row-selected"))
    operator.screenshot(shots, "operator_stack_panel")
    operator.page.set_viewport_size({"width": 1000, "height": 800})
    operator.screenshot(shots, "operator_stack_panel_1000")

    panel.locator(css_testid("stack-close")).click()
    expect(panel).to_be_hidden()
    expect(operator.row_named(first["name"]).first).not_to_have_class(re.compile("row-selected"))
    operator.open_stacks(first["name"])
    operator.page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    assert operator.page.errors == []


def test_operator_call_stacks_of_a_1x_trace_link_to_the_editor(operator, api, shots):
    """PyTorch 1.x recorded absolute paths: every frame with a file is a vscode:// link."""
    operator.open(V100_SEL).wait_drawn()
    rows = api(f"/api/operators?{V100_SEL}")["rows"]
    first = next(r for r in rows[:PAGE_SIZE] if r["has_call_stack"])
    stacks = api(f"/api/operators/stacks?{V100_SEL}&name={quote(first['name'])}")["rows"]
    frame = next(f for f in stacks[0]["frames"] if f["file"])
    assert frame["file"].startswith("/")
    panel = operator.open_stacks(first["name"])
    link = panel.locator(css_testid("stack")).first.locator(css_testid("frame-link")).first
    expect(link).to_have_attribute("href", f"vscode://file{quote(frame['file'], safe='/')}:{frame['line']}")
    expect(link).to_have_text(f"{frame['file']}({frame['line']})")
    # The script itself was recorded as run ("resnet50_profiler_api.py"): relative, so no link for it.
    relative = [f for s in stacks for f in s["frames"] if f["file"] and not f["file"].startswith("/")]
    if relative:
        expect(panel.locator(css_testid("stack-note"))).to_contain_text("Some file paths here are relative")
    else:
        expect(panel.locator(css_testid("stack-note"))).to_have_count(0)
    operator.screenshot(shots, "operator_stack_panel_v100")
    assert operator.page.errors == []


def test_stack_panel_absolute_paths_get_editor_links_and_copy(operator, server, shots):
    """PyTorch 1.x records absolute paths: each becomes a vscode:// link, and Copy copies path:line."""
    page = operator.page
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
    operator.open(H100_SEL).wait_drawn()
    panel = operator.open_stacks("aten::conv2d")
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
    operator.screenshot(shots, "operator_stack_panel_absolute")
    assert page.errors == []


def test_operator_kernels_link_lands_on_filtered_kernel_view(operator, api, shots):
    operator.open(H100_SEL).wait_drawn()
    rows = api(f"/api/operators?{H100_SEL}")["rows"]
    op = "aten::conv2d" if any(r["name"] == "aten::conv2d" for r in rows[:PAGE_SIZE]) else \
        next(r["name"] for r in rows[:PAGE_SIZE] if r["device_total_us"] > 0)
    # Host-only operators have no kernels to show.
    expect(operator.rows().locator(css_testid("kernels-link"))).to_have_count(
        sum(r["device_total_us"] > 0 for r in rows[:PAGE_SIZE]))
    operator.row_named(op).first.locator(css_testid("kernels-link")).click()

    kernel = KernelPage(operator.page, operator.base)
    kernel.wait_drawn()
    assert kernel.query() == {"run": H100_RUN, "worker": "h100_worker0", "span": "1", "group_by": "name_op", "op": op}
    expect(kernel.part("op-banner")).to_be_visible()
    expect(kernel.part("op-banner")).to_contain_text(f"Kernels launched by {op} (and the operators it called)")
    filtered = api(f"/api/kernels?{H100_SEL}&group_by=name_op&op={quote(op)}")["rows"]
    everything = api(f"/api/kernels?{H100_SEL}&group_by=name_op")["rows"]
    assert 0 < len(filtered) < len(everything)
    expect(kernel.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(filtered)), len(filtered)))
    assert kernel.names() == [r["name"] for r in filtered[:PAGE_SIZE]]
    assert "Operator" in kernel.headers()
    kernel.screenshot(shots, "kernel_op_filter")
    kernel.part("op-clear").click()
    kernel.wait_drawn()
    expect(kernel.part("op-banner")).to_be_hidden()
    assert "op" not in kernel.query()
    expect(kernel.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(everything)), len(everything)))
    assert kernel.page.errors == []


# ---------------------------------------------------------------- kernel view


@pytest.mark.parametrize("sel", [H100_SEL, V100_SEL], ids=["h100", "v100"])
def test_kernel_renders_two_pies_and_the_table(kernel, api, shots, sel):
    kernel.open(sel).wait_drawn()
    rows = api(f"/api/kernels?{sel}")["rows"]
    assert rows
    expect(kernel.slices("pie-kernels").first).to_be_attached()
    expect(kernel.slices("pie-tensor-cores").first).to_be_attached()
    legend = kernel.legend("pie-kernels")
    assert len(legend) == min(10, len(rows)) + (len(rows) > 10)
    tc_legend = kernel.legend("pie-tensor-cores")
    assert set(tc_legend) <= {"Using tensor cores", "Using tensor cores (guess)", "Not using tensor cores"}
    assert ("Using tensor cores" in tc_legend) == any(r["tensor_cores"] and not r["tensor_cores_guess"] for r in rows)
    shown = min(PAGE_SIZE, len(rows))
    expect(kernel.rows()).to_have_count(shown)
    expect(kernel.pager_range()).to_have_text(pager_text(1, shown, len(rows)))
    assert kernel.names() == [r["name"] for r in rows[:shown]]
    assert kernel.column("Calls")[:5] == [count(r["calls"]) for r in rows[:5]]
    expect(kernel.part("op-banner")).to_be_hidden()
    expect(kernel.about().locator("summary")).to_have_text("How these numbers are computed")
    name = "h100" if sel == H100_SEL else "v100"
    kernel.screenshot(shots, f"kernel_{name}", full=True)
    assert kernel.page.errors == []


def test_kernel_search_sort_and_pagination(kernel, api):
    kernel.open(H100_SEL).wait_drawn()
    rows = api(f"/api/kernels?{H100_SEL}")["rows"]
    kernel.sort_by("Mean")
    assert kernel.query()["sort"] == "mean_us:desc"
    assert kernel.names()[0] == max(rows, key=lambda r: r["mean_us"])["name"]
    kernel.sort_by("Mean")
    assert kernel.query()["sort"] == "mean_us:asc"
    assert kernel.names()[0] == min(rows, key=lambda r: r["mean_us"])["name"]
    if len(rows) > PAGE_SIZE:
        kernel.pager("last").click()
        expect(kernel.pager_range()).to_have_text(pager_text(PAGE_SIZE * ((len(rows) - 1) // PAGE_SIZE) + 1, len(rows), len(rows)))
        expect(kernel.pager("next")).to_be_disabled()
        kernel.pager("prev").click()
        if len(rows) <= 2 * PAGE_SIZE:
            expect(kernel.pager("prev")).to_be_disabled()
    needle = "gemm"
    matching = [r for r in rows if needle in r["name"].lower()]
    assert 0 < len(matching) < len(rows)
    kernel.search(needle)
    expect(kernel.rows()).to_have_count(min(PAGE_SIZE, len(matching)))
    assert all(needle in n.lower() for n in kernel.names())
    expect(kernel.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(matching)), len(matching)))
    assert kernel.query()["q"] == needle and "page" not in kernel.query()
    assert kernel.page.errors == []


def test_kernel_group_by_op_adds_launch_columns(kernel, api, shots):
    kernel.open(H100_SEL).wait_drawn()
    kernel.group_by().select_option("name_op")
    kernel.wait_drawn()
    expect(kernel.table().locator("thead th").nth(1)).to_have_text("Operator")
    headers = kernel.headers()
    for label in ("Grid", "Block", "Registers / Thread", "Shared Memory", "Op TC Eligible"):
        assert label in headers
    rows = api(f"/api/kernels?{H100_SEL}&group_by=name_op")["rows"]
    expect(kernel.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(rows)), len(rows)))
    first = rows[0]
    assert kernel.column("Operator")[0] == (first["op"] or "n/a")
    # The pie still ranks kernels: one slice per kernel name, however many operators launched it.
    names = {r["name"] for r in rows}
    assert len(kernel.legend("pie-kernels")) == min(10, len(names)) + (len(names) > 10)
    assert kernel.column("Grid")[0] == (f"[{', '.join(map(str, first['grid']))}]" if first["grid"] else "n/a")
    assert kernel.query()["group_by"] == "name_op"
    kernel.screenshot(shots, "kernel_name_op")
    assert kernel.page.errors == []


@pytest.mark.parametrize("width", [1400, 1000])
def test_kernel_long_names_never_break_layout(kernel, api, shots, width):
    kernel.page.set_viewport_size({"width": width, "height": 900})
    kernel.open(H100_SEL).wait_drawn()
    rows = api(f"/api/kernels?{H100_SEL}")["rows"]
    longest = max(rows[:PAGE_SIZE], key=lambda r: len(r["name"]))
    assert len(longest["name"]) > 300
    # The page never scrolls sideways; a wide table scrolls inside its card.
    assert kernel.page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    cell = kernel.row_named(longest["name"]).first.locator("td:first-child")
    assert cell.bounding_box()["width"] < width * 0.5
    expect(cell.locator("span")).to_have_attribute("title", longest["name"])
    for pie in kernel.pies:
        assert kernel.part(pie).bounding_box()["width"] <= width
    assert all(len(label) <= 40 for label in kernel.legend("pie-kernels"))
    kernel.screenshot(shots, f"kernel_{width}")
    assert kernel.page.errors == []


def test_kernel_guess_and_warnings_show(kernel, server, shots):
    """A tensor-core guess is marked as one, with a tooltip; analysis warnings show in the yellow note."""
    page = kernel.page
    data = json.loads(page.request.get(f"{server}/api/kernels?{H100_SEL}").text())
    data["rows"][0].update(tensor_cores=True, tensor_cores_guess=True, name="triton_tem_fused_mm_0 <guess>")
    data["warnings"] = ["12 kernels had no <launching> operator"]
    page.route("**/api/kernels?*", lambda route: route.fulfill(json=data))
    kernel.open(H100_SEL).wait_drawn()
    cell = kernel.row_named("triton_tem_fused_mm_0 <guess>").locator("td").nth(1)
    expect(cell).to_have_text("Yes (guess)")
    expect(cell.locator("span")).to_have_attribute("title", re.compile("Inferred from the kernel name"))
    expect(kernel.part("warnings")).to_contain_text("12 kernels had no <launching> operator")
    assert "Using tensor cores (guess)" in kernel.legend("pie-tensor-cores")
    kernel.screenshot(shots, "kernel_guess_warning")
    assert page.errors == []
