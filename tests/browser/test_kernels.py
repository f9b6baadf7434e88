"""The kernels page in Chromium: pies and table agree with /api/kernels, search, sort, pagination
and grouping live in the URL, long names keep the layout, and old /kernel links still land here."""

from __future__ import annotations

import json
import re
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from browser_pages import KernelPage
from runs import LEGACY, RESNET, V100, each

pytestmark = pytest.mark.browser

SEL = RESNET.sel()  # PyTorch 2.x on an H200: over 50 kernels, names over 300 characters
PAGE_SIZE = 50


def count(n: int) -> str:
    return f"{n:,}"


def pager_text(start: int, end: int, total: int) -> str:
    return f"{count(start)}–{count(end)} of {count(total)}"


@pytest.fixture
def kernels(page, server) -> KernelPage:
    page.set_viewport_size({"width": 1400, "height": 900})
    return KernelPage(page, server)


@pytest.mark.parametrize("run", each(RESNET, LEGACY, V100))
def test_kernels_renders_two_pies_and_the_table(kernels, api, shots, run):
    sel = run.sel()
    kernels.open(sel).wait_drawn()
    rows = api(f"/api/kernels?{sel}")["rows"]
    assert rows
    expect(kernels.slices("pie-kernels").first).to_be_attached()
    expect(kernels.slices("pie-tensor-cores").first).to_be_attached()
    legend = kernels.legend("pie-kernels")
    assert len(legend) == min(10, len(rows)) + (len(rows) > 10)
    tc_legend = kernels.legend("pie-tensor-cores")
    assert set(tc_legend) <= {"Using tensor cores", "Using tensor cores (guess)", "Not using tensor cores"}
    assert ("Using tensor cores" in tc_legend) == any(r["tensor_cores"] and not r["tensor_cores_guess"] for r in rows)
    shown = min(PAGE_SIZE, len(rows))
    expect(kernels.rows()).to_have_count(shown)
    expect(kernels.pager_range()).to_have_text(pager_text(1, shown, len(rows)))
    assert kernels.names() == [r["name"] for r in rows[:shown]]
    assert kernels.column("Calls")[:5] == [count(r["calls"]) for r in rows[:5]]
    expect(kernels.part("op-banner")).to_be_hidden()
    expect(kernels.about().locator("summary")).to_have_text("How these numbers are computed")
    kernels.screenshot(shots, f"kernels_{run.name}", full=True)
    assert kernels.page.errors == []


def test_kernels_search_sort_and_pagination(kernels, api):
    kernels.open(SEL).wait_drawn()
    rows = api(f"/api/kernels?{SEL}")["rows"]
    kernels.sort_by("Mean")
    assert kernels.query()["sort"] == "mean_us:desc"
    assert kernels.names()[0] == max(rows, key=lambda r: r["mean_us"])["name"]
    kernels.sort_by("Mean")
    assert kernels.query()["sort"] == "mean_us:asc"
    assert kernels.names()[0] == min(rows, key=lambda r: r["mean_us"])["name"]
    if len(rows) > PAGE_SIZE:
        kernels.pager("last").click()
        expect(kernels.pager_range()).to_have_text(pager_text(PAGE_SIZE * ((len(rows) - 1) // PAGE_SIZE) + 1, len(rows), len(rows)))
        expect(kernels.pager("next")).to_be_disabled()
        kernels.pager("prev").click()
        if len(rows) <= 2 * PAGE_SIZE:
            expect(kernels.pager("prev")).to_be_disabled()
    needle = "gemm"
    matching = [r for r in rows if needle in r["name"].lower()]
    assert 0 < len(matching) < len(rows)
    kernels.search(needle)
    expect(kernels.rows()).to_have_count(min(PAGE_SIZE, len(matching)))
    assert all(needle in n.lower() for n in kernels.names())
    expect(kernels.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(matching)), len(matching)))
    assert kernels.query()["q"] == needle and "page" not in kernels.query()
    assert kernels.page.errors == []


def test_kernels_group_by_op_adds_launch_columns(kernels, api, shots):
    kernels.open(SEL).wait_drawn()
    kernels.group_by().select_option("name_op")
    kernels.wait_drawn()
    expect(kernels.table().locator("thead th").nth(1)).to_have_text("Operator")
    headers = kernels.headers()
    for label in ("Grid", "Block", "Registers / Thread", "Shared Memory", "Op TC Eligible"):
        assert label in headers
    rows = api(f"/api/kernels?{SEL}&group_by=name_op")["rows"]
    expect(kernels.pager_range()).to_have_text(pager_text(1, min(PAGE_SIZE, len(rows)), len(rows)))
    first = rows[0]
    assert kernels.column("Operator")[0] == (first["op"] or "n/a")
    # The pie still ranks kernels: one slice per kernel name, however many operators launched it.
    names = {r["name"] for r in rows}
    assert len(kernels.legend("pie-kernels")) == min(10, len(names)) + (len(names) > 10)
    assert kernels.column("Grid")[0] == (f"[{', '.join(map(str, first['grid']))}]" if first["grid"] else "n/a")
    assert kernels.query()["group_by"] == "name_op"
    kernels.screenshot(shots, "kernels_name_op")
    assert kernels.page.errors == []


@pytest.mark.parametrize("width", [1400, 1000])
def test_kernels_long_names_never_break_layout(kernels, api, shots, width):
    kernels.page.set_viewport_size({"width": width, "height": 900})
    kernels.open(SEL).wait_drawn()
    rows = api(f"/api/kernels?{SEL}")["rows"]
    longest = max(rows[:PAGE_SIZE], key=lambda r: len(r["name"]))
    assert len(longest["name"]) > 300
    # The page never scrolls sideways; a wide table scrolls inside its card.
    assert kernels.page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    cell = kernels.row_named(longest["name"]).first.locator("td:first-child")
    assert cell.bounding_box()["width"] < width * 0.5
    expect(cell.locator("span")).to_have_attribute("title", longest["name"])
    for pie in kernels.pies:
        assert kernels.part(pie).bounding_box()["width"] <= width
    assert all(len(label) <= 40 for label in kernels.legend("pie-kernels"))
    kernels.screenshot(shots, f"kernels_{width}")
    assert kernels.page.errors == []


def test_kernels_guess_and_warnings_show(kernels, server, shots):
    """A tensor-core guess is marked as one, with a tooltip; analysis warnings show in the yellow note."""
    page = kernels.page
    data = json.loads(page.request.get(f"{server}/api/kernels?{SEL}").text())
    data["rows"][0].update(tensor_cores=True, tensor_cores_guess=True, name="triton_tem_fused_mm_0 <guess>")
    data["warnings"] = ["12 kernels had no <launching> operator"]
    page.route("**/api/kernels?*", lambda route: route.fulfill(json=data))
    kernels.open(SEL).wait_drawn()
    cell = kernels.row_named("triton_tem_fused_mm_0 <guess>").locator("td").nth(1)
    expect(cell).to_have_text("Yes (guess)")
    expect(cell.locator("span")).to_have_attribute("title", re.compile("Inferred from the kernel name"))
    expect(kernels.part("warnings")).to_contain_text("12 kernels had no <launching> operator")
    assert "Using tensor cores (guess)" in kernels.legend("pie-tensor-cores")
    kernels.screenshot(shots, "kernels_guess_warning")
    assert page.errors == []


def test_kernels_old_page_link_lands_here(kernels):
    """The page was /kernel before each view had one name (issue 20): bookmarks and shared links
    redirect to /kernels with their query."""
    kernels.page.goto(f"{kernels.base}/kernel?{SEL}&group_by=name_op&q=gemm")
    kernels.wait_drawn()
    assert urlparse(kernels.page.url).path == "/kernels"
    assert kernels.query() == {"run": RESNET.name, "worker": RESNET.worker, "span": "1", "group_by": "name_op", "q": "gemm"}
    expect(kernels.group_by()).to_have_value("name_op")
    expect(kernels.part("search")).to_have_value("gemm")
    assert kernels.selection()["view"] == "kernels"
    assert kernels.page.errors == []
