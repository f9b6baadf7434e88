"""The `straggler` rule on synthetic DDP ranks (synth.ddp_rank: steps of 2000 us, three
all-reduces a step whose kernels end together on every rank)."""

from __future__ import annotations

from profboard.server.analysis.distributed import distributed
from profboard.server.analysis.overview import overview
from profboard.server.analysis.rules.straggler import straggler
from synth import ddp_rank, parse

WORKERS = ("worker0", "worker1", "worker2", "worker3")


def findings(late: dict[int, float], on: int = 0) -> list[dict]:
    """The rule's findings on rank `on` of four, rank r entering every all-reduce late[r] us late."""
    ranks = {name: ddp_rank(r, late) for r, name in enumerate(WORKERS)}
    view = distributed({name: parse(t.build()) for name, t in ranks.items()})
    return straggler([], view, WORKERS[on])


def test_a_late_rank_is_named_with_what_the_others_lose():
    # Rank 2 enters each all-reduce 400 us late: ranks 0, 1, 3 wait 3 x 400 = 1200 us of a
    # 2000 us step (60%): high. It is last at all 6 all-reduces.
    (found,) = findings({2: 400.0})
    assert found["severity"] == "high"
    assert found["title"].startswith("Rank 2 (worker2) reaches the collectives late (6 of 6")
    n = found["numbers"]
    assert n["straggler_ranks"] == [2] and n["times_last"] == 6 and n["decided"] == 6 and n["this_rank"] == 0
    assert n["median_delay_us"] == 400.0 and n["others_wait_us"] == 1200.0 and n["wait_share_ratio"] == 0.6
    # Evidence: rank 0's own all-reduce kernels, on its clock, each spanning the 400 us wait.
    assert len(found["evidence"]) == 3
    for item in found["evidence"]:
        assert item["kind"] == "collective" and "last rank 2" in item["label"]
        assert item["end_us"] - item["start_us"] == 400.0 + 50.0 and item["this_rank_delay_us"] == 0.0


def test_read_on_the_straggler_itself():
    (found,) = findings({2: 400.0}, on=2)
    assert found["title"].startswith("This rank is the straggler: last into 6 of 6 collectives")
    assert found["numbers"]["this_rank"] == 2
    assert all(item["this_rank_delay_us"] == 400.0 for item in found["evidence"])


def test_a_small_delay_is_not_worth_a_finding():
    # 30 us late: the others wait 3 x 30 = 90 us of 2000 (4.5%), under WAIT_SHARE (5%).
    assert findings({1: 30.0}) == []
    # 40 us: 120 us (6%): medium.
    (found,) = findings({1: 40.0})
    assert found["severity"] == "medium" and found["numbers"]["wait_share_ratio"] == 0.06
    # the saving: the others' wait (120 us) of their step; medium from 2 % of it
    assert (found["saving_us"], found["saving_ratio"]) == (120.0, 0.06)


def test_ranks_late_together_are_named_together():
    # Ranks 1 and 3 are equally late: each is last at every collective (a tie), so both are
    # named, and the others (0, 2) wait for them.
    (found,) = findings({1: 300.0, 3: 300.0})
    assert found["numbers"]["straggler_ranks"] == [1, 3]
    assert found["title"].startswith("Rank 1 (worker1) and rank 3 (worker3) reach the collectives late")
    assert findings({}) == []       # nobody late: no order decided


def test_one_worker_never_gets_the_finding():
    found = overview(parse(ddp_rank(0, {0: 400.0}).build()))["recommendations"]
    assert "straggler" not in {f["id"] for f in found}


def test_each_straggler_quotes_its_own_numbers():
    # Ranks 1 and 3 come 300 and 300.5 us late (a tie: both last everywhere, both named). Read
    # on each, the finding quotes that rank's delay; read on rank 0, the one holding up longest.
    late = {1: 300.0, 3: 300.5}
    on = {r: findings(late, on=r)[0]["numbers"] for r in (0, 1, 3)}
    assert {r: (n["quoted_rank"], n["median_delay_us"]) for r, n in on.items()} == {
        0: (3, 300.5), 1: (1, 300.0), 3: (3, 300.5)}
    assert all(n["straggler_ranks"] == [1, 3] for n in on.values())
