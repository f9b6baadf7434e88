"""The Memory Snapshot page in Chromium: summary cards agree with the API, the active memory
timeline draws its bands and peak, a click picks the history point of the allocator state (kept in
the URL), the segment table agrees with the snapshot's totals, allocation sites open to their
frames, a run of snapshots only opens on this view, and a refused pickle shows the server's message."""

from __future__ import annotations

import re
from urllib.parse import quote, urlparse

import pytest
from playwright.sync_api import Locator, Page, expect

from browser_pages import ShellPage, css_testid, module_runner
from formats import fmt_bytes, fmt_count
from runs import REFUSED, REFUSED_FILE, RESNET, SNAPSHOT, SNAPSHOT_ONLY, TWO_SPANS

pytestmark = pytest.mark.browser

TRACE_RUN = RESNET.name  # traces and the snapshot side by side
ONLY_RUN = SNAPSHOT_ONLY.name  # the snapshot alone
REFUSED_RUN = REFUSED.name  # a pickle naming os.system
FILE = SNAPSHOT
SEGMENT_PAGE = 100


class SnapshotPage(ShellPage):
    view = "snapshot"

    def wait_drawn(self) -> "SnapshotPage":
        """Waits until the timeline holds Plotly SVG, the segment and site tables are there and nothing is busy."""
        self.wait_mounted()
        expect(self.root()).to_be_visible()
        expect(self.part("snap-timeline").locator(".main-svg").first).to_be_attached()
        expect(self.part("segment-table").locator("table, p").first).to_be_attached()
        expect(self.part("sites-table").locator("table, p").first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        expect(self.part("snap-state")).not_to_have_attribute("aria-busy", "true")
        return self

    def card(self, where: str, key: str) -> Locator:
        return self.part(where).locator(css_testid(f"card-{key}")).locator(css_testid("card-value"))

    def segment_rows(self) -> Locator:
        return self.part("segment-table").locator("tbody tr")

    def site_rows(self) -> Locator:
        return self.part("sites-table").locator("tbody tr:not(.snap-site-detail)")

    def column(self, table: str, label: str) -> list[str]:
        headers = [" ".join(h.split()) for h in self.part(table).locator("thead th").all_inner_texts()]
        index = headers.index(label) + 1
        return self.part(table).locator(f"tbody tr:not(.snap-site-detail) td:nth-child({index})").all_inner_texts()

    def plot_box(self) -> dict:
        return self.part("snap-timeline").locator(".nsewdrag").bounding_box()


@pytest.fixture
def snap(page: Page, server: str) -> SnapshotPage:
    page.set_viewport_size({"width": 1280, "height": 900})
    return SnapshotPage(page, server)


def api_get(api, path: str, run: str = TRACE_RUN, **params) -> dict:
    query = "&".join(f"{k}={quote(str(v))}" for k, v in {"run": run, **params}.items())
    return api(f"{path}?{query}")


# ---------------------------------------------------------------- summary and timeline


def test_snapshot_summary_cards_match_the_api(snap, api):
    snap.open(f"run={TRACE_RUN}&file={FILE}").wait_drawn()
    summary = api_get(api, "/api/snapshot")
    assert summary["devices"] == [0]
    expect(snap.card("snap-summary", "reserved")).to_have_text(fmt_bytes(summary["reserved_bytes"]))
    expect(snap.card("snap-summary", "allocated")).to_have_text(fmt_bytes(summary["allocated_bytes"]))
    expect(snap.card("snap-summary", "inactive")).to_have_text(fmt_bytes(summary["inactive_bytes"]))
    ratio = f"{summary['fragmentation_ratio'] * 100:.1f} % of reserved"
    expect(snap.part("snap-summary").locator(css_testid("card-inactive"))).to_contain_text(ratio)
    expect(snap.card("snap-summary", "pending")).to_have_text(fmt_bytes(summary["pending_free_bytes"]))
    expect(snap.card("snap-summary", "segments")).to_have_text(fmt_count(summary["segments"]))
    expect(snap.card("snap-summary", "history")).to_have_text(fmt_count(summary["trace_entries"]))
    expect(snap.card("snap-summary", "ooms")).to_have_text(str(summary["ooms"]["count"]))
    # No OOM in this snapshot: the card is not red and no OOM box shows.
    assert summary["ooms"]["count"] == 0
    assert "snap-stat-alert" not in (snap.part("snap-summary").locator(css_testid("card-ooms")).get_attribute("class") or "")
    expect(snap.part("snap-ooms")).to_be_hidden()
    # Pickers: the file (one: nothing to choose) and the device.
    expect(snap.part("snap-file")).to_have_value(FILE)
    expect(snap.part("snap-device")).to_have_value("0")
    expect(snap.part("snap-error")).to_be_hidden()
    # Shell: a run with traces keeps its worker and span selects.
    assert snap.selection() == {"run": TRACE_RUN, "worker": RESNET.worker, "span": "1", "view": "snapshot"}
    expect(snap.page.locator(css_testid("no-workers-note"))).to_be_hidden()
    expect(snap.about().locator("summary")).to_have_text("How these numbers are computed")
    assert snap.page.errors == []


def test_snapshot_timeline_draws_bands_other_total_and_peak(snap, api, shots):
    snap.open(f"run={TRACE_RUN}").wait_drawn()
    timeline = api_get(api, "/api/snapshot/timeline", max_allocations=150, max_points=1500)
    chart = snap.part("snap-timeline")
    # One area per band, the summed rest, the total line.
    expected = len(timeline["bands"]) + (1 if any(timeline["other_bytes"]) else 0) + 1
    assert len(timeline["bands"]) == 150
    expect(chart.locator(".scatterlayer .trace")).to_have_count(expected)
    assert chart.get_attribute("data-traces") == str(expected)
    draw_ms = int(chart.get_attribute("data-draw-ms"))
    print(f"timeline: {expected} traces, {len(timeline['x'])} points, drawn in {draw_ms} ms")
    peak = timeline["peak"]
    expect(chart.locator(".annotation-text").filter(has_text="Peak")).to_have_text(f"Peak {fmt_bytes(peak['bytes'])}")
    expect(snap.part("timeline-meta")).to_contain_text(f"{fmt_count(timeline['allocations'])} allocations")
    # The y axis reaches the peak (in GB here).
    assert "GiB" in chart.locator(".ytitle").text_content()
    # Hovering inside the bottom band (the largest early allocation) shows its size and stack.
    box = snap.plot_box()
    band = min(timeline["bands"], key=lambda b: b["start_index"])
    x_frac = (band["start_index"] + 1 + (band["end_index"] or timeline["entries"] - 1)) / 2 / timeline["entries"]
    snap.page.mouse.move(box["x"] + box["width"] * x_frac, box["y"] + box["height"] - 3)
    hover = chart.locator(".hoverlayer")
    expect(hover).to_contain_text("allocated at entry")
    expect(hover).to_contain_text("site:")
    snap.screenshot(shots, "snapshot_timeline")
    assert snap.page.errors == []


# ---------------------------------------------------------------- allocator state


def test_snapshot_click_on_timeline_picks_the_state_point(snap, api, shots):
    snap.open(f"run={TRACE_RUN}").wait_drawn()
    expect(snap.part("state-meta")).to_have_text("Final state, as stored in the snapshot")
    assert snap.part("snap-state").get_attribute("data-at") == "final"
    assert "at" not in snap.query()
    box = snap.plot_box()
    snap.page.mouse.click(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5)
    expect(snap.part("state-meta")).to_contain_text("After entry")
    expect(snap.part("snap-state")).not_to_have_attribute("aria-busy", "true")
    at = int(snap.query()["at"])
    entries = api_get(api, "/api/snapshot")["trace_entries"]
    assert 0.3 * entries < at < 0.6 * entries
    assert snap.part("snap-state").get_attribute("data-at") == str(at)
    state = api_get(api, "/api/snapshot/state", at=at)
    expect(snap.part("state-meta")).to_contain_text(f"After entry {fmt_count(at)} of {fmt_count(entries)}")
    expect(snap.card("state-totals", "allocated")).to_have_text(fmt_bytes(state["totals"]["allocated_bytes"]))
    expect(snap.card("state-totals", "reserved")).to_have_text(fmt_bytes(state["totals"]["reserved_bytes"]))
    expect(snap.card("state-totals", "inactive")).to_have_text(fmt_bytes(state["totals"]["inactive_bytes"]))
    # Mid-history blocks were sized from the history: the view says the state is approximate.
    assert state["approximate"] is True
    expect(snap.part("state-approximate")).to_be_visible()
    expect(snap.part("state-approximate")).to_contain_text("Approximate")
    # The picked point is marked on the timeline.
    expect(snap.part("snap-timeline").locator(".annotation-text").filter(has_text="state: after entry")).to_have_text(
        f"state: after entry {fmt_count(at)}")
    snap.page.mouse.move(5, 5)  # no hover label over the chart in the picture
    snap.screenshot(shots, "snapshot_state", full=True)
    # A deep link restores the point.
    snap.page.reload()
    snap.wait_drawn()
    expect(snap.part("state-meta")).to_contain_text(f"After entry {fmt_count(at)}")
    expect(snap.card("state-totals", "allocated")).to_have_text(fmt_bytes(state["totals"]["allocated_bytes"]))
    # Back to the final state.
    snap.part("state-final").click()
    expect(snap.part("state-meta")).to_have_text("Final state, as stored in the snapshot")
    expect(snap.part("state-final")).to_be_hidden()
    assert "at" not in snap.query()
    assert snap.page.errors == []


def test_snapshot_click_above_the_stack_picks_a_point_too(snap):
    """Plotly reports clicks over data only; empty plot area above the stack picks its x as well."""
    snap.open(f"run={ONLY_RUN}").wait_drawn()
    box = snap.plot_box()
    snap.page.mouse.click(box["x"] + box["width"] * 0.25, box["y"] + 6)
    expect(snap.part("state-meta")).to_contain_text("After entry")
    at = int(snap.query()["at"])
    entries = int(snap.card("snap-summary", "history").inner_text().replace(",", ""))
    assert 0.15 * entries < at < 0.35 * entries
    # A zoom drag is not a click.
    snap.page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 6)
    snap.page.mouse.down()
    snap.page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + 60, steps=5)
    snap.page.mouse.up()
    snap.wait_idle()
    assert int(snap.query()["at"]) == at
    assert snap.page.errors == []


def test_snapshot_oom_events_are_highlighted(snap, server):
    """The snapshot has no OOM: the summary is given one, as PyTorch records it (an `oom` entry)."""
    page = snap.page
    summary = page.request.get(f"{server}/api/snapshot?run={ONLY_RUN}").json()
    summary["ooms"] = {"count": 1, "events": [{"device": 0, "index": 2000, "time_us": None,
                                               "size_bytes": 8 << 30, "device_free_bytes": 1 << 30}]}
    page.route("**/api/snapshot?*", lambda route: route.fulfill(json=summary))
    snap.open(f"run={ONLY_RUN}").wait_drawn()
    card = snap.part("snap-summary").locator(css_testid("card-ooms"))
    expect(card).to_have_class(re.compile("snap-stat-alert"))
    expect(card.locator(css_testid("card-value"))).to_have_text("1")
    assert card.evaluate("n => getComputedStyle(n).backgroundColor") == "rgb(252, 232, 230)"
    box = snap.part("snap-ooms")
    expect(box).to_be_visible()
    expect(box.locator(css_testid("oom-event"))).to_contain_text("Entry 2,000: asked for 8.00 GiB with 1.00 GiB free")
    expect(snap.part("snap-timeline").locator(".annotation-text").filter(has_text="OOM")).to_have_count(1)
    box.locator(css_testid("oom-show")).click()
    expect(snap.part("state-meta")).to_contain_text("After entry 2,000")
    assert snap.query()["at"] == "2000"
    assert page.errors == []


def test_snapshot_without_history_says_why_there_is_no_timeline(snap, server):
    page = snap.page
    summary = page.request.get(f"{server}/api/snapshot?run={ONLY_RUN}").json()
    summary["history"] = False
    summary["trace_entries"] = 0
    for d in summary["per_device"]:
        d["trace_entries"] = 0
    page.route("**/api/snapshot?*", lambda route: route.fulfill(json=summary))
    snap.open(f"run={ONLY_RUN}")
    expect(snap.part("snap-timeline")).to_contain_text("_record_memory_history")
    expect(snap.part("segment-table").locator("table")).to_be_visible()
    expect(snap.part("snap-summary").locator(css_testid("card-history"))).to_contain_text("none recorded")
    assert page.errors == []


def test_snapshot_segments_agree_with_the_summary_at_the_final_state(snap, api):
    snap.open(f"run={TRACE_RUN}").wait_drawn()
    summary = api_get(api, "/api/snapshot")
    state = api_get(api, "/api/snapshot/state")
    segments = state["segments"]
    # The replayed final state is the snapshot's own segments: the totals agree.
    assert state["totals"]["reserved_bytes"] == summary["reserved_bytes"] == sum(s["total_bytes"] for s in segments)
    assert state["totals"]["allocated_bytes"] == summary["allocated_bytes"]
    assert state["totals"]["inactive_bytes"] == summary["inactive_bytes"]
    expect(snap.card("state-totals", "reserved")).to_have_text(fmt_bytes(summary["reserved_bytes"]))
    expect(snap.card("state-totals", "allocated")).to_have_text(fmt_bytes(summary["allocated_bytes"]))
    expect(snap.card("state-totals", "inactive")).to_have_text(fmt_bytes(summary["inactive_bytes"]))
    expect(snap.card("state-totals", "segments")).to_have_text(fmt_count(summary["segments"]))
    expect(snap.part("state-approximate")).to_be_hidden()
    # One row per segment, largest first (the first page of them); addresses in hex; every strip drawn.
    shown = min(SEGMENT_PAGE, len(segments))
    expect(snap.segment_rows()).to_have_count(shown)
    by_size = sorted(segments, key=lambda s: -s["total_bytes"])
    assert snap.column("segment-table", "Size") == [fmt_bytes(s["total_bytes"]) for s in by_size[:shown]]
    assert set(snap.column("segment-table", "Address")) == {hex(s["address"]) for s in by_size[:shown]}
    assert snap.column("segment-table", "Frag.")[0] == f"{by_size[0]['fragmentation_ratio'] * 100:.1f} %"
    strips = snap.part("segment-table").locator(css_testid("segment-strip"))
    expect(strips).to_have_count(shown)
    for i in range(shown):
        assert strips.nth(i).locator(".snap-block").count() >= 1
    # A segment holding allocations draws them in the allocated colour, in proportion.
    used = next(s for s in by_size[:shown] if 0 < s["allocated_bytes"] < s["total_bytes"])
    row = snap.segment_rows().nth(by_size.index(used))
    assert row.locator(".snap-b-active_allocated").count() >= 1
    assert row.locator(".snap-b-inactive").count() >= 1
    # Sorting by address keeps the order in the URL.
    snap.part("segment-table").get_by_role("button", name=re.compile(r"^Address")).click()
    assert snap.query()["seg_sort"] == "address:asc"
    by_address = sorted(segments, key=lambda s: s["address"])
    assert snap.column("segment-table", "Address") == [hex(s["address"]) for s in by_address[:shown]]
    # The table scrolls inside its box instead of growing the page without end.
    wrap = snap.part("segment-table").locator(".table-wrap")
    assert wrap.evaluate("n => getComputedStyle(n).maxHeight") == "560px"
    assert snap.page.errors == []


# ---------------------------------------------------------------- sites


def test_snapshot_sites_table_rows_open_to_their_frames(snap, api):
    snap.open(f"run={TRACE_RUN}").wait_drawn()
    sites = api_get(api, "/api/snapshot/sites", n=50)["rows"]
    expect(snap.site_rows()).to_have_count(len(sites))
    assert snap.column("sites-table", "Calls") == [fmt_count(r["calls"]) for r in sites]
    assert snap.column("sites-table", "Total") == [fmt_bytes(r["total_bytes"]) for r in sites]
    assert snap.column("sites-table", "At peak") == [fmt_bytes(r["peak_bytes"]) for r in sites]
    assert snap.column("sites-table", "Live") == [fmt_bytes(r["live_bytes"]) for r in sites]
    # A site with Python frames: a click on its row lists them, innermost first.
    i = next(k for k, r in enumerate(sites) if r["frames"])
    row = snap.site_rows().nth(i)
    assert row.locator(css_testid("site-toggle")).get_attribute("title") == sites[i]["site"]
    row.locator("td").nth(2).click()
    detail = snap.part("sites-table").locator(css_testid("site-detail"))
    expect(detail).to_have_count(1)
    frames = detail.locator(css_testid("frame"))
    expect(frames).to_have_count(len(sites[i]["frames"]))
    first = sites[i]["frames"][0]
    expect(frames.first).to_contain_text(f"{first['file']}({first['line']}): {first['function']}")
    expect(row.locator(css_testid("site-toggle"))).to_have_attribute("aria-expanded", "true")
    # Again: closed.
    row.locator(css_testid("site-toggle")).click()
    expect(detail).to_have_count(0)
    # A site inside an operator without Python frames says so.
    j = next(k for k, r in enumerate(sites) if not r["frames"])
    snap.site_rows().nth(j).locator(css_testid("site-toggle")).click()
    expect(snap.part("sites-table").locator(css_testid("site-frames"))).to_contain_text("No Python frames")
    # Ranking by another measure asks the API again.
    snap.part("sites-by").select_option("live_bytes")
    live = api_get(api, "/api/snapshot/sites", n=50, by="live_bytes")["rows"]
    expect(snap.site_rows().first.locator(css_testid("site-toggle"))).to_have_attribute("title", live[0]["site"])
    assert snap.query()["sites_by"] == "live_bytes"
    assert snap.page.errors == []


# ---------------------------------------------------------------- runs of snapshots only, errors, links


def test_snapshot_only_run_opens_on_this_view_without_worker_or_span(snap, api, shots):
    snap.page.goto(f"{snap.base}/?run={ONLY_RUN}")
    expect(snap.page).to_have_url(re.compile(r"/snapshot\?"))
    snap.wait_drawn()
    assert urlparse(snap.page.url).path == "/snapshot"
    assert snap.query() == {"run": ONLY_RUN, "file": FILE}
    expect(snap.select("worker")).to_be_hidden()
    expect(snap.select("span")).to_be_hidden()
    expect(snap.page.locator(css_testid("no-workers-note"))).to_be_visible()
    expect(snap.select("view")).to_have_value("snapshot")
    assert snap.select("view").locator("option").all_inner_texts() == ["Memory Snapshot"]
    expect(snap.error()).to_be_hidden()
    summary = api_get(api, "/api/snapshot", run=ONLY_RUN)
    expect(snap.card("snap-summary", "reserved")).to_have_text(fmt_bytes(summary["reserved_bytes"]))
    snap.screenshot(shots, "snapshot_only")
    assert snap.page.errors == []


def test_run_select_moves_a_trace_view_to_a_snapshot_only_run(snap):
    snap.page.goto(f"{snap.base}/overview?run={TRACE_RUN}")
    expect(snap.page.locator('[data-view="overview"]')).to_be_visible()
    expect(snap.select("worker")).to_be_visible()
    snap.choose("run", ONLY_RUN)
    expect(snap.page).to_have_url(re.compile(r"/snapshot\?"))
    snap.wait_drawn()
    assert snap.query()["run"] == ONLY_RUN
    # And back to a run with traces: its worker and span return.
    snap.choose("run", TRACE_RUN)
    snap.wait_drawn()
    expect(snap.select("worker")).to_be_visible()
    expect(snap.select("worker")).to_have_value(RESNET.worker)
    expect(snap.page.locator(css_testid("no-workers-note"))).to_be_hidden()
    assert snap.page.errors == []


def test_view_select_link_to_this_view_carries_run_and_file(snap):
    snap.page.goto(f"{snap.base}/kernels?{TWO_SPANS.sel('2')}")
    expect(snap.page.locator('[data-view="kernels"]')).to_be_visible()
    snap.choose("view", "snapshot")
    expect(snap.page).to_have_url(re.compile(r"/snapshot\?"))
    snap.wait_drawn()
    assert snap.query() == {"run": TWO_SPANS.name, "worker": TWO_SPANS.worker, "span": "2", "file": FILE}
    assert snap.page.errors == []


def test_refused_pickle_shows_the_server_message_and_other_runs_work(snap, server, shots):
    response = snap.page.request.get(f"{server}/api/snapshot?run={REFUSED_RUN}")
    assert response.status == 422
    error = response.json()["error"]
    assert error["code"] == "snapshot_error"
    snap.open(f"run={REFUSED_RUN}")
    box = snap.part("snap-error")
    expect(box).to_be_visible()
    expect(box).to_contain_text("This snapshot could not be read")
    expect(snap.part("snap-error-message")).to_have_text(error["message"])
    assert "refused" in error["message"]
    expect(snap.part("snap-body")).to_be_hidden()
    expect(snap.part("snap-file")).to_have_value(REFUSED_FILE)
    expect(snap.part("snap-device")).to_be_hidden()
    expect(snap.error()).to_be_hidden()  # the view explains itself; the shell's box stays empty
    snap.screenshot(shots, "snapshot_error")
    # Only the failed request itself is logged (by Chromium); no script error.
    assert all("422" in e for e in snap.page.errors), snap.page.errors
    # The other runs keep working.
    snap.choose("run", ONLY_RUN)
    snap.wait_drawn()
    expect(snap.part("snap-error")).to_be_hidden()
    expect(snap.part("snap-body")).to_be_visible()


def test_unknown_snapshot_file_names_the_files_the_run_has(snap):
    snap.open(f"run={TRACE_RUN}&file=nope.pickle")
    expect(snap.part("snap-error-message")).to_contain_text("nope.pickle")
    expect(snap.part("snap-error-message")).to_contain_text(FILE)
    expect(snap.part("snap-file")).to_have_value("nope.pickle")
    # Picking the real file opens it.
    snap.part("snap-file").select_option(FILE)
    snap.wait_drawn()
    assert snap.query()["file"] == FILE


# ---------------------------------------------------------------- shaping helpers


MEMSNAP = {"m": "lib/memsnap.js"}


@pytest.fixture
def memsnap(blank_page):
    """Calls `expression` with lib/memsnap.js imported as `m`."""
    return module_runner(blank_page, MEMSNAP)


def test_stacked_bands_sit_on_earlier_live_bands(memsnap):
    """x = -1..3; band A (size 10) live at positions 1..3, band B (size 5) at 2 sits on A; other on top.
    Value k holds from x[k] to x[k+1]; outlines run along the top, back along the bottom, closed."""
    areas = memsnap("""m.stackBands({x: [-1, 0, 1, 2, 3], bands: [
        {first: 1, last: 3, size_bytes: 10}, {first: 2, last: 2, size_bytes: 5}],
        other_bytes: [0, 1, 1, 1, 0]}, 1)""")
    a, b = areas["bands"]
    assert (a["xs"], a["ys"]) == ([0, 3, 3, 0, 0], [10, 10, 0, 0, 10])
    assert (b["xs"], b["ys"]) == ([1, 2, 2, 1, 1], [15, 15, 10, 10, 15])
    # other: tops 11, 16, 11 over bottoms 10, 15, 10
    assert areas["other"]["xs"] == [0, 1, 1, 2, 2, 3, 3, 2, 2, 1, 1, 0, 0]
    assert areas["other"]["ys"] == [11, 11, 16, 16, 11, 11, 10, 10, 15, 15, 10, 10, 11]


def test_stacked_bands_reach_the_peak_with_few_points(page, server):
    page.goto(f"{server}/static/css/profboard.css")  # the server's origin, to read its API
    result = module_runner(page, MEMSNAP, arg="run")("""(async () => {
        const tl = await (await fetch(`/api/snapshot/timeline?run=${run}`)).json();
        const s = m.stackBands(tl, 1);
        const areas = [...s.bands, ...(s.other ? [s.other] : [])];
        const points = areas.reduce((n, a) => n + a.xs.length, 0);
        const top = Math.max(...areas.map((a) => Math.max(...a.ys)));
        return {points, full: (tl.bands.length + 1) * tl.x.length, top, peak: tl.peak.bytes};
    })()""", ONLY_RUN)
    # The stack's highest point is the peak; each band is drawn over its live range only, so far
    # fewer points than full-length stacked curves.
    assert result["top"] == result["peak"]
    assert result["points"] * 3 < result["full"]


def test_block_pieces_merge_slivers_and_keep_offsets(memsnap):
    pieces = memsnap("""m.blockPieces({address: 1000, total_bytes: 1000, allocated_bytes: 0, pending_free_bytes: 0,
        inactive_bytes: 0, blocks: [
          {address: 1000, size_bytes: 500, state: "active_allocated"},
          {address: 1500, size_bytes: 1, state: "active_allocated"},
          {address: 1501, size_bytes: 1, state: "inactive"},
          {address: 1502, size_bytes: 1, state: "active_allocated"},
          {address: 1503, size_bytes: 497, state: "inactive"}]}, 0.01)""")
    # 500 | three 1-byte slivers as one piece (mostly allocated) | 497
    assert [(round(p["left"], 9), round(p["width"], 9), p["state"], p["count"]) for p in pieces] == [
        (0, 0.5, "active_allocated", 1), (0.5, 0.003, "active_allocated", 3), (0.503, 0.497, "inactive", 1)]
    summary = memsnap("""m.blockPieces({address: 0, total_bytes: 100, allocated_bytes: 60, pending_free_bytes: 0,
        inactive_bytes: 40, blocks: null})""")
    assert [(p["state"], p["width"]) for p in summary] == [("active_allocated", 0.6), ("inactive", 0.4)]


@pytest.mark.parametrize("expression, expected", [
    ("m.parseAt('12', 100)", 12), ("m.parseAt('-1', 100)", -1), ("m.parseAt('100', 100)", None),
    ("m.parseAt('x', 100)", None), ("m.parseAt(undefined, 100)", None),
    ("m.indexAt(41.6, 100)", 42), ("m.indexAt(-7, 100)", -1), ("m.indexAt(500, 100)", 99), ("m.indexAt(3, 0)", None),
    ("m.parseDevice('1', [0, 1])", 1), ("m.parseDevice('5', [0, 1])", 0), ("m.parseDevice(undefined, [])", 0),
    ("m.hexAddress(140071130890240)", hex(140071130890240)), ("m.hexAddress(null)", "n/a"),
    ("m.shortPath('/opt/x/lib/python3.12/site-packages/torch/nn/modules/conv.py')", "torch/nn/modules/conv.py"),
    ("m.bytesAxis(1.6e9).unit", "GiB"), ("m.bytesAxis(5e5).unit", "KiB"),
    ("m.plotText('<module> & co')", "&lt;module&gt; &amp; co"),
], ids=lambda v: str(v))
def test_memsnap_helpers(memsnap, expression, expected):
    assert memsnap(expression) == expected
