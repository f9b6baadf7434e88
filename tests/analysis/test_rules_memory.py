"""memory_near_limit on small synthetic traces (capacity 1000 bytes)."""

from __future__ import annotations

import pytest

from profboard.server.analysis.rules.memory import memory_near_limit
from synth import Trace, rule_context


def trace(allocated: int, reserved: int, capacity: int | None = 1000) -> Trace:
    t = Trace()
    if capacity is not None:
        t.device(0, memory_bytes=capacity)
    t.step(1, 0, 100)
    t.op("aten::empty", 10, 10, external_id=101)
    t.launch(12, 2, 20, 10, external_id=101)
    t.memory(11, 100, 0x10, total_allocated=100, total_reserved=200)
    t.memory(15, allocated - 100, 0x20, total_allocated=allocated, total_reserved=reserved)
    t.memory(30, -(allocated - 100), 0x20, total_allocated=100, total_reserved=reserved)
    return t


def test_allocated_over_ninety_percent():
    ctx = rule_context(trace(950, 980))
    [found] = memory_near_limit(ctx)
    assert found["severity"] == "medium"
    assert found["numbers"] == {"device": "GPU0", "peak_allocated_bytes": 950, "peak_reserved_bytes": 980,
                                "capacity_bytes": 1000, "allocated_ratio": 0.95, "reserved_ratio": 0.98}
    assert found["thresholds"] == {"near_limit_ratio": 0.9}
    # a risk, not step time: no saving claimed, so the rule's severity stands
    assert (found["saving_us"], found["saving_ratio"]) == (None, None) and "none claimed" in found["saving_note"]
    peak, step = found["evidence"]
    assert (peak["kind"], peak["start_us"], peak["bytes"], peak["op"]) == ("memory_peak", 15, 950, "aten::empty")
    assert ctx.tables.events["name"].iloc[peak["event_id"]] == "aten::empty"
    assert step["step"] == "1"


def test_only_reserved_over_is_low():
    [found] = memory_near_limit(rule_context(trace(500, 950)))
    assert found["severity"] == "low"
    assert found["evidence"][0]["bytes"] == 950


@pytest.mark.parametrize("allocated, reserved, capacity", [
    pytest.param(850, 900, 1000, id="at-ninety-percent"),
    pytest.param(950, 980, None, id="no-capacity"),
])
def test_quiet(allocated, reserved, capacity):
    assert memory_near_limit(rule_context(trace(allocated, reserved, capacity))) == []


def test_cpu_memory_is_not_judged():
    t = trace(100, 200)
    t.memory(40, 990, 0x30, total_allocated=990, total_reserved=990, device_type=0)
    assert memory_near_limit(rule_context(t)) == []
