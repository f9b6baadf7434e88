"""Per-rank measures over every rank (server/analysis/rankdist.py): worst ranks, missing ranks and
runs of rank numbers, on rows small enough to check by hand."""

from __future__ import annotations

import pytest

from profboard.server.analysis.distributed import distributed
from profboard.server.analysis.rankdist import missing_ranks, rank_measures, rank_runs, worst_ranks
from synth import ddp_rank, parse


@pytest.mark.parametrize("ranks, text", [
    ([], ""), ([4], "4"), ([3, 1, 2], "1–3"), ([0, 1, 3, 4], "0, 1, 3, 4"),
    ([0, 1, 2, 3, 5, 7, 8, 1], "0–3, 5, 7, 8"),
], ids=["none", "one", "run", "pairs-stay-listed", "mixed-and-repeated"])
def test_rank_runs(ranks, text):
    assert rank_runs(ranks) == text


ROWS = [  # rank, step_us, wait_us, delay_us
    {"rank": 0, "step_us": 10.0, "wait_us": 5.0, "delay_us": None},
    {"rank": 1, "step_us": 30.0, "wait_us": 1.0, "delay_us": 2.0},
    {"rank": 2, "step_us": 30.0, "wait_us": None, "delay_us": 9.0},
    {"rank": 3, "step_us": 20.0, "wait_us": 5.0, "delay_us": 0.0},
]


@pytest.mark.parametrize("sort, top, expected", [
    ("step", 2, [1, 2]),       # 30 = 30: the lower rank first
    ("step", 9, [1, 2, 3, 0]),
    ("wait", 4, [0, 3, 1, 2]),  # None last
    ("delay", 3, [2, 1, 3]),
], ids=["step-tie", "step-all", "wait-none-last", "delay"])
def test_worst_ranks(sort, top, expected):
    assert worst_ranks(ROWS, sort, top) == expected


def test_missing_ranks_below_the_largest_world_size():
    ids = [{"rank": 0, "world_size": 4}, {"rank": 2, "world_size": 6}, {"rank": 3, "world_size": None}]
    assert missing_ranks(ids) == [1, 4, 5]


def test_measures_add_overlapped_time_and_divide_waiting():
    overlap = [{"rank": 0, "worker": "w0", "average": {"total_us": 100.0, "computation_us": 50.0,
                                                       "overlapping_us": 10.0, "communication_us": 20.0}}]
    wait = [{"rank": 0, "average": {"communication_us": 30.0, "wait_us": 12.0}}]
    [row] = rank_measures(overlap, wait, [{"rank": 0, "median_delay_us": 4.0}])
    # computation 50 + 10 overlapped; waiting 12 of 30 us of communication
    assert row == {"rank": 0, "worker": "w0", "step_us": 100.0, "computation_us": 60.0, "communication_us": 30.0,
                   "wait_us": 12.0, "wait_ratio": 0.4, "delay_us": 4.0}


def test_distributed_names_ranks_without_a_trace():
    view = distributed({f"worker{r}": parse(ddp_rank(r, world=6).build()) for r in (0, 2, 3)})
    assert view["missing_ranks"] == [1, 4, 5]
    assert "ranks 1, 4, 5 of world size 6 have no trace in this span: left out" in view["warnings"]
    assert [r["rank"] for r in view["distribution"]] == [0, 2, 3]


def _late_call(rank: int, world: int):
    """A rank whose extra all-reduce comes after its two steps: a warning of its own."""
    t = ddp_rank(rank, world=world)
    t.collective(9000, 40, 9010, 50, nelems=10, device=rank)
    return t


@pytest.mark.parametrize("world, names", [
    (6, "w0, w1, w2, w3, w4, w5"),
    (8, "w0, w1, w2, w3, w4, w5 and 2 other workers"),  # six named, the rest counted
], ids=["six-named", "eight-counted"])
def test_shared_worker_warning_names_six_workers(world, names):
    view = distributed({f"w{r}": parse(_late_call(r, world).build()) for r in range(world)})
    assert f"{names}: 1 collective call(s) lie outside every step" in view["warnings"]
