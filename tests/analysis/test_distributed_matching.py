"""Matching collectives across ranks without steps, and naming stragglers by size
(server/analysis/stragglers.py, definitions 1 and 4), on synth.slow_rank_run: four DDP ranks,
steps of 130 ms (100 ms of work and rank 1's 30 ms sleep), three bucket all-reduces a step
whose kernels end together on every rank."""

from __future__ import annotations

import pytest

from profboard.server.analysis.distributed import distributed
from profboard.server.analysis.rules.straggler import straggler
from synth import BUCKETS_AT, SLEEP_US, TRANSFER_US, Trace, parse, slow_rank_run

STEPS = 3


def run(traces: dict[str, Trace]) -> dict:
    return distributed({name: parse(t.build()) for name, t in traces.items()})


def test_only_the_sleeping_rank_is_named_with_its_delay():
    out = run(slow_rank_run(steps=STEPS))
    s = out["stragglers"]
    # Every all-reduce matched on all four ranks, though rank 1's steps start 30 ms later.
    assert s["collectives"] == s["decided"] == STEPS * len(BUCKETS_AT)
    assert all(u["unaligned"] == 0 for u in s["unaligned"]["calls"]) and s["unaligned"]["count_mismatches"] == []
    (named,) = s["stragglers"]
    # Rank 1 enters each all-reduce 30 ms after the others: they wait 3 x 30 ms a step for it.
    assert named["rank"] == 1 and named["median_delay_us"] == pytest.approx(SLEEP_US, rel=0.05)
    assert named["held_per_step_us"] == pytest.approx(len(BUCKETS_AT) * SLEEP_US, rel=0.05)
    assert all(r["held_per_step_us"] == 0.0 for r in s["ranks"] if r["rank"] != 1)
    assert not any("could not be matched" in w for w in out["warnings"])


def test_a_rank_whose_trace_starts_later_is_matched_from_its_first_call():
    # Rank 1's trace misses the job's first two all-reduces: its first call is the others' third
    # (by size), not their first, though it is the first of its step 1.
    out = run(slow_rank_run(steps=STEPS, missed=2))
    s = out["stragglers"]
    assert s["collectives"] == STEPS * len(BUCKETS_AT)
    present = {(o["step"], o["index"]): sorted(a["rank"] for a in o["arrivals"]) for o in s["occurrences"]}
    assert present[("1", 0)] == present[("1", 1)] == [0, 2, 3] and present[("1", 2)] == [0, 1, 2, 3]
    assert [u["unaligned"] for u in s["unaligned"]["calls"]] == [0, 0, 0, 0]   # each matched by 3 ranks
    (named,) = s["stragglers"]
    assert named["rank"] == 1 and named["median_delay_us"] == pytest.approx(SLEEP_US, rel=0.05)


def test_unmatched_calls_are_counted_in_a_warning():
    # Two ranks only: rank 1's trace misses two calls that rank 0 alone recorded.
    traces = slow_rank_run(world=2, steps=STEPS, missed=2)
    out = run(traces)
    assert [u["unaligned"] for u in out["stragglers"]["unaligned"]["calls"]] == [2, 0]
    assert any(w.startswith("2 collective call(s) could not be matched") for w in out["warnings"])


def test_matching_survives_a_skipped_call_and_repeated_steps():
    # Rank 1 skips step 2's second all-reduce: the calls after it still pair with the same
    # collective (by size, and each step's calls repeat), not one call early.
    traces = slow_rank_run(world=2, sleep_us=0, steps=STEPS)
    t = traces["worker1"]
    second = [i for i, e in enumerate(t.events) if e["name"] == "record_param_comms"][len(BUCKETS_AT) + 1]
    ext = t.events[second]["args"]["External id"]
    t.events = [e for e in t.events if e.get("args", {}).get("External id") not in (ext, ext + 1)]
    s = run(traces)["stragglers"]
    assert s["collectives"] == STEPS * len(BUCKETS_AT) - 1 and s["decided"] == 0
    assert [u["unaligned"] for u in s["unaligned"]["calls"]] == [1, 0]


def test_per_step_parts_add_up_to_communication():
    out = run(slow_rank_run(steps=STEPS))
    for rank in out["wait"]:
        for step in rank["steps"]:
            assert step["transfer_us"] + step["wait_us"] + step["unattributed_us"] == pytest.approx(
                step["communication_us"], abs=0.01)
            assert step["transfer_us"] + step["wait_us"] <= step["communication_us"] + 1e-6
    wait = {w["rank"]: w["average"] for w in out["wait"]}
    assert wait[1]["wait_us"] == 0.0 and wait[1]["transfer_us"] == len(BUCKETS_AT) * TRANSFER_US
    assert wait[0]["wait_us"] == pytest.approx(len(BUCKETS_AT) * SLEEP_US, abs=1.0)


def test_a_rank_slightly_late_is_not_named():
    # Rank 3 enters every all-reduce 79 us late: last every time, but 79 us of a 100 ms step
    # is far under DELAY_SHARE (1%): nobody is named (it was, by how often it came last).
    out = run(slow_rank_run(sleep_us=79, steps=STEPS, slow=3))
    s = out["stragglers"]
    assert {r["rank"]: r["times_last"] for r in s["ranks"]}[3] == STEPS * len(BUCKETS_AT)
    assert s["stragglers"] == []


@pytest.mark.parametrize("on", [0, 1, 3])
def test_each_rank_reads_the_straggler_with_the_right_numbers(on):
    out = run(slow_rank_run(steps=STEPS))
    (found,) = straggler([], out, f"worker{on}")
    n = found["numbers"]
    assert n["straggler_ranks"] == [1] and n["quoted_rank"] == 1 and n["this_rank"] == on
    assert found["title"].startswith("This rank is the straggler" if on == 1 else "Rank 1 (worker1) reaches")
    assert "a median 30.0 ms after the first rank" in found["title"]
