"""Step detection (server/analysis/steps.py): ProfilerStep ranges, device extension, tail trimming.

Each case builds a few events and lists the steps it must give as (name, start_us, end_us).
Cases marked "reference" are the reference plugin's own test cases (tb_plugin/test/test_profiler.py),
same events and same expected numbers.
"""

from __future__ import annotations

import pytest

from profboard.server.analysis.steps import detect_steps
from synth import NCCL_ALLREDUCE, Trace, parse, reference_pure_cpu


def steps_of(t: Trace):
    steps = detect_steps(parse(t.build()).events)
    return [(n, s, e) for n, s, e in zip(steps.names, steps.starts.tolist(), steps.ends.tolist())], steps.warnings


def host_only_two_steps():
    t = Trace()
    t.step(1, 0, 100)
    t.op("aten::add", 10, 20)
    t.step(2, 100, 50)
    return t


def legacy_operator_steps():
    t = Trace(legacy=True)
    t.step(1, 0, 100)
    t.op("aten::add", 10, 20)
    t.step(2, 100, 50)
    return t


def step_as_cpu_op():
    # Some PyTorch versions record ProfilerStep#N as a cpu_op
    t = Trace()
    t.complete("cpu_op", "ProfilerStep#7", 0, 100)
    t.complete("cpu_op", "ProfilerStep#8", 100, 100)
    return t


def steps_out_of_order_in_file():
    t = Trace()
    t.step(2, 100, 50)
    t.step(1, 0, 100)
    return t


def gpu_copies_of_steps():
    # 2.x writes a GPU-side gpu_user_annotation copy of each ProfilerStep; they are not steps.
    t = Trace()
    t.step(1, 0, 100, gpu=(50, 100))
    t.launch(10, 5, 50, 100)     # kernel 50..150
    t.step(2, 100, 100, gpu=(160, 30))
    t.launch(110, 5, 160, 30)    # kernel 160..190
    return t


def gpu_copies_only():
    # Only the GPU-side copies: no host ProfilerStep, so one step "0" over the host ops.
    t = Trace()
    t.add({"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7,
           "ts": 0, "dur": 500, "args": {}})
    t.op("aten::mm", 100, 50)
    return t


def no_step_host_ops():
    # One step "0" from the first host op's start to the last host op's end; Python frames do not count.
    t = Trace()
    t.python("train.py(10): main", 0, 1000, python_id=1)
    t.op("aten::to", 100, 60)
    t.op("aten::nll_loss_backward", 300, 70, tid=456)
    return t


def no_step_with_launch():
    # reference test_no_profilerstep: step "0" = 100 .. 420 (the kernel's end)
    t = Trace(legacy=True)
    t.op("aten::to", 100, 60, tid=123)
    t.op("aten::nll_loss_backward", 300, 70, tid=456)
    t.launch(310, 20, 320, 100, tid=456)
    return t


def no_host_ops_at_all():
    # Kernels only: the extent of all events (not the profiler's own "Trace" span)
    t = Trace()
    t.complete("Trace", "PyTorch Profiler (0)", 0, 1000, pid="Spans", tid="PyTorch Profiler")
    t.kernel("k", 10, 10)
    t.kernel("k", 30, 20)
    return t


def device_extension():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(90, 5, 95, 65)       # kernel 95..160: step 1 ends at 160
    t.step(2, 105, 95)
    t.launch(110, 5, 170, 10)     # kernel 170..180 < host end 200
    return t


def copy_extends_step():
    t = Trace()
    t.step(1, 0, 100)
    t.copy(10, 5, 90, 50)         # cudaMemcpyAsync 10..15 -> memcpy 90..140
    return t


def memset_extends_step():
    t = Trace()
    t.step(1, 0, 100)
    t.copy(10, 5, 120, 5, memset=True)   # memset 120..125
    return t


def device_work_ends_before_host():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(10, 5, 20, 30)       # kernel 20..50
    return t


def reference_steps_with_overlap():
    # reference test_multiple_profilersteps_with_overlap
    t = Trace(legacy=True)
    t.step(1, 100, 200, tid=123)
    t.op("aten::to", 200, 60, tid=123)
    t.step(2, 350, 150, tid=123)
    t.op("aten::mm", 360, 50, tid=123)
    t.kernel("k", 150, 90, correlation=123)   # launched before the trace: owned by no step
    c = t.runtime("cudaMemcpyAsync", 250, 5, tid=123)
    t.memcpy(280, 100, correlation=c)
    t.launch(400, 5, 410, 200, tid=123)
    return t


def unowned_work_overlapping_first_kernel():
    # Unowned work still running when step 1's first kernel starts (150) does not delay the step.
    t = Trace()
    t.kernel("other", 50, 250, stream=8)      # 50..300, no launch in the trace
    t.step(1, 100, 100)
    t.launch(110, 5, 150, 10)
    return t


def unowned_work_inside_first_step():
    # Work launched before step 1 that ends (130) before step 1's first kernel (150) moves its start to 130.
    t = Trace()
    t.launch(80, 5, 90, 40)                   # launch outside any step; kernel 90..130
    t.step(1, 100, 100)
    t.launch(110, 5, 150, 10)
    return t


def reference_last_steps_no_kernel():
    # reference test_last_steps_no_kernel: steps 2 and 3 launched nothing and go
    t = Trace(legacy=True)
    t.step(1, 100, 200, tid=123)
    t.op("aten::to", 120, 10, tid=123)
    t.step(2, 300, 100, tid=123)
    t.step(3, 400, 50, tid=123)
    t.kernel("k", 90, 20, correlation=123)    # unowned, ends 110 before step 1's kernel at 150
    c = t.runtime("cudaMemcpyAsync", 125, 5, tid=123)
    t.kernel("k", 150, 180, correlation=c)
    return t


def steps_with_launches(counts):
    """Step i (1-based) spans [100(i-1), 100i) and launches counts[i-1] short kernels inside itself."""
    t = Trace()
    for i, n in enumerate(counts):
        base = 100 * i
        t.step(i + 1, base, 100)
        for k in range(n):
            t.launch(base + 10 * k + 10, 2, base + 10 * k + 15, 3)
    return t


def driver_launch_owns_kernel():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(10, 5, 120, 60, driver=True)     # cuLaunchKernel 10..15 -> kernel 120..180
    t.step(2, 100, 100)
    t.launch(110, 5, 190, 20, driver=True)    # kernel 190..210
    return t


def launch_straddles_step_end():
    # A launch that starts in step 1 and ends after it belongs to neither step: no extension at all.
    t = Trace()
    t.step(1, 0, 100)
    t.launch(98, 5, 110, 40)
    t.step(2, 100, 100)
    return t


def kernels_finish_before_previous_end():
    # Step 2's kernel ends (130) before step 1's extended end (300): step 2 collapses to [300, 300].
    t = Trace()
    t.step(1, 0, 100)
    t.launch(10, 5, 50, 250)
    t.step(2, 100, 100)
    t.launch(110, 5, 120, 10, stream=8)
    return t


def nccl_kernel_extends_step():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(10, 5, 20, 200, name=NCCL_ALLREDUCE, stream=20)   # 20..220
    return t


def dataloader_step():
    t = Trace()
    t.step(1, 0, 100)
    t.dataloader(0, 40)
    t.op("aten::stack", 10, 20)
    return t


CASES = [
    pytest.param(host_only_two_steps, [("1", 0, 100), ("2", 100, 150)], id="host-only-two-steps"),
    pytest.param(legacy_operator_steps, [("1", 0, 100), ("2", 100, 150)], id="legacy-Operator-steps"),
    pytest.param(step_as_cpu_op, [("7", 0, 100), ("8", 100, 200)], id="step-as-cpu_op"),
    pytest.param(steps_out_of_order_in_file, [("1", 0, 100), ("2", 100, 150)], id="sorted-by-start"),
    # step 1: host 0..100, kernel to 150; step 2 starts at 150, host end 200 > kernel end 190
    pytest.param(gpu_copies_of_steps, [("1", 0, 150), ("2", 150, 200)], id="gpu_user_annotation-copies-not-steps"),
    pytest.param(gpu_copies_only, [("0", 100, 150)], id="gpu-copy-only-is-not-a-step"),
    pytest.param(no_step_host_ops, [("0", 100, 370)], id="no-ProfilerStep-host-ops"),          # 300 + 70
    pytest.param(no_step_with_launch, [("0", 100, 420)], id="reference-no-ProfilerStep"),        # 320 + 100
    pytest.param(no_host_ops_at_all, [("0", 10, 50)], id="no-host-ops-kernels-only"),
    # step 1 ends at its kernel's end 160; step 2 starts there and keeps its host end 200
    pytest.param(device_extension, [("1", 0, 160), ("2", 160, 200)], id="device-extension-next-starts-at-end"),
    pytest.param(copy_extends_step, [("1", 0, 140)], id="memcpy-extends-step"),             # 90 + 50
    pytest.param(memset_extends_step, [("1", 0, 125)], id="memset-extends-step"),           # 120 + 5
    pytest.param(device_work_ends_before_host, [("1", 0, 100)], id="device-work-inside-host-range"),
    # step 1 starts when the unowned kernel ends (150 + 90 = 240), ends at its memcpy's end 280 + 100 = 380;
    # step 2 starts at 380 and ends at its kernel's end 410 + 200 = 610
    pytest.param(reference_steps_with_overlap, [("1", 240, 380), ("2", 380, 610)],
                 id="reference-first-step-pushed-by-earlier-work"),
    pytest.param(unowned_work_overlapping_first_kernel, [("1", 100, 200)], id="unowned-work-still-running-no-push"),
    pytest.param(unowned_work_inside_first_step, [("1", 130, 200)], id="unowned-work-ending-first-pushes"),
    # start 90 + 20 = 110 (unowned kernel's end); end 150 + 180 = 330
    pytest.param(reference_last_steps_no_kernel, [("1", 110, 330)], id="reference-tail-steps-without-gpu-dropped"),
    # 5 then 3 kernels: 3 < 0.8 * 5 = 4, the last step is dropped
    pytest.param(lambda: steps_with_launches([5, 3]), [("1", 0, 100)], id="80pct-rule-drops-last"),
    # 5 then 4 kernels: 4 < 4 is false, both kept
    pytest.param(lambda: steps_with_launches([5, 4]), [("1", 0, 100), ("2", 100, 200)], id="80pct-rule-boundary-keeps"),
    # trailing empty step 3 goes, then step 2 (3 < 4) goes too
    pytest.param(lambda: steps_with_launches([5, 3, 0]), [("1", 0, 100)], id="80pct-rule-after-empty-tail"),
    # step 2 has no GPU work but is not at the tail: kept
    pytest.param(lambda: steps_with_launches([2, 0, 2]), [("1", 0, 100), ("2", 100, 200), ("3", 200, 300)],
                 id="middle-step-without-gpu-kept"),
    # a first step with more work than the step before it does not matter: only last vs previous
    pytest.param(lambda: steps_with_launches([1, 5]), [("1", 0, 100), ("2", 100, 200)], id="80pct-rule-growing-kept"),
    pytest.param(lambda: steps_with_launches([0, 0, 1]), [("1", 0, 100), ("2", 100, 200), ("3", 200, 300)],
                 id="only-last-step-has-gpu-work"),
    pytest.param(reference_pure_cpu, [("1", 100, 300), ("2", 300, 400)], id="reference-cpu-only-nothing-trimmed"),
    # step 1 ends at 120 + 60 = 180; step 2 starts there, ends at 190 + 20 = 210
    pytest.param(driver_launch_owns_kernel, [("1", 0, 180), ("2", 180, 210)], id="cuda_driver-launch-owns-kernel"),
    pytest.param(launch_straddles_step_end, [("1", 0, 100), ("2", 100, 200)], id="launch-straddling-step-end-not-owned"),
    # step 1 ends at 50 + 250 = 300; step 2 starts at 300 and cannot end earlier
    pytest.param(kernels_finish_before_previous_end, [("1", 0, 300), ("2", 300, 300)],
                 id="step-collapses-behind-previous-end"),
    pytest.param(nccl_kernel_extends_step, [("1", 0, 220)], id="nccl-kernel-extends-step"),
    pytest.param(dataloader_step, [("1", 0, 100)], id="dataloader-inside-step"),
]


@pytest.mark.parametrize("build, expected", CASES)
def test_detect_steps(build, expected):
    got, _ = steps_of(build())
    assert got == expected


def test_no_profiler_step_warns():
    _, warnings = steps_of(no_step_host_ops())
    assert any("no ProfilerStep" in w for w in warnings)


def test_dropped_tail_steps_are_named_in_a_warning():
    _, warnings = steps_of(reference_last_steps_no_kernel())
    assert any("2, 3" in w for w in warnings), warnings


def test_no_warning_when_nothing_dropped():
    _, warnings = steps_of(device_extension())
    assert warnings == []


def test_legacy_and_modern_spellings_agree():
    def build(legacy):
        t = Trace(legacy=legacy)
        t.step(1, 0, 100)
        t.op("aten::mm", 10, 50)
        t.launch(20, 5, 30, 100)
        t.step(2, 100, 100)
        t.launch(110, 5, 140, 80)
        return t
    assert steps_of(build(True)) == steps_of(build(False))


def test_no_profiler_step_spans_user_annotations():
    t = Trace()
    t.dataloader(0, 50)                 # user_annotation 0..50
    t.op("aten::mm", 60, 140)           # 60..200
    got, _ = steps_of(t)
    assert got == [("0", 0, 200)]

