"""The Distributed view in Chromium: the straggler headline names rank 1 on the run where rank 1
was made slow (ddp_straggler_rank1, and the 4-rank DDP fixture where present), the per-rank charts
carry the API's numbers and follow the step picker, the ops table follows the rank picker, the
topology lists every GPU, FSDP's unequal call counts are noted, the shell's worker select is off on
this view only, and a one-worker run does not offer the view."""

from __future__ import annotations

import json
import math
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Locator, expect

from browser_pages import OverviewPage, ShellPage, css_testid
from runs import DDP4, FSDP, RESNET, STRAGGLER, Run, each

pytestmark = pytest.mark.browser

STRAGGLER_RUN = STRAGGLER.name
FSDP_RUN = FSDP.name
ONE_WORKER_RUN = RESNET.name
# Runs of several ranks, each checked the same way: 2 ranks here, 4 in the shared fixture
RANKED_RUNS = each(STRAGGLER, DDP4)
OVERLAP_KEYS = ["computation_us", "overlapping_us", "communication_us", "other_us"]
WAIT_KEYS = ["transfer_us", "wait_us", "unattributed_us"]


class DistributedPage(ShellPage):
    view = "distributed"

    def wait_drawn(self) -> "DistributedPage":
        """Waits until the headline is written, every chart holds Plotly SVG (or its empty note) and the view is idle."""
        self.wait_mounted()
        expect(self.root()).to_be_visible()
        expect(self.part("straggler-headline")).not_to_be_empty()
        for chart in ("delay-chart", "overlap-chart", "wait-chart", "comparison-chart"):
            expect(self.part(chart).locator(".main-svg, p.empty").first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        return self

    def chart_data(self, testid: str) -> list[dict]:
        """The traces Plotly drew in a chart (its `data`), as JSON."""
        return json.loads(self.part(testid).evaluate("(node) => JSON.stringify(node.data)"))

    def chart_us(self, testid: str) -> dict[str, list[float | None]]:
        """Each trace's y values back in microseconds (the chart records its unit's divisor)."""
        divisor = float(self.part(testid).get_attribute("data-divisor"))
        return {t["name"]: [None if y is None else y * divisor for y in t["y"]] for t in self.chart_data(testid)}

    def step_picker(self) -> Locator:
        return self.part("step-picker")

    def rank_picker(self) -> Locator:
        return self.part("rank-picker")

    def column(self, table: str, label: str) -> list[str]:
        """The texts of the column whose header reads `label` (sort arrows left out)."""
        node = self.part(table)
        headers = [" ".join(h.split()).rstrip("▲▼ ") for h in node.locator("thead th").all_inner_texts()]
        index = headers.index(label) + 1
        return node.locator(f"tbody tr td:nth-child({index})").all_inner_texts()


def sel(run: Run) -> str:
    return f"run={run.name}&span=1"


def fmt_us(us: float) -> str:
    """format.js's formatUs for 1 ms <= us < 1 s."""
    ms = us / 1e3
    return f"{round(ms)} ms" if ms >= 100 else f"{ms:.1f} ms" if ms >= 10 else f"{ms:.2f} ms"


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


def values_at(entry: dict, step: str | None) -> dict:
    return entry["average"] if step is None else next(s for s in entry["steps"] if s["step"] == step)


def workers_of(api, run: Run) -> list[str]:
    return next(r for r in api("/api/runs")["runs"] if r["name"] == run.name)["workers"]


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@pytest.fixture
def dist(page, server) -> DistributedPage:
    return DistributedPage(page, server)


@pytest.fixture
def drawn(loaded_page, server):
    """`drawn(run)`: the view of `run` as first drawn, loaded once for the module's tests that only read it."""
    return lambda run: DistributedPage(loaded_page(f"{server}/distributed?{sel(run)}"), server).wait_drawn()


@pytest.mark.parametrize("run", RANKED_RUNS)
def test_distributed_headline_names_rank_1(drawn, api, shots, run):
    data = api(f"/api/distributed?{sel(run)}")
    s = data["stragglers"]
    assert [r["rank"] for r in s["stragglers"]] == [1], "the run's straggler is rank 1"
    worker = next(r["worker"] for r in data["ranks"] if r["rank"] == 1)
    straggler = s["stragglers"][0]
    dist = drawn(run)

    headline = dist.part("straggler-headline")
    expect(headline).to_have_attribute("data-ranks", "1")
    expect(headline).to_have_attribute("data-tone", "alert")
    expect(headline).to_have_text(
        f"Rank 1 ({worker}) holds the others up {fmt_us(straggler['held_per_step_us'])} a step and arrives a median "
        f"{fmt_us(straggler['median_delay_us'])} (up to {fmt_us(straggler['max_delay_us'])}) after the first rank, "
        f"last at {straggler['times_last']} of {s['decided']} collectives.")

    # One table row per rank, rank 1's marked; the chart's delay bars are the API's medians.
    rows = dist.part("rank-table").locator("tbody tr")
    expect(rows).to_have_count(len(s["ranks"]))
    expect(rows.nth(1)).to_contain_text("straggler")
    expect(dist.part("rank-table").locator("tbody tr", has_text="straggler")).to_have_count(1)
    bars = dist.chart_us("delay-chart")
    assert all(close(a, r["median_delay_us"]) for a, r in zip(bars["Median arrival delay"], s["ranks"]))
    (delay, step) = dist.chart_data("delay-chart")
    assert delay["x"] == [f"Rank {r['rank']}" for r in s["ranks"]]
    assert step["yaxis"] == "y2" and len(step["y"]) == len(s["ranks"])

    # The worst occurrences, widest spread first; Trace opens the last rank's own trace.
    occurrences = sorted(s["occurrences"], key=lambda o: -o["spread_us"])[:10]
    occ_rows = dist.part("occurrence-table").locator("tbody tr")
    expect(occ_rows).to_have_count(len(occurrences))
    assert dist.column("occurrence-table", "Spread") == [fmt_us(o["spread_us"]) for o in occurrences]
    assert dist.column("occurrence-table", "Call")[0] == f"#{occurrences[0]['index'] + 1}"
    href = occ_rows.first.locator(css_testid("trace-link")).get_attribute("href")
    last_worker = next(r["worker"] for r in data["ranks"] if r["rank"] == occurrences[0]["last_ranks"][0])
    query = {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}
    assert urlparse(href).path == "/trace"
    assert (query["run"], query["worker"], query["span"]) == (run.name, last_worker, "1")
    arrival = next(a for a in occurrences[0]["arrivals"] if a["rank"] == occurrences[0]["last_ranks"][0])
    # The window holds the late call and, before it, the time the others waited.
    assert float(query["start_us"]) <= arrival["start_us"] - occurrences[0]["spread_us"]
    assert arrival["end_us"] < float(query["end_us"]) < arrival["end_us"] + occurrences[0]["spread_us"]

    expect(dist.part("unaligned-note")).to_be_hidden()
    dist.screenshot(shots, f"distributed_{run.name}", full=True)
    assert dist.page.errors == []


@pytest.mark.parametrize("run", each(STRAGGLER, FSDP))
def test_distributed_collectives_card_shows_the_report_and_delay_map(drawn, api, shots, run):
    data = api(f"/api/distributed?{sel(run)}")
    report = sorted(data["collectives"], key=lambda r: -r["transfer_us"])
    assert report, "the run's collectives are matched"
    dist = drawn(run)
    expect(dist.part("delay-map").locator(".main-svg").first).to_be_attached()
    expect(dist.part("collective-table").locator("tbody tr")).to_have_count(len(report))
    assert dist.column("collective-table", "Type") == [r["type"] for r in report]
    assert dist.column("collective-table", "Count") == [f"{r['count']:,}" for r in report]
    assert dist.column("collective-table", "busbw") == [f"{r['busbw_gbps']:.1f} GB/s" if r["busbw_gbps"] >= 10
                                                        else f"{r['busbw_gbps']:.2f} GB/s" for r in report]
    # The heat map: a row per rank, a column per mapped collective, the API's delays in the chart's unit.
    delays = data["delay_map"]
    (heat,) = dist.chart_data("delay-map")
    divisor = float(dist.part("delay-map").get_attribute("data-divisor"))
    assert heat["y"] == [f"Rank {first}" for first, _ in delays["rows"]]
    assert heat["x"] == [f"#{c['match']}" for c in delays["columns"]]
    assert all(close(None if z is None else z * divisor, v)
               for zs, vs in zip(heat["z"], delays["delay_us"]) for z, v in zip(zs, vs))
    dist.part("collectives-card").screenshot(path=str(shots / f"distributed_collectives_{run.name}.png"))
    assert dist.page.errors == []


@pytest.mark.parametrize("run", RANKED_RUNS)
def test_distributed_rank_charts_match_the_api_and_follow_the_step_picker(dist, api, run):
    data = api(f"/api/distributed?{sel(run)}")
    dist.open(sel(run)).wait_drawn()
    ranks = [f"Rank {r['rank']}" for r in data["overlap"]]
    assert len(ranks) == len(workers_of(api, run))

    def check(step: str | None) -> None:
        overlap = dist.chart_data("overlap-chart")
        assert [t["name"] for t in overlap] == ["Computation", "Overlapping", "Communication", "Other"]
        assert all(t["x"] == ranks for t in overlap), "one bar group per rank"
        got = dist.chart_us("overlap-chart")
        for name, key in zip(got, OVERLAP_KEYS):
            assert all(close(v, values_at(r, step)[key]) for v, r in zip(got[name], data["overlap"])), (step, key)
        wait = dist.chart_us("wait-chart")
        for name, key in zip(wait, WAIT_KEYS):
            assert all(close(v, values_at(r, step)[key]) for v, r in zip(wait[name], data["wait"])), (step, key)

    expect(dist.step_picker()).to_have_value("")
    options = dist.step_picker().locator("option").all_inner_texts()
    steps = [s["step"] for s in data["overlap"][0]["steps"]]
    assert options == ["All steps (average)", *[f"Step {s}" for s in steps]]
    check(None)

    last = steps[-1]
    dist.step_picker().select_option(last)
    expect(dist.part("overlap-chart")).to_have_attribute("data-step", last)
    expect(dist.part("wait-chart")).to_have_attribute("data-step", last)
    check(last)
    assert dist.query()["step"] == last
    assert values_at(data["overlap"][0], last)["computation_us"] != data["overlap"][0]["average"]["computation_us"]

    # A deep link restores the step.
    dist.page.reload()
    dist.wait_drawn()
    expect(dist.step_picker()).to_have_value(last)
    check(last)

    # Step comparison: the Overview's categories, each rank's averages.
    got = dist.chart_us("comparison-chart")
    labels = {"Kernel": "kernel_us", "Memcpy": "memcpy_us", "Memset": "memset_us", "Communication": "communication_us",
              "Runtime": "runtime_us", "DataLoader": "dataloader_us", "CPU Exec": "cpu_exec_us", "Other": "other_us"}
    assert {"Kernel", "Communication", "CPU Exec"} <= set(got)
    for name, values in got.items():
        assert all(close(v, r["average"][labels[name]]) for v, r in zip(values, data["comparison"])), name
    assert dist.page.errors == []


@pytest.mark.parametrize("run", RANKED_RUNS)
def test_distributed_comm_ops_follow_the_rank_picker(dist, api, run):
    data = api(f"/api/distributed?{sel(run)}")
    dist.open(sel(run)).wait_drawn()
    expect(dist.rank_picker()).to_have_value("0")
    last = str(len(data["ranks"]) - 1)

    def calls_of(rank: int) -> dict[str, str]:
        rows = next(e["rows"] for e in data["comm_ops"] if e["rank"] == rank)
        return {r["name"]: f"{r['calls']:,}" for r in rows}

    def shown() -> dict[str, str]:
        return dict(zip(dist.column("comm-ops", "Name"), dist.column("comm-ops", "Calls")))

    assert shown() == calls_of(0)
    assert dist.column("comm-ops", "Total latency")[0] != ""
    dist.rank_picker().select_option(last)
    expect(dist.part("comm-ops")).to_have_attribute("data-rank", last)
    assert shown() == calls_of(int(last))
    assert dist.query()["rank"] == last
    dist.page.reload()
    dist.wait_drawn()
    expect(dist.rank_picker()).to_have_value(last)
    assert dist.page.errors == []


@pytest.mark.parametrize("run", RANKED_RUNS)
def test_distributed_topology_lists_every_gpu(drawn, api, run):
    data = api(f"/api/distributed?{sel(run)}")
    dist = drawn(run)
    processes = [p for n in data["topology"] for p in n["processes"]]
    gpus = [g for p in processes for g in p["gpus"]]
    n = len(workers_of(api, run))  # one GPU per rank
    assert len(gpus) == n
    expect(dist.part("topology").locator(css_testid("topology-process"))).to_have_count(n)
    chips = dist.part("topology").locator(css_testid("topology-gpu"))
    expect(chips).to_have_count(n)
    assert sorted(chips.evaluate_all("(nodes) => nodes.map((n) => Number(n.dataset.device))")) == \
        sorted(g["device"] for g in gpus)
    for text in chips.all_inner_texts():
        assert gpus[0]["name"] in text and f"CC {gpus[0]['compute_capability']}" in text
    rank = data["ranks"][0]
    expect(dist.part("topology-meta")).to_contain_text(
        f"{counted(n, 'rank')} · {counted(len(data['topology']), 'node')} · {counted(n, 'GPU')} · "
        f"world size {rank['world_size']} · {rank['backend']}")
    # The process groups from distributedInfo; with one group, the occurrences need no group column.
    groups = dist.part("process-groups").locator(css_testid("process-group"))
    expect(groups).to_have_count(len(data["groups"]))
    g = data["groups"][0]
    ranks = f"0–{n - 1}" if n > 2 else ", ".join(map(str, range(n)))  # three or more in a row as a range
    expect(groups.first).to_have_text(f"{g['name']} ({g['description']}): {n} ranks ({ranks})")
    assert "Group" not in dist.part("occurrence-table").locator("thead th").all_inner_texts()
    assert dist.page.errors == []


def test_distributed_fsdp_notes_unequal_call_counts(drawn, api):
    data = api(f"/api/distributed?{sel(FSDP)}")
    mismatches = data["stragglers"]["unaligned"]["count_mismatches"]
    assert mismatches, "FSDP's ranks split their gathers differently over the steps"
    dist = drawn(FSDP)
    note = dist.part("unaligned-note")
    expect(note).to_be_visible()
    items = note.locator("li")
    alone = [c for c in data["stragglers"]["unaligned"]["calls"] if c["unaligned"]]
    expect(items).to_have_count(len(mismatches) + (1 if alone else 0))
    for m in mismatches:
        counts = " and ".join(f"rank {c['rank']} {c['calls']}" for c in m["calls"])
        expect(note).to_contain_text(f"{m['name']}: the ranks made different numbers of calls ({counts})")
    # The view still draws everything else.
    worker = next(r["worker"] for r in data["ranks"] if r["rank"] == 1)
    expect(dist.part("straggler-headline")).to_contain_text(f"Rank 1 ({worker}) holds the others up")
    expect(dist.part("overlap-chart").locator(".main-svg").first).to_be_attached()
    # API warnings are shown.
    expect(dist.part("warnings")).to_be_visible()
    expect(dist.part("warnings").locator("li")).to_have_count(len(data["warnings"]))
    assert dist.page.errors == []


def test_distributed_worker_select_is_off_here_only(dist, page, server, api):
    named = workers_of(api, STRAGGLER)[1]  # not the first: the Overview must keep the one named
    dist.open(f"run={STRAGGLER_RUN}&worker={named}&span=1").wait_drawn()
    worker = dist.select("worker")
    expect(worker).to_be_disabled()
    expect(worker).to_have_attribute("title", "This view shows every worker")
    expect(worker.locator("option")).to_have_text(["All workers"])
    query = dist.query()
    assert query.get("run") == STRAGGLER_RUN and query.get("span") == "1" and "worker" not in query
    expect(dist.select("span")).to_be_enabled()

    # Back to the Overview: the worker select works again and the worker the link named is kept.
    dist.choose("view", "overview")
    page.wait_for_url("**/overview?**")
    overview = OverviewPage(page, server).wait_drawn()
    expect(overview.select("worker")).to_be_enabled()
    expect(overview.select("worker")).not_to_have_attribute("title", "This view shows every worker")
    assert overview.query() == {"run": STRAGGLER_RUN, "worker": named, "span": "1"}

    # From the Overview, the view select opens this view without a worker.
    overview.choose("view", "distributed")
    page.wait_for_url("**/distributed?**")
    dist.wait_drawn()
    assert dist.query() == {"run": STRAGGLER_RUN, "span": "1"}
    assert page.errors == []


def test_distributed_not_offered_for_one_worker(api, page, server):
    run = next(r for r in api("/api/runs")["runs"] if r["name"] == ONE_WORKER_RUN)
    assert len(run["workers"]) == 1 and "distributed" not in run["views"]
    for name in (STRAGGLER_RUN, FSDP_RUN):
        assert "distributed" in next(r for r in api("/api/runs")["runs"] if r["name"] == name)["views"]
    overview = OverviewPage(page, server).open(RESNET.sel()).wait_drawn()
    expect(overview.select("view").locator('option[value="distributed"]')).to_have_count(0)
    overview.choose("run", STRAGGLER_RUN)
    expect(overview.select("view").locator('option[value="distributed"]')).to_have_count(1)
    assert page.errors == []
