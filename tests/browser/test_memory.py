"""The Memory page in Chromium: the curve agrees with the API (peaks, steps), a device switch, a
range dragged across the curve filters both tables exactly as the API does for that range and
lives in the URL, reset, trace and operator links, the legacy trace's reasons, the no-memory
message, and the curve's pure helpers."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, quote, urlparse

import pytest
from playwright.sync_api import Locator, expect

from browser_pages import ShellPage, css_testid, module_runner
from formats import fmt_bytes
from runs import LEGACY, RESNET, V100, each

pytestmark = pytest.mark.browser

SEL = RESNET.sel()  # PyTorch 2.x: totals and addresses
PAGE_SIZE = 50


def count_text(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


class MemoryPage(ShellPage):
    view = "memory"

    def wait_drawn(self) -> "MemoryPage":
        """Waits until the curve (or its reason), both tables (or their notes) are there and nothing loads."""
        self.wait_mounted()
        expect(self.root()).to_be_visible()
        expect(self.part("memory-curve").locator(".main-svg, p").first).to_be_attached()
        expect(self.part("events-table").locator("table, p").first).to_be_attached()
        expect(self.part("stats-table").locator("table, p").first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        expect(self.root()).not_to_have_attribute("data-loading", "true")
        return self

    def annotations(self) -> list[str]:
        return self.part("memory-curve").locator(".annotation-text").all_text_contents()

    def peaks(self) -> list[str]:
        """The peaks' markers, by what hovering them says ("Peak allocated: 2.94 GiB at ...")."""
        return self.part("memory-curve").evaluate(
            "(node) => node.data.filter((t) => t.mode === 'markers').map((t) => t.hovertemplate.split(' at ')[0])")

    def rows(self, table: str) -> Locator:
        return self.part(table).locator("tbody tr")

    def drag(self, start_share: float, end_share: float) -> None:
        """Drags across the plot area from one share of its width to another."""
        box = self.part("memory-curve").locator(".nsewdrag").first.bounding_box()
        y = box["y"] + box["height"] / 2
        self.page.mouse.move(box["x"] + box["width"] * start_share, y)
        self.page.mouse.down()
        self.page.mouse.move(box["x"] + box["width"] * (start_share + end_share) / 2, y, steps=4)
        self.page.mouse.move(box["x"] + box["width"] * end_share, y, steps=4)
        self.page.mouse.up()


@pytest.fixture
def memory(page, server) -> MemoryPage:
    page.set_viewport_size({"width": 1400, "height": 900})
    return MemoryPage(page, server)


def range_of(memory: MemoryPage) -> tuple[str, str]:
    query = memory.query()
    return query["start_us"], query["end_us"]


def test_memory_curve_renders_with_the_api_peaks_and_steps(memory, api, shots):
    memory.open(SEL).wait_drawn()
    devices = api(f"/api/memory/devices?{SEL}")
    curve = api(f"/api/memory/curve?{SEL}")
    assert devices["default"] == "GPU0"
    expect(memory.part("device-select")).to_have_value("GPU0")
    chart = memory.part("memory-curve")
    # Reserved and allocated as step lines, plus the two peak markers.
    expect(chart.locator(".scatterlayer .trace")).to_have_count(4)
    shapes = chart.evaluate("(node) => node.data.filter((t) => t.mode === 'lines').map((t) => [t.name, t.line.shape])")
    assert shapes == [["Reserved", "hv"], ["Allocated", "hv"]]
    labels = memory.annotations()
    # The peaks are markers (named above the chart), not labels beside them: those sat under the hover box.
    assert memory.peaks() == [f"Peak reserved: {fmt_bytes(curve['peak_reserved']['bytes'])}",
                              f"Peak allocated: {fmt_bytes(curve['peak_allocated']['bytes'])}"]
    assert not [label for label in labels if "peak" in label.lower()]
    for step in devices["steps"]:
        assert f"step {step['step']}" in labels
    expect(memory.part("peak-allocated")).to_have_text(fmt_bytes(curve["peak_allocated"]["bytes"]))
    expect(memory.part("capacity")).to_have_text(fmt_bytes(curve["capacity_bytes"]))
    # y is fixed (x-only zoom) and ticks in binary units; the capacity is far above the curve: no line yet.
    layout = chart.evaluate("(node) => ({fixed: node.layout.yaxis.fixedrange, ticks: node.layout.yaxis.ticktext,"
                            " dashed: node.layout.shapes.filter((s) => s.line && s.line.dash === 'dash').length})")
    gb = [t for t in layout["ticks"] if t != "0"]
    assert layout["fixed"] is True and gb and all(t.endswith(" GiB") for t in gb) and layout["dashed"] == 0
    memory.part("capacity-toggle").check()
    expect(chart.locator(".annotation-text", has_text=f"capacity {fmt_bytes(curve['capacity_bytes'])}")).to_be_visible()
    assert memory.query()["capacity"] == "1"
    memory.part("capacity-toggle").uncheck()
    expect(chart.locator(".annotation-text", has_text="capacity")).to_have_count(0)
    expect(memory.part("range-text")).to_have_text(re.compile(r"^Whole trace: "))
    expect(memory.part("reset-range")).to_be_disabled()
    events = api(f"/api/memory/events?{SEL}")
    stats = api(f"/api/memory/stats?{SEL}")
    expect(memory.part("events-count")).to_have_text(count_text(events["total"], "allocation"))
    expect(memory.part("stats-count")).to_have_text(count_text(len(stats["rows"]), "operator"))
    expect(memory.rows("events-table")).to_have_count(min(PAGE_SIZE, events["total"]))
    expect(memory.part("warnings")).to_be_visible()  # the API's note on records outside every operator
    expect(memory.about().locator("summary")).to_have_text("How these numbers are computed")
    memory.screenshot(shots, "memory_curve")
    memory.screenshot(shots, "memory_full", full=True)
    assert memory.page.errors == []


def test_memory_device_switch_redraws_for_the_host(memory, api):
    memory.open(SEL).wait_drawn()
    memory.part("device-select").select_option("CPU")
    expect(memory.page).to_have_url(re.compile(r"device=CPU"))
    memory.wait_drawn()
    expect(memory.part("device-select")).to_have_value("CPU")
    curve = api(f"/api/memory/curve?{SEL}&device=CPU")
    events = api(f"/api/memory/events?{SEL}&device=CPU")
    expect(memory.part("peak-allocated")).to_have_text(fmt_bytes(curve["peak_allocated"]["bytes"]))
    assert memory.peaks() == [f"Peak allocated: {fmt_bytes(curve['peak_allocated']['bytes'])}"]
    expect(memory.part("events-count")).to_have_text(count_text(events["total"], "allocation"))
    # Host memory has no reserved pool: only the allocated line is drawn, and no capacity.
    names = memory.part("memory-curve").evaluate("(node) => node.data.filter((t) => t.mode === 'lines').map((t) => t.name)")
    assert names == ["Allocated"]
    expect(memory.part("capacity-toggle")).to_be_disabled()
    # A reload keeps the device.
    memory.page.reload()
    memory.wait_drawn()
    expect(memory.part("device-select")).to_have_value("CPU")
    assert memory.page.errors == []


def test_memory_drag_selects_a_range_that_filters_both_tables(memory, api, shots):
    memory.open(SEL).wait_drawn()
    whole_events = api(f"/api/memory/events?{SEL}")["total"]
    whole_stats = api(f"/api/memory/stats?{SEL}")["rows"]
    memory.drag(0.30, 0.45)
    expect(memory.page).to_have_url(re.compile(r"end_us=.*start_us="))
    memory.wait_drawn()
    start, end = range_of(memory)
    assert float(end) > float(start)
    rng = f"{SEL}&start_us={start}&end_us={end}"
    events = api(f"/api/memory/events?{rng}")
    stats = api(f"/api/memory/stats?{rng}")
    curve = api(f"/api/memory/curve?{rng}")
    assert 0 < events["total"] < whole_events
    expect(memory.part("events-count")).to_have_text(count_text(events["total"], "allocation"))
    expect(memory.part("stats-count")).to_have_text(count_text(len(stats["rows"]), "operator"))
    assert [r["calls"] for r in stats["rows"]] != [r["calls"] for r in whole_stats]
    # The stats table (sorted by self size increase, as the API) shows the range's numbers.
    first = stats["rows"][0]
    expect(memory.rows("stats-table").first.locator("td").nth(1)).to_have_text(f"{first['calls']:,}")
    expect(memory.rows("stats-table").first.locator("td").first).to_have_text(first["name"])
    # The curve was fetched again for the range: its x axis is the range, its peak the range's.
    axis = memory.part("memory-curve").evaluate("(node) => node.layout.xaxis.range")
    lanes = api(f"/api/trace/lanes?{SEL}")
    assert axis[0] == pytest.approx((float(start) - lanes["start_us"]) / 1000, abs=1e-3)
    assert axis[1] == pytest.approx((float(end) - lanes["start_us"]) / 1000, abs=1e-3)
    assert f"Peak allocated: {fmt_bytes(curve['peak_allocated']['bytes'])}" in memory.peaks()
    expect(memory.part("range-text")).to_have_text(re.compile(r"^Selected \d"))
    expect(memory.part("step-select")).to_have_value("custom")
    expect(memory.part("reset-range")).to_be_enabled()
    memory.screenshot(shots, "memory_range")

    # The URL holds the range: a fresh page shows the same rows.
    url = memory.page.url
    memory.page.goto("about:blank")
    memory.page.goto(url)
    memory.wait_drawn()
    expect(memory.part("events-count")).to_have_text(count_text(events["total"], "allocation"))
    expect(memory.part("stats-count")).to_have_text(count_text(len(stats["rows"]), "operator"))
    assert range_of(memory) == (start, end)

    # Reset: the whole trace again, the range gone from the URL.
    memory.part("reset-range").click()
    expect(memory.page).not_to_have_url(re.compile(r"start_us="))
    memory.wait_drawn()
    expect(memory.part("events-count")).to_have_text(count_text(whole_events, "allocation"))
    expect(memory.part("stats-count")).to_have_text(count_text(len(whole_stats), "operator"))
    expect(memory.part("range-text")).to_have_text(re.compile(r"^Whole trace"))
    assert memory.page.errors == []


def test_memory_step_picker_and_double_click_reset(memory, api):
    memory.open(SEL).wait_drawn()
    steps = api(f"/api/memory/devices?{SEL}")["steps"]
    step = steps[-1]
    memory.part("step-select").select_option(step["step"])
    expect(memory.page).to_have_url(re.compile(r"start_us="))
    memory.wait_drawn()
    start, end = range_of(memory)
    assert float(start) == pytest.approx(step["start_us"], abs=1e-3)
    assert float(end) == pytest.approx(step["end_us"], abs=1e-3)
    stats = api(f"/api/memory/stats?{SEL}&start_us={start}&end_us={end}")
    expect(memory.part("stats-count")).to_have_text(count_text(len(stats["rows"]), "operator"))
    box = memory.part("memory-curve").locator(".nsewdrag").first.bounding_box()
    memory.page.mouse.dblclick(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(memory.page).not_to_have_url(re.compile(r"start_us="))
    memory.wait_drawn()
    expect(memory.part("step-select")).to_have_value("")
    assert memory.page.errors == []


def test_memory_events_rows_link_mark_absent_values_sort_and_search(memory, api):
    memory.open(SEL).wait_drawn()
    everything = api(f"/api/memory/events?{SEL}")
    rows = everything["rows"][:PAGE_SIZE]
    table = memory.part("events-table")
    # The API's order (earliest first); a row with an operator links to it, selected in the trace view.
    index = next(i for i, r in enumerate(rows) if r["op_id"] is not None)
    href = memory.rows("events-table").nth(index).locator(css_testid("trace-link")).get_attribute("href")
    assert href == f"/trace?{SEL}&select={rows[index]['op_id']}"
    # An allocation the trace never saw (freed early in the trace): dashes that say why. It is on
    # the page the URL names.
    page, unseen = divmod(next(i for i, r in enumerate(everything["rows"]) if r["alloc_us"] is None), PAGE_SIZE)
    rows = everything["rows"][page * PAGE_SIZE:][:PAGE_SIZE]
    memory.open(f"{SEL}&events_page={page + 1}").wait_drawn()
    cells = memory.rows("events-table").nth(unseen).locator(".mem-absent")
    expect(cells.first).to_have_text("—")
    assert "did not see this allocation" in cells.first.get_attribute("title")
    href = memory.rows("events-table").nth(unseen).locator(css_testid("trace-link")).get_attribute("href")
    window = {k: float(v[0]) for k, v in parse_qs(urlparse(href).query).items() if k in ("start_us", "end_us")}
    assert window["start_us"] < rows[unseen]["free_us"] < window["end_us"]
    # Never freed: later in the trace (sort by release time ascending puts them last, nulls last).
    table.get_by_role("button", name=re.compile(r"^Release\s+Time")).click()  # numeric: descending first
    table.get_by_role("button", name=re.compile(r"^Release\s+Time")).click()
    assert "events_sort=free_us%3Aasc" in memory.page.url or "events_sort=free_us:asc" in memory.page.url
    table.locator(css_testid("pager-last")).click()
    last = memory.rows("events-table").last.locator("td")
    expect(last.nth(3)).to_have_text("—")
    assert "Never freed" in last.nth(3).locator(".mem-absent").get_attribute("title")
    assert "Never freed" in last.nth(4).locator(".mem-absent").get_attribute("title")
    expect(memory.page).to_have_url(re.compile(r"events_page=\d+"))
    memory.part("events-search").fill("cudnn_convolution")
    expect(memory.page).to_have_url(re.compile(r"events_q=cudnn_convolution"))
    matching = [r for r in everything["rows"] if r["operator"] and "cudnn_convolution" in r["operator"]]
    expect(memory.part("events-count")).to_have_text(
        f"{len(matching):,} of {everything['total']:,} allocations match “cudnn_convolution”")
    times = memory.rows("events-table").locator("td:nth-child(4)").all_inner_texts()
    values = [float(t.split()[0]) * (1000 if t.endswith(" s") else 1) for t in times if t != "—"]
    assert values == sorted(values)
    assert memory.page.errors == []


def test_memory_stats_link_to_the_operator_view_and_sort(memory, api):
    memory.open(SEL).wait_drawn()
    rows = api(f"/api/memory/stats?{SEL}")["rows"]
    first = memory.rows("stats-table").first
    expect(first.locator("td").first).to_have_text(rows[0]["name"])
    link = first.locator(css_testid("op-link"))
    assert link.get_attribute("href") == f"/operators?{SEL}&q={quote(rows[0]['name'], safe='')}"
    expect(memory.part("stats-table").locator('th[aria-sort="descending"]')).to_have_text(re.compile("Self Size Increase"))
    memory.part("stats-table").get_by_role("button", name=re.compile(r"^Calls")).click()
    top = max(rows, key=lambda r: r["calls"])
    expect(memory.rows("stats-table").first.locator("td").nth(1)).to_have_text(f"{top['calls']:,}")
    assert "stats_sort=calls" in memory.page.url
    memory.part("stats-search").fill("backward")
    expect(memory.part("stats-count")).to_have_text(re.compile(r"of \d+ operators match “backward”"))
    names = memory.rows("stats-table").locator("td:first-child").all_inner_texts()
    assert names and all("backward" in n.lower() for n in names)
    assert memory.page.errors == []


@pytest.mark.parametrize("run", each(LEGACY, V100))
def test_memory_legacy_trace_shows_reasons_and_stats(memory, api, shots, run):
    """PyTorch before 1.10 recorded neither totals nor addresses."""
    legacy_sel = run.sel()
    memory.open(legacy_sel).wait_drawn()
    curve = api(f"/api/memory/curve?{legacy_sel}")
    events = api(f"/api/memory/events?{legacy_sel}")
    stats = api(f"/api/memory/stats?{legacy_sel}")
    assert curve["reason"] and events["reason"]
    expect(memory.part("curve-reason")).to_contain_text(curve["reason"])
    expect(memory.part("events-reason")).to_contain_text(events["reason"])
    expect(memory.part("memory-curve").locator(".main-svg")).to_have_count(0)
    expect(memory.part("stats-count")).to_have_text(count_text(len(stats["rows"]), "operator"))
    expect(memory.rows("stats-table")).to_have_count(min(PAGE_SIZE, len(stats["rows"])))
    expect(memory.part("events-search")).to_be_disabled()
    # A step still narrows the statistics.
    step = api(f"/api/memory/devices?{legacy_sel}")["steps"][0]
    memory.part("step-select").select_option(step["step"])
    expect(memory.page).to_have_url(re.compile(r"start_us="))
    memory.wait_drawn()
    start, end = range_of(memory)
    ranged = api(f"/api/memory/stats?{legacy_sel}&start_us={start}&end_us={end}")["rows"]
    first = memory.rows("stats-table").first.locator("td")
    expect(first.nth(1)).to_have_text(f"{ranged[0]['calls']:,}")
    memory.screenshot(shots, f"memory_legacy_{run.name}", full=True)
    assert memory.page.errors == []


def test_memory_without_records_says_so(memory, server):
    empty = {"devices": [], "default": None, "start_us": None, "end_us": None, "steps": [],
             "warnings": ["This trace has no memory records: profile with profile_memory=True."]}
    memory.page.route("**/api/memory/devices?*", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps(empty)))
    memory.open(SEL)
    expect(memory.part("no-memory")).to_be_visible()
    expect(memory.part("no-memory")).to_contain_text("profile_memory=True")
    expect(memory.part("curve-card")).to_be_hidden()
    expect(memory.part("controls")).to_be_hidden()
    assert memory.page.errors == []


def test_memory_unknown_device_and_foreign_range_fall_back(memory):
    memory.open(f"{SEL}&device=GPU7&start_us=1&end_us=2").wait_drawn()
    expect(memory.part("device-select")).to_have_value("GPU0")
    expect(memory.part("warnings")).to_contain_text("no memory records for device GPU7")
    expect(memory.part("range-text")).to_have_text(re.compile(r"^Whole trace"))
    query = memory.query()
    assert "device" not in query and "start_us" not in query
    assert memory.page.errors == []


def test_memory_curve_helpers(blank_page):
    out = module_runner(blank_page, {"m": "lib/memcurve.js"})("""(() => {
        const extent = { start_us: 1000, end_us: 5000 };
        const curve = { t_us: [2000, 3000], allocated_bytes: [10, 30], reserved_bytes: [40, 40],
                        at_start: { t_us: 1500, allocated_bytes: 5, reserved_bytes: 40 } };
        return {
            ticks: m.byteTicks(3.2 * 1024 ** 3),
            small: m.byteTicks(600 * 1024 ** 2).ticktext,
            bytes: m.byteTicks(9).ticktext,
            parse: [m.parseRange("2000", "3000", extent), m.parseRange("0", "9000", extent),
                    m.parseRange("7000", "8000", extent), m.parseRange("x", "3000", extent),
                    m.parseRange("500", "2000", extent)],
            relayout: [m.rangeFromRelayout({ "xaxis.range[0]": 1, "xaxis.range[1]": 2.5 }, 1000),
                       m.rangeFromRelayout({ "xaxis.autorange": true }, 1000),
                       m.rangeFromRelayout({ autosize: true }, 1000)],
            query: m.rangeQuery({ start_us: 1234.5, end_us: 2000 }),
            points: m.curvePoints(curve, { start_us: 1500, end_us: 4000 }),
            change: m.allocatedChange(curve, { start_us: 1500, end_us: 4000 }),
            label: m.rangeLabel({ start_us: 2000, end_us: 3500 }, extent, 1000),
        };
    })()""")
    gib = 1024 ** 3
    assert out["ticks"]["ticktext"] == ["0", "1 GiB", "2 GiB", "3 GiB"]
    assert out["ticks"]["tickvals"] == [0, gib, 2 * gib, 3 * gib]
    assert out["small"] == ["0", "200 MiB", "400 MiB", "600 MiB"]
    assert out["bytes"] == ["0", "2 B", "4 B", "6 B", "8 B"]
    assert out["parse"] == [{"start_us": 2000, "end_us": 3000}, None, None, None, {"start_us": 1000, "end_us": 2000}]
    assert out["relayout"] == [{"start_us": 2000, "end_us": 3500}, "reset", None]
    assert out["query"] == {"start_us": "1234.5", "end_us": "2000"}
    # The value in effect at the start comes first; the last one is held to the end.
    assert out["points"] == {"t_us": [1500, 2000, 3000, 4000], "allocated": [5, 10, 30, 30], "reserved": [40, 40, 40, 40]}
    assert out["change"] == {"from": 5, "to": 30, "change": 25}
    assert out["label"] == "Selected 1.000 ms – 2.500 ms (1.50 ms of 4.00 ms)"


def test_memory_table_helpers(blank_page):
    out = module_runner(blank_page, {"t": "lib/memtables.js"})("""(() => {
        const sel = { run: "r", worker: "w", span: "1" };
        const unseen = { operator: null, size_bytes: 8, alloc_us: null, free_us: 2000, lifetime_us: null, addr: 255,
                         op_id: null, caller_id: null };
        const open = { operator: "aten::mm", size_bytes: 8, alloc_us: 1000, free_us: null, lifetime_us: null, addr: 16,
                       op_id: 7, caller_id: 6 };
        const orphan = { ...open, operator: null, op_id: null, free_us: 1500, lifetime_us: 500 };
        const keys = ["operator", "alloc_us", "free_us", "lifetime_us"];
        return {
            unseen: keys.map((k) => t.missingReason(unseen, k) === t.WHY.unseenAlloc),
            open: keys.map((k) => t.missingReason(open, k)),
            orphan: t.missingReason(orphan, "operator") === t.WHY.noOperator,
            hrefs: [t.eventTraceHref(sel, open), t.eventTraceHref(sel, unseen), t.eventTraceHref(sel, orphan)],
            addr: [t.formatAddress(255), t.formatAddress(null)],
            counts: [t.eventsCountText(10, 10, 10, ""), t.eventsCountText(1, 20000, 25000, ""),
                     t.eventsCountText(3, 10, 10, " mm "), t.eventsCountText(1, 1, 1, "")],
        };
    })()""")
    assert out["unseen"] == [True, True, False, True]
    assert out["open"][:2] == [None, None] and out["open"][2].startswith("Never freed") and out["open"][3].startswith("Never freed")
    assert out["orphan"] is True
    assert out["hrefs"] == ["/trace?run=r&worker=w&span=1&select=7",
                            "/trace?run=r&worker=w&span=1&end_us=2500&start_us=1500",
                            "/trace?run=r&worker=w&span=1&end_us=1500&start_us=500"]
    assert out["addr"] == ["0xff", "n/a"]
    assert out["counts"] == ["10 allocations", "Showing the first 20,000 of 25,000 allocations",
                             "3 of 10 allocations match “mm”", "1 allocation"]
