"""optree.nest against the stack walk it replaced (tests/analysis/test_nest.py), on the intervals the
analyses pass it for every shared trace."""

from __future__ import annotations

from analysis.test_nest import assert_nests_like_stack, recorded_nest_calls
from shared_traces import TORCH2_RUNS, every_trace


@every_trace(*TORCH2_RUNS, "kineto_samples/resnet50_num_workers_0", "kineto_samples/resnet50_num_workers_4")
def test_nest_agrees_with_the_stack_on_shared_traces(fixture_trace, monkeypatch):
    calls = recorded_nest_calls(fixture_trace.tables, monkeypatch)
    assert {"optree", "timeline"} <= set(calls)
    for group, start, end in (c for per_module in calls.values() for c in per_module):
        assert_nests_like_stack(group, start, end)
