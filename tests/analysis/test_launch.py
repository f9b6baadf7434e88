"""Launch-overhead analysis and the launch_bound rule on small synthetic steps (us)."""

from __future__ import annotations

import pytest

from profboard.server.analysis.launch import launch_overhead
from profboard.server.analysis.rules.launch import launch_bound
from synth import Trace, parse, rule_context


def three_launches(t: Trace) -> None:
    """Step 1 (0..100): two runtime launches and a driver launch; kernels of 2, 20 and 1 us."""
    t.step(1, 0, 100)
    t.launch(10, 10, 22, 2)                 # 10 us call, 2 us kernel: short
    t.launch(20, 10, 40, 20)                # 10 us call, 20 us kernel
    t.launch(60, 6, 70, 1, driver=True)     # 6 us call, 1 us kernel: short


def test_idle_while_launching_and_short_kernels():
    t = Trace()
    three_launches(t)
    tables = parse(t.build())
    out = launch_overhead(tables)
    [step] = out["steps"]
    # busy 2 + 20 + 1 = 23; launching 10..30 and 60..66 = 26;
    # idle inside calls: 10..22 + 24..30 + 60..66 = 12 + 6 + 6 = 24 of 100
    assert step == {"step": "1", "start_us": 0, "end_us": 100, "total_us": 100, "gpu_busy_us": 23,
                    "gpu_idle_us": 77, "launching_us": 26, "idle_launching_us": 24, "idle_launching_ratio": 0.24,
                    "launches": 3, "kernels": 3, "short_kernels": 2, "short_kernel_us": 3}
    summary = out["summary"]
    assert (summary["short_kernels"], summary["short_kernel_ratio"]) == (2, round(2 / 3, 6))
    assert summary["kernel_to_launch_ratio"] == round(23 / 26, 6)
    assert summary["gpu_busy_ratio"] == 0.23
    # the worst: the first launch exceeds its kernel by 10 - 2 = 8, the driver launch by 6 - 1 = 5
    assert [(w["kernel_us"], w["launch_us"]) for w in out["worst"]] == [(2, 10), (1, 6)]
    names = tables.events["name"]
    assert names.iloc[out["worst"][0]["event_id"]] != "cudaLaunchKernel"
    assert names.iloc[out["worst"][0]["launch_event_id"]] == "cudaLaunchKernel"
    assert names.iloc[out["worst"][1]["launch_event_id"]] == "cuLaunchKernel"
    assert (out["worst"][0]["start_us"], out["worst"][0]["end_us"]) == (10, 24)


def test_graph_launch_kernels_are_not_compared_one_by_one():
    t = Trace()
    t.step(1, 0, 100)
    corr = t.runtime("cudaGraphLaunch", 10, 20)
    for start in (30, 32, 34):
        t.kernel("triton_poi_fused_relu_0", start, 1, correlation=corr)
    out = launch_overhead(parse(t.build()))
    [step] = out["steps"]
    # the graph launch is a launch call (10..30 idle: 20 us) but its kernels are not "short"
    assert (step["launches"], step["kernels"], step["short_kernels"], step["idle_launching_us"]) == (1, 0, 0, 20)
    assert out["summary"]["kernel_to_launch_ratio"] is None and out["worst"] == []


def test_a_graph_launch_of_one_kernel_is_a_graph_launch():
    """A graph that ran a single kernel is still a graph launch, not a one-by-one launch of a short kernel."""
    t = Trace()
    t.step(1, 0, 100)
    corr = t.runtime("cudaGraphLaunch", 10, 20)
    t.kernel("triton_poi_fused_relu_0", 30, 1, correlation=corr)
    t.launch(50, 10, 62, 2)  # a one-by-one launch beside it, of a short kernel
    out = launch_overhead(parse(t.build()))
    [step] = out["steps"]
    assert (step["launches"], step["kernels"], step["short_kernels"]) == (2, 1, 1)
    assert [(w["kernel_us"], w["launch_us"]) for w in out["worst"]] == [(2, 10)]


def many_launches(t: Trace, kernel_us: float, count: int = 60) -> None:
    """One step of `count` launches of 8 us each, back to back, every kernel right after its call."""
    t.step(1, 0, count * 10 + 10)
    for i in range(count):
        t.launch(i * 10, 8, i * 10 + 8, kernel_us)


def test_launch_bound_fires_on_many_short_kernels():
    t = Trace()
    many_launches(t, kernel_us=1)
    [found] = launch_bound(rule_context(t))
    # 60 kernels of 1 us in a 610 us step: busy 60 / 610 = 9.8%; kernels 60 / launches 480 = 0.125
    assert found["id"] == "launch_bound"
    assert found["numbers"]["kernels_per_step"] == 60 and found["numbers"]["kernel_to_launch_ratio"] == 0.125
    assert found["numbers"]["gpu_busy_ratio"] == round(60 / 610, 6)
    # the saving: the GPU's idle while the host is inside launch calls; severity follows it
    idle = found["numbers"]["idle_launching_ratio"]
    assert found["saving_ratio"] == pytest.approx(idle, abs=1e-6) and found["severity"] == "high" and idle >= 0.1
    assert found["thresholds"] == {"kernels_per_step": 50, "gpu_busy_ratio": 0.5, "kernel_to_launch_ratio": 0.4,
                                   "high_saving_ratio": 0.1, "medium_saving_ratio": 0.02}
    kinds = [e["kind"] for e in found["evidence"]]
    assert kinds == ["step", "kernel", "kernel", "kernel"]
    assert all("event_id" in e for e in found["evidence"] if e["kind"] == "kernel")
    assert "reduce-overhead" in found["detail"]


def test_launch_bound_quiet_when_kernels_outlast_their_launch():
    t = Trace()
    many_launches(t, kernel_us=4)  # 4 / 8 = 0.5 of the launch time: the GPU gets enough work per launch
    assert launch_bound(rule_context(t)) == []


def test_launch_bound_quiet_with_few_launches():
    t = Trace()
    many_launches(t, kernel_us=1, count=40)
    assert launch_bound(rule_context(t)) == []
