"""The Distributed view at many ranks, in Chromium: a run of 40 ranks made from tests/data
(tests/rankset.py: twenty nodes of two, rank 13 a garbage file, ranks 38 and 39 never written)
shows the worst 16 ranks, a heat strip over all of them whose click adds a rank's row, every rank
page by page when asked, one folded line per node (the first twelve until asked), and the missing ranks named as a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from browser_pages import css_testid
from rankset import write_ranks
from serving import serving
from test_distributed import DistributedPage

pytestmark = pytest.mark.browser

DATA = Path(__file__).resolve().parents[1] / "data"
RUN = "ranks_40"
WORLD = 40
GARBAGE_RANK = 13
NEVER_WRITTEN = {38, 39}
HELD = [r for r in range(WORLD) if r not in NEVER_WRITTEN | {GARBAGE_RANK}]
TOP = 16


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory):
    """Base URL of a `profboard` serving the 40-rank run alone."""
    logdir = tmp_path_factory.mktemp("ranks_logdir")
    written = write_ranks(DATA / "h200x2" / "ddp_straggler_rank1", logdir / RUN, WORLD, per_node=2,
                          skip=NEVER_WRITTEN)
    next(p for p in written if f"_{10000 + GARBAGE_RANK}." in p.name).write_bytes(b"\x00 no trace {")
    log = tmp_path_factory.mktemp("ranks_server") / "profboard.log"
    with serving(logdir, tmp_path_factory.mktemp("ranks_cache"), log, [RUN], timeout_s=240) as base:
        yield base


@pytest.fixture
def dist(page, many) -> DistributedPage:
    return DistributedPage(page, many)


def api(dist: DistributedPage, query: str) -> dict:
    return json.loads(dist.page.evaluate("(url) => fetch(url).then((r) => r.text())", f"/api/distributed?{query}"))


def shown_ranks(dist: DistributedPage) -> list[int]:
    return [int(r) for r in dist.root().get_attribute("data-shown-ranks").split(",")]


def table_ranks(dist: DistributedPage) -> list[int]:
    texts = dist.part("rank-table").locator("tbody tr td:first-child").all_inner_texts()
    return [int(t.split()[1]) for t in texts]


def test_distributed_ranks_worst_16_and_the_strip(dist, shots):
    dist.open(f"run={RUN}&span=1").wait_drawn()
    data = api(dist, f"run={RUN}&span=1&top={TOP}")
    worst = sorted(data["worst"]["ranks"])
    assert len(worst) == TOP
    assert shown_ranks(dist) == worst
    assert table_ranks(dist) == worst
    # Every per-rank chart has the worst ranks' bars only.
    for chart in ("overlap-chart", "comparison-chart", "delay-chart"):
        assert dist.chart_data(chart)[0]["x"] == [f"Rank {r}" for r in worst], chart
    expect(dist.part("shown-ranks")).to_contain_text(f"The worst {TOP} of {len(HELD)} ranks by step time")
    [strip] = dist.chart_data("rank-strip")
    assert strip["type"] == "heatmap" and strip["x"] == HELD
    assert strip["y"] == ["Step time", "Computation", "Communication", "Waiting share", "Arrival delay"]
    assert all(v is None or 0 <= v <= 1 for row in strip["z"] for v in row)
    # Missing and unreadable ranks are warnings, not errors.
    warnings = dist.part("warnings")
    expect(warnings).to_contain_text("ranks 13, 38, 39 of world size 40 have no trace in this span")
    expect(warnings).to_contain_text(f"node006_{10000 + GARBAGE_RANK}")
    expect(dist.part("ranks-meta")).to_have_text(f"{len(HELD)} ranks · 3 missing")
    expect(dist.error()).to_be_hidden()
    dist.page.screenshot(path=str(shots / "distributed-40-ranks.png"), full_page=True)
    assert not dist.page.errors


def test_distributed_ranks_click_in_the_strip_adds_its_row(dist):
    dist.open(f"run={RUN}&span=1").wait_drawn()
    outside = next(r for r in HELD if r not in shown_ranks(dist))
    strip = dist.part("rank-strip")
    x, y = strip.evaluate("""(node, rank) => {
        const xa = node._fullLayout.xaxis, ya = node._fullLayout.yaxis;
        return [xa._offset + xa.l2p(rank), ya._offset + ya._length / 2];
    }""", outside)
    box = strip.bounding_box()
    dist.page.mouse.click(box["x"] + x, box["y"] + y)
    expect(dist.part("rank-table").locator("tbody tr.dist-row-picked")).to_contain_text(f"Rank {outside}")
    assert outside in table_ranks(dist) and len(table_ranks(dist)) == TOP + 1
    assert dist.query()["rank"] == str(outside)
    expect(dist.rank_picker()).to_have_value(str(outside))
    assert not dist.page.errors


def test_distributed_ranks_all_ranks_page_by_page(dist):
    dist.open(f"run={RUN}&span=1").wait_drawn()
    dist.part("all-ranks").click()
    expect(dist.part("all-ranks")).to_have_attribute("aria-pressed", "true")
    expect(dist.part("rank-table").locator("tbody tr")).to_have_count(32)
    assert table_ranks(dist) == HELD[:32]
    dist.part("ranks-next").click()
    expect(dist.part("rank-table").locator("tbody tr")).to_have_count(len(HELD) - 32)
    assert table_ranks(dist) == HELD[32:]
    assert dist.query()["ranks"] == "all" and dist.query()["rank_page"] == "2"
    expect(dist.part("ranks-next")).to_be_disabled()
    # A reload restores the page.
    dist.page.reload()
    dist.wait_drawn()
    assert table_ranks(dist) == HELD[32:]
    assert not dist.page.errors


def test_distributed_ranks_sort_by_delay_asks_again(dist):
    dist.open(f"run={RUN}&span=1").wait_drawn()
    dist.part("sort-picker").select_option("delay")
    expect(dist.part("shown-ranks")).to_contain_text("by arrival delay")
    dist.wait_drawn()
    data = api(dist, f"run={RUN}&span=1&top={TOP}&sort=delay")
    assert dist.query()["sort"] == "delay"
    assert shown_ranks(dist) == sorted(data["worst"]["ranks"])
    assert not dist.page.errors


def test_distributed_ranks_topology_folds_nodes(dist):
    dist.open(f"run={RUN}&span=1").wait_drawn()
    topology = dist.part("topology")
    nodes = topology.locator(css_testid("topology-node"))
    expect(nodes).to_have_count(12)
    expect(topology.locator(css_testid("topology-process"))).to_have_count(0)
    node = nodes.nth(6)  # node006: ranks 12 and 13, 13 unreadable
    expect(node.locator(css_testid("topology-node-line"))).to_have_text(" · ranks 12 · 1 process · 1× NVIDIA H200")
    node.locator("summary").click()
    expect(node.locator(css_testid("topology-process"))).to_have_count(1)
    expect(topology.locator(css_testid("topology-process"))).to_have_count(1)
    more = dist.part("all-nodes")
    expect(more).to_have_text("Show the other 7 nodes")  # 19 nodes: ranks 38 and 39 were never written
    more.click()
    expect(nodes).to_have_count(19)
    expect(more).to_have_count(0)
    assert not dist.page.errors
