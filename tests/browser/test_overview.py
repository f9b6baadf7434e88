"""The Overview page in Chromium: charts render, the selection lives in the URL, errors show."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from browser_pages import OverviewPage, css_testid
from formats import fmt_bytes, fmt_ratio, fmt_us
from runs import BROKEN, LEGACY, RESNET, STRAGGLER, TWO_SPANS, Run

pytestmark = pytest.mark.browser


def steps_of(api, run: Run, span: str = "1") -> list[str]:
    return [s["step"] for s in api(f"/api/overview?{run.sel(span)}")["steps"]]


def totals_of(api, run: Run, span: str = "1") -> list[str]:
    """Each step's total time, as the step table shows it."""
    return [fmt_us(s["total_us"]) for s in api(f"/api/overview?{run.sel(span)}")["steps"]]


def gpu_of(api, run: Run) -> dict:
    return api(f"/api/overview?{run.sel()}")["gpus"][0]


@pytest.fixture
def overview(page, server) -> OverviewPage:
    return OverviewPage(page, server)


@pytest.fixture
def resnet(loaded_page, server) -> OverviewPage:
    """The view of resnet50_fp32 as first drawn, loaded once for the module's tests that only read it."""
    return OverviewPage(loaded_page(f"{server}/overview?run={RESNET.name}"), server).wait_drawn()


def test_overview_renders_charts_table_and_gpu_summary(resnet, api, shots):
    overview = resnet
    data = api(f"/api/overview?{RESNET.sel()}")
    gpu = data["gpus"][0]

    expect(overview.part("gpu-summary")).to_contain_text(gpu["name"])
    expect(overview.part("gpu-summary")).to_contain_text(fmt_bytes(gpu["memory_bytes"]))  # in GiB
    expect(overview.part("gpu-summary")).to_contain_text(gpu["compute_capability"])
    expect(overview.part("average-step-time")).to_have_text(fmt_us(data["average"]["total_us"]))
    assert overview.table_steps() == [s["step"] for s in data["steps"]]
    # One stacked bar trace per category with time, in the fixed order.
    legend = overview.part("step-chart").locator(".legendtext").all_text_contents()
    order = ["Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "CPU Exec", "Other"]
    assert legend == [c for c in order if c in legend] and "Kernel" in legend
    expect(overview.part("breakdown-pie").locator(".slice").first).to_be_attached()
    expect(overview.part("recommendations")).to_contain_text(data["recommendations"][0]["title"])
    expect(overview.about().locator("summary")).to_have_text("How these numbers are computed")
    expect(overview.part("warnings")).to_be_hidden()  # this trace has none
    modebar = overview.part("step-chart").locator(".modebar-btn")
    assert "Share chart..." not in [modebar.nth(i).get_attribute("data-title") for i in range(modebar.count())]
    assert overview.selection() == {"run": RESNET.name, "worker": RESNET.worker, "span": "1", "view": "overview"}
    overview.screenshot(shots, "overview_resnet50", full=True)
    assert overview.page.errors == []


def _fmt_small_us(us: float) -> str:
    """formatUs, below 1 us too."""
    return "0 us" if us == 0 else f"{us:.2f} us" if us < 1 else fmt_us(us)


def test_overview_gpu_idle_by_cause_beside_the_utilization(overview, api, shots):
    """The GPU summary says why the GPU idled: a bar of the steps' time (busy, host wait, kernel
    wait, other), its legend and the per-step table of the GPU and each stream, as /api/overview has them."""
    overview.open(f"run={STRAGGLER.name}").wait_drawn()
    data = api(f"/api/overview?{STRAGGLER.sel()}")
    [gpu], [idle] = data["gpus"], data["idle"]["devices"]
    block = overview.part("gpu-idle")
    span = idle["span_us"]
    expect(block).to_contain_text(f"Idle {fmt_ratio(1 - gpu['utilization_ratio'])} of the steps' time, by cause")
    shares = {"busy_us": 1 - idle["idle_us"] / span,
              **{k: idle[k] / span for k in ("host_wait_us", "kernel_wait_us", "other_us")}}
    labels = {"busy_us": "Busy", "host_wait_us": "Host wait", "kernel_wait_us": "Kernel wait", "other_us": "Other"}
    legend = block.locator(css_testid("idle-legend") + " li")
    assert legend.all_inner_texts() == [f"{labels[k]} {fmt_ratio(v)}" for k, v in shares.items()]
    # Each cause with time is a part of the bar as wide as its share.
    bar = block.locator(css_testid("idle-bar"))
    width = bar.bounding_box()["width"]
    parts = bar.locator(".idle-part")
    assert [parts.nth(i).get_attribute("data-key") for i in range(parts.count())] == [k for k, v in shares.items() if v > 0]
    for i in range(parts.count()):
        key = parts.nth(i).get_attribute("data-key")
        assert parts.nth(i).bounding_box()["width"] == pytest.approx(shares[key] * width, abs=1.5)
    # Per step on average: the GPU as a whole, then each stream (compute and NCCL: NCCL's stream mostly waits).
    rows = block.locator(css_testid("idle-table") + " tbody tr")
    expected = [[("GPU" if r["stream"] is None else f"Stream {r['stream']}"),
                 *(_fmt_small_us(r[k]) for k in ("idle_us", "host_wait_us", "kernel_wait_us", "other_us"))]
                for r in data["idle"]["average"]]
    assert [rows.nth(i).locator("td").all_inner_texts() for i in range(rows.count())] == expected
    assert len(expected) == 3 and idle["other_us"] > 0
    # How they are computed is in the page's note, with the rest of the Overview's.
    overview.about().locator("summary").click()
    expect(overview.about()).to_contain_text("GPU idle time by cause")
    overview.screenshot(shots, "overview_gpu_idle_page", full=True)
    overview.part("gpu-summary").screenshot(path=str(shots / "overview_gpu_idle.png"), animations="disabled")
    assert overview.page.errors == []


def test_overview_without_query_picks_first_ready_run(overview, api):
    overview.page.goto(overview.base + "/")
    OverviewPage(overview.page, overview.base).wait_drawn()
    runs = api("/api/runs")["runs"]
    first_ready = next(r for r in runs if r["status"] == "ready")
    worker = first_ready["workers"][0]
    expected = {"run": first_ready["name"], "worker": worker, "span": first_ready["spans"][worker][0]}
    assert overview.query() == expected
    assert {k: v for k, v in overview.selection().items() if k != "view"} == expected
    assert overview.page.errors == []


def test_overview_run_change_updates_page_without_reload(overview, api, shots):
    overview.open(f"run={RESNET.name}").wait_drawn()
    overview.page.evaluate("window.__stillSamePage = true")
    overview.choose("run", LEGACY.name)
    gpu = gpu_of(api, LEGACY)  # a V100, where the first run has an H200
    expect(overview.part("gpu-summary")).to_contain_text(gpu["name"])
    overview.wait_drawn()
    expect(overview.part("gpu-summary")).to_contain_text(fmt_bytes(gpu["memory_bytes"]))
    assert overview.page.evaluate("window.__stillSamePage") is True
    assert overview.query() == {"run": LEGACY.name, "worker": LEGACY.worker, "span": "1"}
    assert overview.selection()["worker"] == LEGACY.worker
    overview.screenshot(shots, "overview_legacy")
    # Back returns to the previous selection (pushState), still without a reload.
    overview.page.go_back()
    expect(overview.part("gpu-summary")).to_contain_text(gpu_of(api, RESNET)["name"])
    assert overview.page.evaluate("window.__stillSamePage") is True
    assert overview.page.errors == []


def test_overview_span_change_updates_table(overview, api):
    overview.open(f"run={TWO_SPANS.name}").wait_drawn()
    span1 = totals_of(api, TWO_SPANS, "1")
    span2 = totals_of(api, TWO_SPANS, "2")
    assert span1 != span2, "the two spans' step times should differ"
    assert overview.table_totals() == span1
    overview.choose("span", "2")
    expect(overview.part("step-table").locator("tbody tr td:nth-child(2)")).to_have_text(span2)
    assert overview.table_steps() == steps_of(api, TWO_SPANS, "2")
    overview.wait_drawn()
    assert overview.query()["span"] == "2"
    assert overview.page.errors == []


def test_overview_deep_link_restores_selection(overview, api):
    overview.open(f"run={TWO_SPANS.name}&span=2").wait_drawn()
    assert overview.selection() == {"run": TWO_SPANS.name, "worker": TWO_SPANS.worker, "span": "2", "view": "overview"}
    assert overview.table_totals() == totals_of(api, TWO_SPANS, "2")
    expect(overview.part("gpu-summary")).to_contain_text(gpu_of(api, TWO_SPANS)["name"])
    assert overview.page.errors == []


def test_overview_unknown_run_shows_error(overview, shots):
    overview.open("run=no_such_run")
    expect(overview.error()).to_be_visible()
    expect(overview.error()).to_contain_text("no_such_run")
    expect(overview.error()).to_contain_text("Not found")
    expect(overview.root()).to_be_hidden()
    expect(overview.select("run")).to_have_value("no_such_run")
    # Other runs are still listed and work.
    overview.choose("run", RESNET.name)
    overview.wait_drawn()
    expect(overview.error()).to_be_hidden()
    overview.page.go_back()
    expect(overview.error()).to_contain_text("no_such_run")
    overview.screenshot(shots, "overview_unknown_run")
    # The browser logs the 404 itself; nothing else may fail.
    assert all("404" in e for e in overview.page.errors), overview.page.errors


def test_overview_unreadable_trace_shows_error_and_others_work(overview, shots):
    overview.open(f"run={RESNET.name}").wait_drawn()
    broken = overview.run_status().locator(f'{css_testid("run-error")}[data-run="{BROKEN.name}"]')
    expect(broken).to_contain_text("worker0 span 1")
    overview.choose("run", BROKEN.name)
    expect(overview.error()).to_be_visible()
    expect(overview.error()).to_contain_text("could not be read")
    expect(overview.select("run").locator("option:checked")).to_have_text(f"{BROKEN.name} (error)")
    overview.screenshot(shots, "overview_broken_run")
    overview.choose("run", LEGACY.name)
    overview.wait_drawn()
    expect(overview.error()).to_be_hidden()
    assert all("422" in e for e in overview.page.errors), overview.page.errors


def test_overview_loading_run_shows_progress_then_mounts(overview, server, api, shots):
    """While /api/runs says a run is loading, the panel shows its progress; once ready, the view mounts."""
    page = overview.page
    real = json.loads(page.request.get(f"{server}/api/runs").text())
    loading = json.loads(json.dumps(real))
    for run in loading["runs"]:
        if run["name"] == RESNET.name:
            run.update(status="loading", progress=0.4, views=[])
            for f in run["files"]:
                f.update(status="loading", progress=0.4)
    page.route("**/api/runs", lambda route: route.fulfill(json=loading))
    overview.open(f"run={RESNET.name}")
    bar = overview.run_status().locator(f'{css_testid("run-progress")}[data-run="{RESNET.name}"]')
    expect(bar).to_be_visible()
    expect(bar).to_contain_text("40 %")
    expect(page.locator(css_testid("status"))).to_contain_text(f"Loading {RESNET.name}")
    expect(overview.root()).to_be_hidden()
    overview.screenshot(shots, "overview_loading")
    page.unroute("**/api/runs")  # the server's real answer: ready; the 1 s poll picks it up
    overview.wait_drawn()
    expect(bar).to_have_count(0)
    expect(overview.part("gpu-summary")).to_contain_text(gpu_of(api, RESNET)["name"])
    assert page.errors == []


def test_overview_table_sort_is_kept_in_url(overview, api):
    overview.open(f"run={LEGACY.name}").wait_drawn()
    overview.part("step-table").get_by_role("button", name="Total").click()
    assert overview.query()["sort"] == "total_us:desc"
    totals = {s["step"]: s["total_us"] for s in api(f"/api/overview?{LEGACY.sel()}")["steps"]}
    expected = sorted(totals, key=lambda step: -totals[step])
    assert expected != list(totals), "the steps' times are not in order already"
    assert overview.table_steps() == expected
    overview.page.reload()
    overview.wait_drawn()
    expect(overview.part("step-table").locator('th[aria-sort="descending"]')).to_have_text(re.compile("Total"))
    assert overview.table_steps() == expected
    assert overview.page.errors == []


def test_overview_step_chart_hover_shows_time_and_share(overview, shots):
    overview.open(f"run={RESNET.name}").wait_drawn()
    overview.part("step-chart").scroll_into_view_if_needed()  # below the fold, under the GPU summary's idle table
    box = overview.part("step-chart").locator(".nsewdrag").first.bounding_box()
    overview.page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.7)
    hover = overview.part("step-chart").locator(".hoverlayer")
    expect(hover).to_contain_text("Kernel:")
    expect(hover).to_contain_text(re.compile(r"\d+(\.\d+)? (us|ms) \(\d+\.\d\d %\)"))
    expect(hover).to_contain_text(re.compile(r"Step \d+"))
    overview.screenshot(shots, "overview_hover")


def test_overview_fits_a_narrow_window(overview, shots):
    overview.page.set_viewport_size({"width": 760, "height": 900})
    overview.open(f"run={RESNET.name}").wait_drawn()
    overflow = overview.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    chart_width = overview.part("step-chart").bounding_box()["width"]
    assert 400 < chart_width <= 760
    overview.screenshot(shots, "overview_narrow", full=True)
    assert overview.page.errors == []


def test_overview_shows_reader_and_analysis_warnings(overview, server, shots):
    """Warnings from reading the file (/api/runs) and from analysis (/api/overview) both show, in yellow."""
    page = overview.page
    runs = json.loads(page.request.get(f"{server}/api/runs").text())
    for run in runs["runs"]:
        for f in run["files"]:
            f["warnings"] = ["truncated JSON: recovered 1200 of the events <before> the cut"]
    data = json.loads(page.request.get(f"{server}/api/overview?{RESNET.sel()}").text())
    data["warnings"] = ["no ProfilerStep events: the whole trace is shown as one step"]
    page.route("**/api/runs", lambda route: route.fulfill(json=runs))
    page.route("**/api/overview?*", lambda route: route.fulfill(json=data))
    overview.open(f"run={RESNET.name}").wait_drawn()
    expect(page.locator(css_testid("load-warnings"))).to_contain_text("recovered 1200 of the events <before> the cut")
    expect(overview.part("warnings")).to_contain_text("no ProfilerStep events")
    overview.screenshot(shots, "overview_warnings")
    assert page.errors == []


def test_steps_and_evidence_link_to_their_time_range_in_the_trace_view(resnet, api):
    overview = resnet
    data = api(f"/api/overview?{RESNET.sel()}")
    links = overview.part("step-table").locator(f"tbody {css_testid('trace-link')}")
    expect(links).to_have_count(len(data["steps"]))
    first = data["steps"][0]
    href = links.first.get_attribute("href")
    assert href.startswith("/trace?") and f"run={RESNET.name}" in href
    assert f"start_us={first['start_us']}" in href and f"end_us={first['end_us']}" in href
    placed = [e for r in data["recommendations"] for e in r["evidence"] if "start_us" in e or "event_id" in e]
    expect(overview.part("recommendations").locator(css_testid("trace-link"))).to_have_count(len(placed))
