"""The Distributed view's shaping at many ranks (web/static/js/lib/rankdist.js, and distview.js's
texts that name ranks), run in Chromium on small inline inputs checked by hand."""

from __future__ import annotations

import json

import pytest

from browser_pages import module_runner
from test_distributed_lib import row, stragglers

pytestmark = pytest.mark.browser


@pytest.fixture
def rd(blank_page):
    """Evaluates `expression` with lib/rankdist.js as `rd` and lib/distview.js as `dv`."""
    return module_runner(blank_page, {"rd": "lib/rankdist.js", "dv": "lib/distview.js"})


def js(value) -> str:
    return json.dumps(value)


RANKS = list(range(40))


@pytest.mark.parametrize("options, shown", [
    ({}, [3, 7, 30]),                                   # the worst, in rank order
    ({"picked": 12}, [3, 7, 12, 30]),                   # and the picked rank
    ({"picked": 99}, [3, 7, 30]),                       # a rank the run lacks is no row
    ({"all": True, "page": 2}, list(range(32, 40))),    # pages of 32
    ({"all": True, "page": 1, "picked": 35}, [*range(32), 35]),
], ids=["worst", "picked", "picked-unknown", "page-2", "page-and-picked"])
def test_shown_ranks(rd, options, shown):
    assert rd(f"rd.shownRanks({js(RANKS)}, [30, 7, 3], {js(options)})") == shown


def test_shown_text(rd):
    worst = {"sort": "wait", "measure": "wait_us", "top": 3, "ranks": [30, 7, 3]}
    assert rd(f"rd.shownText(40, [3, 7, 12, 30], {js(worst)})") == (
        "The worst 3 of 40 ranks by waiting in communication and the rank picked: 3, 7, 12, 30")
    assert rd(f"rd.shownText(3, [0, 1, 2], {js({**worst, 'ranks': [2, 0, 1]})})") == (
        "All 3 ranks, worst first by waiting in communication: 2, 0, 1")
    assert rd(f"rd.shownText(40, {js(list(range(32, 40)))}, {js(worst)}, {js({'all': True, 'page': 2})})") == (
        "Ranks 32–39 (page 2 of 2) of 40")


def test_heat_strip_scales_each_measure_to_its_own_range(rd):
    rows = [{"rank": r, "worker": f"w{r}", "step_us": s, "computation_us": 5.0, "communication_us": None,
             "wait_us": None, "wait_ratio": None, "delay_us": d} for r, s, d in ((0, 100.0, 0.0), (1, 300.0, 10.0),
                                                                                 (3, 200.0, None))]
    got = rd(f"rd.heatStrip({js(rows)}, 3)")
    [trace] = got["traces"]
    assert trace["x"] == [0, 1, 3] and trace["y"] == ["Step time", "Computation", "Arrival delay"]
    # step 100..300: 0, 1, 0.5; computation flat: 0; delay 0..10, rank 3 has none
    assert trace["z"] == [[0, 1, 0.5], [0, 0, 0], [0, 1, None]]
    assert trace["customdata"][0][2] == "Rank 3 (w3)<br>Step time: 200 us"
    [shape] = got["layout"]["shapes"]
    assert (shape["x0"], shape["x1"]) == (2.5, 3.5)


def test_node_line(rd):
    gpu = {"device": 0, "name": "NVIDIA H200", "memory_bytes": None, "compute_capability": None}
    node = {"node": "n1", "processes": [
        {"rank": r, "worker": f"w{r}", "process": "1", "gpus": [gpu] if r != 11 else [], "assumed": []}
        for r in (8, 9, 10, 11, 14)]}
    assert rd(f"rd.nodeLine({js(node)})") == "ranks 8–11, 14 · 5 processes · 4× NVIDIA H200"


def test_many_stragglers_are_counted_not_listed(rd):
    ranks = [row(r, 9, 3550.0 + r, 1, 3600, held=400.0 + 10 * r) if r % 2 else row(r) for r in range(20)]
    got = rd(f"dv.stragglerHeadline({js(stragglers(ranks, set(range(1, 20, 2)), collectives=9, decided=9))})")
    assert got["text"] == ("10 ranks (1, 3, 5, 7, 9, 11, … (4 more)) hold the others up 410 us to 590 us a step and "
                           "arrive a median 3.55 ms to 3.57 ms after the first rank.")
    assert got["ranks"] == list(range(1, 20, 2))
    assert rd("dv.lastText([1, 2, 3, 4, 5, 6, 7, 9])") == "8 ranks: 1–7, 9"
    assert rd("dv.lastText([1, 3])") == "Rank 1, Rank 3"
    assert rd("dv.lastText([])") == "tie"
