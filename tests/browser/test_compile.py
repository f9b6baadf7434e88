"""The torch.compile view in Chromium: headline numbers as the API gives them (3 graph breaks per
call on compile_graph_breaks), break locations and short kernels with Trace links that open the
Trace view on the event, the first call's compile phases as a chart matching the API, the kernel
mix chart, the aten operators inside compiled graphs and the launch table, the findings linking to Recommendations, and no view for a run
without compiled code."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Locator, expect

from browser_pages import OverviewPage, ShellPage, TracePage, css_testid, module_runner
from formats import fmt_count, fmt_ratio
from runs import FIRST_CALL, GRAPH_BREAKS, RESNET

pytestmark = pytest.mark.browser

BREAKS_SEL = GRAPH_BREAKS.sel()
FIRST_CALL_SEL = FIRST_CALL.sel()
EAGER_RUN = RESNET.name


class CompilePage(ShellPage):
    view = "compile"

    def wait_drawn(self) -> "CompilePage":
        """Waits until the cards and both always-present charts are drawn and the view is idle."""
        self.wait_mounted()
        expect(self.root()).to_be_visible()
        expect(self.part("cards").locator(".cmp-stat").first).to_be_attached()
        expect(self.part("kernel-mix-chart").locator(".main-svg, p").first).to_be_attached()
        expect(self.part("launch-chart").locator(".main-svg, p").first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        return self

    def card(self, key: str) -> Locator:
        return self.part(f"card-{key}")

    def card_value(self, key: str) -> Locator:
        return self.card(key).locator(css_testid("card-value"))

    def chart_data(self, testid: str) -> list[dict]:
        """The traces Plotly drew in a chart (its `data`), as JSON."""
        return json.loads(self.part(testid).evaluate("(node) => JSON.stringify(node.data)"))


def query_of(href: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}


@pytest.fixture
def compiled(page, server) -> CompilePage:
    return CompilePage(page, server)


@pytest.fixture
def breaks(loaded_page, server) -> CompilePage:
    """The view of the graph-breaks run as first drawn, loaded once for the module's tests that only read it."""
    return CompilePage(loaded_page(f"{server}/compile?{BREAKS_SEL}"), server).wait_drawn()


def test_compile_headline_and_breaks_match_the_api(breaks, api, shots):
    data = api(f"/api/compile?{BREAKS_SEL}")
    summary = data["regions"]["summary"]
    assert summary["graph_breaks_per_call"] == 3, "the model breaks each forward 3 times"
    compiled = breaks

    expect(compiled.card_value("graph-breaks")).to_have_text("3")
    expect(compiled.card("graph-breaks")).to_have_attribute("data-alert", "true")
    expect(compiled.card_value("calls")).to_have_text(fmt_count(summary["calls"]))
    expect(compiled.card_value("regions")).to_have_text(fmt_count(summary["regions"]))
    expect(compiled.card_value("depth")).to_have_text(fmt_count(summary["max_depth"]))
    steps = data["regions"]["steps"]
    share = sum(s["compiled_us"] for s in steps) / sum(s["total_us"] for s in steps)
    expect(compiled.card_value("compiled-share")).to_have_text(fmt_ratio(share))
    expect(compiled.card_value("triton-share")).to_have_text(fmt_ratio(data["kernels"]["triton_time_ratio"]))
    expect(compiled.card_value("idle-launching")).to_have_text(
        fmt_ratio(data["launch"]["summary"]["idle_launching_ratio"]))
    expect(compiled.card("compile-time")).to_have_count(0)  # no compile in this trace
    expect(compiled.part("no-compile")).to_contain_text("This trace holds no compilation")

    # Where each break is, with a Trace link selecting its first region.
    locations = data["regions"]["locations"]
    rows = compiled.part("breaks-table").locator("tbody tr")
    expect(rows).to_have_count(len(locations))
    expected_where = [loc["frame"] or f"region {loc['region']} inside region {loc['parent_region']}" for loc in locations]
    assert rows.locator("td:first-child").all_inner_texts() == expected_where
    links = rows.locator(css_testid("trace-link"))
    assert [query_of(links.nth(i).get_attribute("href"))["select"] for i in range(links.count())] == \
        [str(loc["event_id"]) for loc in locations]

    # Per step and per call.
    expect(compiled.part("region-steps-table").locator("tbody tr")).to_have_count(len(steps))
    calls = compiled.part("calls-table").locator("tbody tr")
    expect(calls).to_have_count(min(20, len(data["regions"]["calls"])))
    assert query_of(calls.first.locator(css_testid("trace-link")).get_attribute("href"))["select"] == \
        str(data["regions"]["calls"][0]["event_id"])
    expect(compiled.part("pairing")).to_contain_text(f"{data['pieces']['paired']} pairs")

    # Findings link to the Recommendations view of the same selection.
    finding = compiled.part("findings").locator(f'{css_testid("finding")}[data-id="graph_breaks"]')
    expect(finding).to_have_count(1)
    href = finding.locator(css_testid("finding-link")).get_attribute("href")
    assert urlparse(href).path == "/recommendations"
    assert query_of(href) == {"run": GRAPH_BREAKS.name, "worker": GRAPH_BREAKS.worker, "span": "1"}

    compiled.screenshot(shots, "compile_graph_breaks", full=True)
    assert compiled.page.errors == []


def test_compile_kernel_mix_aten_and_launch_tables(breaks, api):
    data = api(f"/api/compile?{BREAKS_SEL}")
    compiled = breaks
    families = [f for f in data["kernels"]["families"] if f["total_us"] > 0]
    expect(compiled.part("kernel-mix-chart").locator(".slice")).to_have_count(len(families))
    (pie,) = compiled.chart_data("kernel-mix-chart")
    assert pie["values"] == pytest.approx([f["total_us"] for f in families])
    expect(compiled.part("families-table").locator("tbody tr")).to_have_count(len(data["kernels"]["families"]))

    launches = data["kernels"]["launches"]
    rows = compiled.part("launches-table").locator("tbody tr")
    expect(rows).to_have_count(len(launches))
    apis = [rows.nth(i).locator("[data-api]").get_attribute("data-api") for i in range(rows.count())]
    assert apis == [launch["api"] for launch in launches]
    assert "driver" in apis and "runtime" in apis  # Triton's cuLaunchKernel beside aten's cudaLaunchKernel
    assert rows.locator("td:nth-child(2)").all_inner_texts() == [launch["name"] for launch in launches]

    aten = data["aten"]["rows"]
    assert aten, "the compiled graphs call aten::mm"
    rows = compiled.part("aten-table").locator("tbody tr")
    expect(rows).to_have_count(len(aten))
    assert rows.locator("td:first-child").all_inner_texts() == [r["name"] for r in aten]
    assert query_of(rows.first.locator(css_testid("operator-link")).get_attribute("href"))["q"] == aten[0]["name"]

    steps = data["launch"]["steps"]
    expect(compiled.part("launch-table").locator("tbody tr")).to_have_count(len(steps))
    bars = compiled.chart_data("launch-chart")
    assert [b["name"] for b in bars] == ["GPU busy", "GPU idle while the CPU launches", "GPU idle otherwise"]
    assert bars[1]["customdata"] == pytest.approx([s["idle_launching_us"] for s in steps])
    summary = data["launch"]["summary"]
    expect(compiled.part("short-kernels")).to_contain_text(
        f"{fmt_count(summary['short_kernels'])} of {fmt_count(summary['kernels'])} launched kernels")
    expect(compiled.part("worst-table").locator("tbody tr")).to_have_count(len(data["launch"]["worst"]))
    assert compiled.page.errors == []


def test_compile_trace_links_select_the_break_and_the_short_kernel(compiled, api):
    data = api(f"/api/compile?{BREAKS_SEL}")
    location = data["regions"]["locations"][0]
    worst = data["launch"]["worst"][0]
    page = compiled.page
    compiled.open(BREAKS_SEL).wait_drawn()
    compiled.part("breaks-table").locator(css_testid("trace-link")).first.click()
    trace = TracePage(page, compiled.base).wait_drawn()
    trace.wait_details(location["event_id"])
    assert trace.query()["select"] == str(location["event_id"])
    start, end = trace.window()
    assert start <= location["start_us"] and end >= location["end_us"]

    page.go_back()
    compiled.wait_drawn()
    compiled.part("worst-table").locator(css_testid("trace-link")).first.click()
    trace.wait_drawn()
    trace.wait_details(worst["event_id"])  # the kernel, not its launch call
    assert trace.query()["select"] == str(worst["event_id"])
    assert page.errors == []


def test_compile_first_call_phase_chart_matches_the_api(compiled, api, shots):
    data = api(f"/api/compile?{FIRST_CALL_SEL}")
    breakdown = data["compile"]
    assert breakdown["total_us"] > 0, "the first call's trace holds its compile"
    compiled.open(FIRST_CALL_SEL).wait_drawn()
    chart = compiled.part("phase-chart")
    expect(chart.locator(".main-svg").first).to_be_attached()
    phases = breakdown["phases"]
    bars = compiled.chart_data("phase-chart")
    passes = {"Forward (frame compile)": "forward_us", "Backward compile": "backward_us",
              "First run (autotuning)": "first_run_us"}
    drawn = [passes[b["name"]] for b in bars]
    assert drawn == [key for key in passes.values() if any(p[key] > 0 for p in phases)]
    for bar, key in zip(bars, drawn):
        assert bar["y"] == [p["label"] for p in phases]
        assert bar["customdata"] == pytest.approx([p[key] for p in phases])
    expect(chart.locator(".trace.bars")).to_have_count(len(bars))
    expect(compiled.part("phase-table").locator("tbody tr")).to_have_count(len(phases))
    assert compiled.part("phase-table").locator("tbody td:first-child").all_inner_texts() == [p["label"] for p in phases]
    expect(compiled.part("top-ranges").locator("tbody tr")).to_have_count(len(breakdown["top"]))
    expect(compiled.card("compile-time")).to_have_count(1)

    # No breaks here: said plainly, and the card is not highlighted.
    expect(compiled.part("breaks")).to_have_text("No graph breaks: each call runs one compiled graph.")
    expect(compiled.card("graph-breaks")).to_have_attribute("data-alert", "false")
    compiled.screenshot(shots, "compile_first_call", full=True)
    assert compiled.page.errors == []


def test_compile_view_only_for_runs_with_compiled_code(compiled, api):
    runs = {r["name"]: r for r in api("/api/runs")["runs"]}
    assert "compile" not in runs[EAGER_RUN]["views"]
    assert "compile" in runs[GRAPH_BREAKS.name]["views"]
    overview = OverviewPage(compiled.page, compiled.base)
    overview.open(f"run={EAGER_RUN}").wait_drawn()
    options = overview.select("view").locator("option")
    expect(options.filter(has_text="Kernel")).to_have_count(1)
    assert "compile" not in [options.nth(i).get_attribute("value") for i in range(options.count())]
    overview.choose("run", GRAPH_BREAKS.name)
    expect(overview.select("view").locator('option[value="compile"]')).to_have_text("torch.compile")
    overview.choose("view", "compile")
    compiled.wait_drawn()
    assert compiled.query()["run"] == GRAPH_BREAKS.name
    assert compiled.page.errors == []


def test_compile_shaping_helpers(blank_page):
    """lib/compileview.js on hand-made inputs: break wording, pairing, totals, empty passes left out."""
    out = module_runner(blank_page, {"cv": "lib/compileview.js"})("""(() => {
        const loc = { region: "3/0", parent_region: "2/0", frame: null };
        const steps = [
            { step: "1", total_us: 100, compiled_us: 60, calls: 1, regions: 2, graph_breaks: 1, max_depth: 2 },
            { step: "2", total_us: 300, compiled_us: 100, calls: 2, regions: 2, graph_breaks: 0, max_depth: 1 },
        ];
        const phases = [{ phase: "dynamo", label: "Dynamo tracing", total_us: 5, forward_us: 5, backward_us: 0,
                          first_run_us: 0 }];
        return {
            where: cv.breakWhere(loc),
            frame: cv.breakWhere({ ...loc, frame: "model.py(12): forward" }),
            pairing: cv.pairingText({ forward: 3, backward: 2, paired: 2 }),
            none: cv.pairingText({ forward: 0, backward: 0, paired: 0 }),
            totals: cv.regionTotals(steps),
            single: cv.regionTotals(steps.slice(0, 1)),
            passes: cv.phaseChart({ total_us: 5, phases }).traces.map((t) => t.name),
            perStep: cv.perStepText({ launches_per_step: 2, kernels_per_step: 1 }),
            noSteps: cv.perStepText({ launches_per_step: null, kernels_per_step: null }),
        };
    })()""")
    assert out["where"] == "region 3/0 inside region 2/0"
    assert out["frame"] == "model.py(12): forward"
    assert out["pairing"].endswith("2 pairs joined by forward → backward flows, 1 unpaired.")
    assert out["none"].startswith("No CompiledFunction pieces")
    # 160 of 400 us compiled: 0.4; breaks 1 + 0; the deepest step 2.
    assert out["totals"] == {"step": "All steps", "calls": 3, "regions": 4, "graph_breaks": 1, "max_depth": 2,
                             "compiled_us": 160, "outside_us": 240, "compiled_ratio": 0.4}
    assert out["single"] is None
    assert out["passes"] == ["Forward (frame compile)"]
    assert out["perStep"] == "per step: 2 launch calls, 1 kernel launched one by one"
    assert out["noSteps"] == ""
