"""The Diff page in Chromium, on a logdir of the two demo loss_sync runs and the ResNet-50 fp32 / AMP bf16
pair recorded on an H200: pickers, the waterfall of the step from baseline to candidate, the tables
and recommendations against /api/diff, links to each item's view in either run, and both
selections kept in the URL (a pasted link shows the same diff; picking a candidate or swapping
changes the URL)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Locator, expect

from browser_pages import ShellPage, css_testid, module_runner
from serving import serving

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
BEFORE, AFTER = "loss_sync_before", "loss_sync_after"
FP32, BF16 = "resnet50_fp32", "resnet50_amp_bf16"
PAGE_SIZE = 15


class DiffPage(ShellPage):
    view = "diff"

    def wait_drawn(self) -> "DiffPage":
        self.wait_mounted()
        expect(self.part("waterfall").locator(".main-svg").first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        self.wait_idle()
        return self

    def picker(self, side: str, which: str) -> Locator:
        return self.part(f"{side}-{which}")

    def table_rows(self, part: str) -> Locator:
        return self.part(f"{part}-table").locator("tbody tr")

    def names(self, part: str) -> list[str]:
        return self.part(f"{part}-table").locator("tbody tr td:nth-child(2) .truncate").evaluate_all(
            "cells => cells.map((c) => c.title)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    logdir = tmp_path_factory.mktemp("diff_logdir")
    for run, folder in ((BEFORE, REPO / "examples/logdir" / BEFORE), (AFTER, REPO / "examples/logdir" / AFTER),
                        (FP32, REPO / "tests/data/diff" / FP32), (BF16, REPO / "tests/data/diff" / BF16)):
        shutil.copytree(folder, logdir / run)
    with serving(logdir, tmp_path_factory.mktemp("diff_cache"), tmp_path_factory.mktemp("diff_server") / "log",
                 [BEFORE, AFTER, FP32, BF16]) as base:
        yield base


@pytest.fixture
def api(page, server: str):
    """GET a JSON path of this module's server (the session's `api` asks the session's server)."""
    return lambda path: page.request.get(server + path).json()


@pytest.fixture
def diff(page, server) -> DiffPage:
    page.set_viewport_size({"width": 1400, "height": 900})
    return DiffPage(page, server)


def test_diff_page_draws_the_api_answer(diff, api, shots):
    diff.open(f"run={BEFORE}&new_run={AFTER}").wait_drawn()
    body = api(f"/api/diff?base_run={BEFORE}&new_run={AFTER}")
    expect(diff.part("verdict-word")).to_have_text("Improvement")
    expect(diff.part("step-delta")).to_have_text(re.compile(r"^−29\.4\s%$"))
    # The waterfall: baseline, the categories that are not zero in both runs, candidate.
    bars = diff.part("waterfall").locator(".point")
    categories = [k for k in ("kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us", "dataloader_us",
                              "cpu_exec_us", "other_us") if body["steps"]["base"][k] or body["steps"]["new"][k]]
    expect(bars).to_have_count(len(categories) + 2)
    ticks = diff.part("waterfall").locator(".xtick text").all_text_contents()
    assert ticks[0] == "Baseline" and ticks[-1] == "Candidate" and "Memcpy" in ticks
    for part in ("operators", "kernels", "modules"):
        rows = body[part]
        expect(diff.table_rows(part)).to_have_count(min(PAGE_SIZE, len(rows)))
        if part != "kernels":  # kernel names are shortened
            assert diff.names(part) == [r["name"] for r in rows[:PAGE_SIZE]]
    first = diff.table_rows("operators").first
    expect(first.locator("td").first).to_have_text(body["operators"][0]["status"])
    resolved = diff.part("resolved").locator("li")
    expect(resolved).to_have_text(body["recommendations"]["resolved"])
    expect(diff.part("pickers")).to_be_visible()
    utilization = diff.part("ratio-table").locator("tbody tr").first.locator("td")
    expect(utilization).to_have_text(["GPU utilization", re.compile(r"^55\.97\s%$"), re.compile(r"^79\.50\s%$"), "+23.5 pp"])
    diff.screenshot(shots, "diff_loss_sync", full=True)
    assert diff.page.errors == []


def test_item_links_open_its_view_in_either_run(diff, api):
    diff.open(f"run={BEFORE}&new_run={AFTER}").wait_drawn()
    row = diff.table_rows("operators").first
    name = api(f"/api/diff?base_run={BEFORE}&new_run={AFTER}")["operators"][0]["name"]
    base_href = row.locator(css_testid("base-link")).get_attribute("href")
    new_href = row.locator(css_testid("new-link")).get_attribute("href")
    assert base_href.startswith("/operators?run=loss_sync_before&worker=vm_437&span=1&q=")
    assert new_href.startswith("/operators?run=loss_sync_after&worker=vm_471&span=1&q=")
    row.locator(css_testid("new-link")).click()
    expect(diff.page.locator('[data-view="operators"] [data-testid="search"]')).to_have_value(name)
    assert diff.query()["run"] == AFTER


def test_both_selections_live_in_the_url(diff, api, shots):
    diff.open(f"run={FP32}&new_run={BF16}").wait_drawn()
    expect(diff.picker("base", "run")).to_have_value(FP32)
    expect(diff.picker("new", "run")).to_have_value(BF16)
    expect(diff.part("verdict-word")).to_have_text("Regression")
    body = api(f"/api/diff?base_run={FP32}&new_run={BF16}")
    assert diff.names("operators")[:3] == [r["name"] for r in body["operators"][:3]]
    diff.screenshot(shots, "diff_resnet50_amp", full=True)
    # Swapping: the URL names the other way round, and so does the verdict.
    diff.part("swap").click()
    diff.wait_drawn()
    query = diff.query()
    assert (query["run"], query["new_run"]) == (BF16, FP32)
    expect(diff.part("verdict-word")).to_have_text("Improvement")
    expect(diff.select("run")).to_have_value(BF16)  # the left panel follows the baseline
    # A candidate picked: the URL holds it; reloading the link shows the same diff.
    diff.picker("new", "run").select_option(AFTER)
    diff.wait_drawn()
    query = diff.query()
    assert (query["run"], query["new_run"], query["new_worker"], query["new_span"]) == (BF16, AFTER, "vm_471", "1")
    url = diff.page.url
    text = diff.part("verdict").text_content()
    diff.page.goto(url)
    diff.wait_drawn()
    assert diff.part("verdict").text_content() == text
    expect(diff.picker("new", "run")).to_have_value(AFTER)
    assert diff.page.errors == []


def test_unknown_candidate_says_so(diff):
    diff.open(f"run={BEFORE}&new_run=no_such_run")
    expect(diff.error()).to_be_visible()
    expect(diff.page.locator(css_testid("error-message"))).to_contain_text("no_such_run")


# -- the page's shaping (web/static/js/diff.js), on hand-made answers ----------------------------------

RUNS = [
    {"name": "a", "status": "ready", "workers": ["w0", "w1"], "spans": {"w0": ["1", "2"], "w1": ["1"]}},
    {"name": "broken", "status": "error", "workers": ["w0"], "spans": {"w0": ["1"]}},
    {"name": "snapshots", "status": "ready", "workers": [], "spans": {}},
    {"name": "b", "status": "ready", "workers": ["v0"], "spans": {"v0": ["1"]}},
]


@pytest.fixture
def lib(blank_page):
    """Evaluates `expression` with `d` (diff.js) and `ARG` in scope."""
    return module_runner(blank_page, {"d": "diff.js"})


def test_the_candidate_is_the_url_s_else_the_first_other_run_with_traces(lib):
    pick = "d.candidateOf(ARG.params, ARG.runs)"
    assert lib(pick, {"params": {"run": "a"}, "runs": RUNS}) == {"run": "b", "worker": "v0", "span": "1"}
    assert lib(pick, {"params": {"run": "b"}, "runs": RUNS}) == {"run": "a", "worker": "w0", "span": "1"}
    assert lib(pick, {"params": {"run": "b", "new_run": "a", "new_worker": "w1"}, "runs": RUNS}) == \
        {"run": "a", "worker": "w1", "span": "1"}
    # A worker or span the run lacks falls back to its first; an unknown run is kept for the API's 404.
    assert lib(pick, {"params": {"run": "b", "new_run": "a", "new_worker": "x", "new_span": "2"}, "runs": RUNS}) == \
        {"run": "a", "worker": "w0", "span": "2"}
    assert lib(pick, {"params": {"run": "b", "new_run": "gone"}, "runs": RUNS}) == {"run": "gone", "worker": None, "span": None}
    assert lib(pick, {"params": {"run": "a"}, "runs": RUNS[:1]}) == {"run": "a", "worker": "w0", "span": "1"}


def test_the_waterfall_runs_from_the_base_step_through_each_category_to_the_new_step(lib):
    zero = {k: 0 for k in ("kernel_us", "memcpy_us", "memset_us", "communication_us", "runtime_us", "dataloader_us",
                           "cpu_exec_us", "other_us")}
    steps = {"base": {**zero, "total_us": 100, "kernel_us": 60, "other_us": 40},
             "new": {**zero, "total_us": 90, "kernel_us": 70, "cpu_exec_us": 20},
             "delta": {**zero, "total_us": -10, "kernel_us": 10, "cpu_exec_us": 20, "other_us": -40}}
    out = lib("d.waterfall(ARG)", steps)
    assert out == {"x": ["Baseline", "Kernel", "CPU Exec", "Other", "Candidate"],
                   "measure": ["absolute", "relative", "relative", "relative", "total"],
                   "us": [100, 10, 20, -40, 90]}
    assert sum(out["us"][:-1]) == out["us"][-1]


def test_signed_numbers_and_status_counts(lib):
    assert lib("[1200, -350, 0, null].map(d.formatDelta)") == ["+1.20 ms", "−350 us", "0 us", "n/a"]
    assert lib("[0.235229, -0.000288, null].map(d.formatPoints)") == ["+23.5 pp", "0.0 pp", "n/a"]
    assert lib("d.statusCounts(ARG)", [{"status": s} for s in ("unchanged", "added", "unchanged", "removed")]) == \
        "1 added, 1 removed, 2 unchanged"
