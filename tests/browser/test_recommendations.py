"""The Recommendations view in Chromium: a card per finding as the API lists them (largest saving
first, each saying what fixing it would save), numbers beside their thresholds, evidence links
that open the Trace (and Operator) view on the place, the severity filter kept in the URL, the
empty state, and the Overview's panel linking here."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Locator, Page, expect

from browser_pages import OverviewPage, ShellPage, TracePage, css_testid
from formats import fmt_ratio, fmt_us
from runs import BROKEN, FIRST_CALL, LEGACY, RESNET, TWO_SPANS, V100, Run, each

pytestmark = pytest.mark.browser

RESNET_RUN = RESNET.name
RESNET_SEL = RESNET.sel()
# The DataLoader takes a third of each step or more: findings with step ranges as evidence.
LOADER_SEL = LEGACY.sel()
BROKEN_RUN = BROKEN.name


class RecommendationsPage(ShellPage):
    view = "recommendations"

    def wait_drawn(self) -> "RecommendationsPage":
        """Waits until the cards (or the empty or filtered-out note) are there and the view is idle."""
        self.wait_mounted()
        expect(self.root()).to_be_visible()
        expect(self.part("findings").locator(f'{css_testid("finding")}, {css_testid("empty")}, p').first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        return self

    def cards(self) -> Locator:
        return self.part("findings").locator(css_testid("finding"))

    def severity(self, name: str) -> Locator:
        return self.part(f"severity-{name}")


def query_of(href: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}


def first_event(api, name: str) -> dict:
    """The first event named `name` in the resnet50_fp32 trace (id, start_us, dur_us)."""
    found = api(f"/api/trace/search?{RESNET_SEL}&q={name}")
    assert found["matches"], f"no {name} in the resnet50_fp32 trace"
    return found["matches"][0]


def synthetic_findings(event: dict) -> list[dict]:
    """Findings in the API's general shape, one per severity and listed least severe first, the
    high one with an operator as its culprit event (the shape of the host-device sync rule's)."""
    start, end = event["start_us"], event["start_us"] + event["dur_us"]
    return [
        {"id": "tensor_cores_unused", "severity": "low", "title": "Matmuls run without tensor cores",
         "detail": "Enable TF32 with `torch.backends.cuda.matmul.allow_tf32 = True`.",
         "numbers": {"tc_eligible_us": 1234.5}, "thresholds": {}, "evidence": []},
        {"id": "host_device_sync", "severity": "high", "title": "A sync blocks the host every step",
         "detail": "Keep values on the GPU instead of calling `.item()`.",
         "numbers": {"blocked_ratio": 0.125, "syncs_per_step": 3},
         "thresholds": {"high_blocked_ratio": 0.1, "medium_blocked_ratio": 0.01},
         "evidence": [{"kind": "operator", "label": f"{event['name']} at train.py(42): loss", "event_id": event["id"],
                       "start_us": start, "end_us": end, "op": event["name"], "frame": "train.py(42): loss",
                       "frames": ["train.py(42): loss", "train.py(80): main"], "calls": ["cudaStreamSynchronize"],
                       "blocked_us": 2500.0, "count": 7}]},
        {"id": "memory_near_limit", "severity": "medium", "title": "Peak memory is near the device's capacity",
         "detail": "Lower the batch size.", "numbers": {"peak_bytes": 80 * 2**30},
         "thresholds": {"capacity_ratio": 0.9}, "evidence": [{"kind": "range", "label": "the peak", "start_us": start,
                                                               "end_us": end}]},
    ]


@pytest.fixture
def recs(page, server) -> RecommendationsPage:
    return RecommendationsPage(page, server)


@pytest.mark.parametrize("run", each(LEGACY, V100))
def test_recommendations_cards_match_the_api(recs, api, shots, run: Run):
    data = api(f"/api/recommendations?{run.sel()}")
    assert data["recommendations"], "a trace waiting on its DataLoader should raise findings"
    recs.open(run.sel()).wait_drawn()
    cards = recs.cards()
    expect(cards).to_have_count(len(data["recommendations"]))
    expected = data["recommendations"]  # the API's order: largest saving first
    assert expected == by_saving(expected)
    assert cards.locator(css_testid("finding-title")).all_inner_texts() == [f["title"] for f in expected]
    assert cards.locator(css_testid("finding-id")).all_inner_texts() == [f["id"] for f in expected]
    assert [cards.nth(i).get_attribute("data-severity") for i in range(cards.count())] == [f["severity"] for f in expected]
    for i, finding in enumerate(expected):
        card = cards.nth(i)
        # The suggestion, its backticked code as <code>.
        first_code = finding["detail"].split("`")[1] if "`" in finding["detail"] else None
        if first_code:
            expect(card.locator(f'{css_testid("finding-detail")} code').first).to_have_text(first_code)
        items = card.locator(css_testid("evidence-item"))
        expect(items).to_have_count(len(finding["evidence"]))
        for j, evidence in enumerate(finding["evidence"]):
            # A culprit event opens selected; a range opens as itself; an item with neither has no link.
            links = items.nth(j).locator(css_testid("trace-link"))
            if "event_id" not in evidence and "start_us" not in evidence:
                expect(links).to_have_count(0)
                continue
            query = query_of(links.get_attribute("href"))
            if "event_id" in evidence:
                assert query["select"] == str(evidence["event_id"])
            else:
                assert float(query["start_us"]) == evidence["start_us"] and "select" not in query
            expect(items.nth(j).locator(css_testid("operator-link"))).to_have_count(1 if evidence.get("op") else 0)
    dataloader = next(f for f in expected if f["id"] == "dataloader_bound")
    card = cards.filter(has=recs.page.locator('[data-testid="finding-id"]', has_text="dataloader_bound"))
    share = card.locator('[data-key="share_ratio"]')
    expect(share.locator(css_testid("number-value"))).to_have_text(fmt_ratio(dataloader["numbers"]["share_ratio"]))
    threshold = share.locator(css_testid("number-threshold"))
    expect(threshold).to_have_text(fmt_ratio(dataloader["thresholds"]["share_ratio"]))
    expect(card.locator(css_testid("saving-value"))).to_have_text(saving_text(dataloader))
    expect(card.locator('[data-key="dataloader_us"]')).to_contain_text("ms")  # formatted by its _us suffix
    expect(card.locator(css_testid("evidence-item")).first).to_contain_text(dataloader["evidence"][0]["label"])
    expect(recs.part("severity-high-count")).to_have_text(str(sum(f["severity"] == "high" for f in expected)))
    expect(recs.about().locator("summary")).to_have_text("How these numbers are computed")
    recs.screenshot(shots, f"recommendations_{run.name}", full=True)
    assert recs.page.errors == []


def saving_text(finding: dict) -> str:
    """lib/findings.js savingText."""
    us = finding["saving_us"]
    if us is None:
        return "No saving claimed"
    return f"saves ~{'0 us' if us == 0 else fmt_us(us)}/step ({finding['saving_ratio'] * 100:.1f} % of the step)"


def by_saving(findings: list[dict]) -> list[dict]:
    """Largest saving first, ties most severe first (stable)."""
    rank = {"high": 0, "medium": 1, "low": 2}
    return sorted(findings, key=lambda f: (-(f["saving_us"] or 0.0), rank[f["severity"]]))


@pytest.mark.parametrize("run, span", [(TWO_SPANS, "1"), (TWO_SPANS, "2")], ids=["launch_bound_eager", "reduce_overhead"])
def test_cards_say_what_fixing_each_saves_largest_first(recs, api, shots, run: Run, span: str):
    """An eager MLP launched one kernel at a time (span 1), and the same under CUDA graphs (span 2):
    each card's saving as the API estimates it, the API's order, and the one covered by another's
    saving says so. The CUDA-graph run is told where its step goes, not to use CUDA graphs."""
    found = api(f"/api/recommendations?{run.sel(span)}")["recommendations"]
    assert found == by_saving(found) and found[0]["id"] == "low_gpu_utilization"
    recs.open(run.sel(span)).wait_drawn()
    cards = recs.cards()
    expect(cards.locator(css_testid("finding-id"))).to_have_text([f["id"] for f in found])
    expect(cards.locator(css_testid("saving-value"))).to_have_text([saving_text(f) for f in found])
    for i, finding in enumerate(found):
        expect(cards.nth(i).locator(css_testid("saving-note"))).to_have_text(f" · {finding['saving_note']}")
        included = cards.nth(i).locator(css_testid("included-in"))
        if finding.get("included_in"):
            expect(included).to_contain_text(f"included in {finding['included_in']}'s saving")
        else:
            expect(included).to_have_count(0)
    detail = cards.first.locator(css_testid("finding-detail"))
    if span == "2":
        expect(detail).to_contain_text("already replays CUDA graphs")
        expect(detail).not_to_contain_text("reduce-overhead")
    else:
        assert [f.get("included_in") for f in found[1:]] == ["low_gpu_utilization"] * (len(found) - 1)
        expect(detail).to_contain_text("reduce-overhead")
    recs.screenshot(shots, f"recommendations_savings_{span}", full=True)
    assert recs.page.errors == []


def test_range_evidence_opens_the_trace_view_on_that_step(recs, api):
    data = api(f"/api/recommendations?{LOADER_SEL}")
    evidence = next(e for f in data["recommendations"] for e in f["evidence"] if "start_us" in e)
    recs.open(LOADER_SEL).wait_drawn()
    link = recs.cards().first.locator(css_testid("trace-link")).first
    query = query_of(link.get_attribute("href"))
    assert urlparse(link.get_attribute("href")).path == "/trace"
    assert {k: query[k] for k in ("run", "worker", "span")} == {"run": LEGACY.name, "worker": LEGACY.worker, "span": "1"}
    assert float(query["start_us"]) == evidence["start_us"] and float(query["end_us"]) == evidence["end_us"]
    assert "select" not in query  # a step is a range, not one culprit event
    link.click()
    trace = TracePage(recs.page, recs.base).wait_drawn()
    start, end = trace.window()
    span = evidence["end_us"] - evidence["start_us"]
    assert abs(start - evidence["start_us"]) < span * 1e-3 and abs(end - evidence["end_us"]) < span * 1e-3
    assert trace.drawn_boxes() > 0
    assert recs.page.errors == []


def test_event_evidence_selects_the_event_and_links_its_operator(recs, api, server, shots):
    """A culprit event (`event_id`) opens the Trace view with it selected in a window around it; an
    `op` field links to the Operator view searching for it; lists fold under the line."""
    event = first_event(api, "aten::conv2d")
    page: Page = recs.page
    body = {"recommendations": synthetic_findings(event), "warnings": []}
    page.route("**/api/recommendations?*", lambda route: route.fulfill(json=body))
    recs.open(RESNET_SEL).wait_drawn()
    card = recs.cards().first
    expect(card.locator(css_testid("finding-id"))).to_have_text("host_device_sync")
    item = card.locator(css_testid("evidence-item"))
    # The label names the op and frame; the line adds what was measured, formatted by unit.
    expect(item.locator(".rec-evidence-text")).to_have_text(
        f"{event['name']} at train.py(42): loss: blocked 2.50 ms, count 7")
    expect(item.locator("details summary")).to_have_text(["frames (2)", "calls (1)"])
    rows = card.locator(css_testid("numbers")).locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first.locator(css_testid("number-threshold"))).to_have_text("high: 10.00 %medium: 1.00 %")
    expect(recs.cards().nth(1).locator('[data-key="peak_bytes"]')).to_contain_text("80.00 GiB")
    expect(recs.cards().nth(1).locator('[data-key="capacity_ratio"] [data-testid="number-value"]')).to_have_text("—")

    operator = item.locator(css_testid("operator-link"))
    assert query_of(operator.get_attribute("href")) == {"run": RESNET_RUN, "worker": RESNET.worker, "span": "1",
                                                       "q": event["name"]}
    link = item.locator(css_testid("trace-link"))
    query = query_of(link.get_attribute("href"))
    assert query["select"] == str(event["id"])
    start, end = float(query["start_us"]), float(query["end_us"])
    assert start < event["start_us"] and end > event["start_us"] + event["dur_us"]
    assert (event["dur_us"]) / (end - start) == pytest.approx(0.4, rel=0.01) or end - start == pytest.approx(20, rel=0.01)
    recs.screenshot(shots, "recommendations_event_evidence")

    link.click()
    trace = TracePage(page, recs.base).wait_drawn()
    trace.wait_details(event["id"])
    shown_start, shown_end = trace.window()
    assert shown_start == pytest.approx(start, abs=0.01) and shown_end == pytest.approx(end, abs=0.01)
    assert trace.query()["select"] == str(event["id"])
    page.go_back()
    recs.wait_drawn()
    recs.cards().first.locator(css_testid("operator-link")).click()
    expect(page.locator(f'[data-view="operators"] {css_testid("search")}')).to_have_value(event["name"])
    assert page.errors == []


def test_severity_filter_round_trips_the_url(recs, api):
    event = first_event(api, "aten::conv2d")
    body = {"recommendations": synthetic_findings(event), "warnings": []}
    recs.page.route("**/api/recommendations?*", lambda route: route.fulfill(json=body))
    recs.open(RESNET_SEL).wait_drawn()
    assert [recs.cards().nth(i).get_attribute("data-severity") for i in range(3)] == ["high", "medium", "low"]
    expect(recs.part("finding-count")).to_have_text("3 findings")
    recs.severity("high").uncheck()
    assert recs.query()["severity"] == "medium,low"
    expect(recs.cards()).to_have_count(2)
    expect(recs.part("finding-count")).to_have_text("2 of 3 findings shown")
    recs.page.reload()
    recs.wait_drawn()
    expect(recs.severity("high")).not_to_be_checked()
    expect(recs.severity("medium")).to_be_checked()
    expect(recs.cards()).to_have_count(2)
    recs.severity("medium").uncheck()
    recs.severity("low").uncheck()
    assert recs.query()["severity"] == "none"
    expect(recs.part("filtered-out")).to_be_visible()
    for name in ("high", "medium", "low"):
        recs.severity(name).check()
    assert "severity" not in recs.query()
    expect(recs.cards()).to_have_count(3)
    assert recs.page.errors == []


def test_no_findings_says_so_and_points_to_the_rules(recs):
    recs.page.route("**/api/recommendations?*", lambda route: route.fulfill(json={"recommendations": [], "warnings": []}))
    recs.open(RESNET_SEL).wait_drawn()
    expect(recs.part("empty")).to_contain_text("Nothing stood out in this trace")
    expect(recs.about()).not_to_have_attribute("open", "")
    recs.part("open-about").click()
    expect(recs.about()).to_have_attribute("open", "")
    expect(recs.about()).to_contain_text("dataloader_bound")
    expect(recs.part("finding-count")).to_have_text("")
    assert recs.page.errors == []


def test_unreadable_trace_shows_error_and_other_runs_work(recs):
    recs.open(f"run={BROKEN_RUN}")
    expect(recs.error()).to_contain_text("could not be read")
    recs.choose("run", LEGACY.name)
    recs.wait_drawn()
    expect(recs.error()).to_be_hidden()
    expect(recs.cards().first).to_be_visible()
    assert all("422" in e for e in recs.page.errors), recs.page.errors


def test_overview_panel_lists_findings_and_links_to_this_view(page, server, api, shots):
    overview = OverviewPage(page, server)
    overview.open(LOADER_SEL).wait_drawn()
    data = api(f"/api/recommendations?{LOADER_SEL}")
    panel = overview.part("recommendations")
    expect(panel.locator(css_testid("recommendation"))).to_have_count(len(data["recommendations"]))
    expect(panel).to_contain_text(data["recommendations"][0]["title"])
    expect(panel.locator(css_testid("numbers"))).to_have_count(0)  # compact: numbers are in the view
    details = overview.part("recommendations-link")
    assert query_of(details.get_attribute("href")) == {"run": LEGACY.name, "worker": LEGACY.worker, "span": "1"}
    panel.locator("xpath=..").scroll_into_view_if_needed()
    panel.locator("xpath=..").screenshot(path=str(shots / "overview_recommendations.png"))
    details.click()
    recs = RecommendationsPage(page, server).wait_drawn()
    assert recs.query() == {"run": LEGACY.name, "worker": LEGACY.worker, "span": "1"}
    expect(recs.cards()).to_have_count(len(data["recommendations"]))
    assert page.errors == []


def test_overview_says_a_first_call_is_mostly_compiling(page, server, api, shots):
    """A first compiled call: the Overview's findings say the compile time is the step's, with its saving."""
    overview = OverviewPage(page, server)
    overview.open(FIRST_CALL.sel()).wait_drawn()
    [found] = api(f"/api/recommendations?{FIRST_CALL.sel()}")["recommendations"]
    assert found["id"] == "compile_dominated" and found["saving_ratio"] > 0.9
    panel = overview.part("recommendations")
    item = panel.locator(css_testid("recommendation"))
    expect(item).to_have_count(1)
    expect(item).to_have_attribute("data-id", "compile_dominated")
    expect(item.locator(css_testid("saving-value"))).to_have_text(saving_text(found))
    expect(panel).not_to_contain_text("Nothing stood out")
    panel.locator("xpath=..").scroll_into_view_if_needed()
    panel.locator("xpath=..").screenshot(path=str(shots / "overview_recommendations_first_call.png"))
    assert page.errors == []


def test_recommendations_fit_a_narrow_window(recs, shots):
    recs.page.set_viewport_size({"width": 760, "height": 900})
    recs.open(LOADER_SEL).wait_drawn()
    overflow = recs.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    cards = recs.cards()
    for i in range(cards.count()):
        width = cards.nth(i).evaluate("(card) => card.scrollWidth - card.clientWidth")
        assert width <= 0, f"card {i} overflows by {width}px"
    recs.screenshot(shots, "recommendations_narrow", full=True)
    assert recs.page.errors == []
