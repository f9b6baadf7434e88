"""Overview (server/analysis/overview.py): the step time breakdown and the per-GPU summary.

Breakdown priority: Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec > Other;
the categories of a step sum to its total. Cases marked "reference" are the reference plugin's own test
cases (tb_plugin/test/test_profiler.py): same events, same expected numbers.
"""

from __future__ import annotations

import pytest

from profboard.server.analysis.overview import CATEGORIES, overview
from synth import ELEMENTWISE, NCCL_ALLREDUCE, TC_GEMM, Trace, parse, reference_pure_cpu


def run(t: Trace) -> dict:
    return overview(parse(t.build()))


def row(step: str, total: float, **parts: float) -> dict:
    """Expected step row: the categories not named are 0."""
    unknown = set(parts) - set(CATEGORIES)
    assert not unknown, unknown
    return {"step": step, "total_us": total, **{f"{c}_us": parts.get(c, 0.0) for c in CATEGORIES}}


# --- reference cases --------------------------------------------------------------------------

def reference_all_categories():
    t = Trace(legacy=True)
    t.dataloader(100, 180, tid=123)
    t.op("aten::to", 200, 60, tid=123)
    t.op("aten::nll_loss_backward", 340, 70, tid=456)
    t.step(1, 50, 400, tid=123)
    t.copy(360, 20, 405, 10)                  # cudaMemcpyAsync 360..380 -> memcpy 405..415
    t.copy(390, 10, 420, 5, memset=True)      # cudaMemsetAsync 390..400 -> memset 420..425
    t.launch(405, 5, 430, 15, tid=456)        # cudaLaunchKernel 405..410 -> kernel 430..445
    return t


def reference_runtime_in_step():
    t = Trace(legacy=True)
    t.step(1, 100, 300, tid=456)
    t.launch(130, 20, 220, 8, tid=456)
    return t


def reference_no_profiler_step():
    t = Trace(legacy=True)
    t.op("aten::to", 100, 60, tid=123)
    t.op("aten::nll_loss_backward", 300, 70, tid=456)
    t.launch(310, 20, 320, 100, tid=456)
    return t


def reference_two_steps_no_overlap():
    t = Trace(legacy=True)
    t.step(1, 100, 200, tid=123)
    t.op("aten::to", 200, 60, tid=123)
    t.step(2, 350, 150, tid=123)
    t.op("aten::mm", 360, 50, tid=123)
    t.copy(250, 5, 280, 40)
    t.launch(400, 5, 410, 200, tid=123)
    return t


def reference_two_steps_with_overlap():
    t = Trace(legacy=True)
    t.step(1, 100, 200, tid=123)
    t.op("aten::to", 200, 60, tid=123)
    t.step(2, 350, 150, tid=123)
    t.op("aten::mm", 360, 50, tid=123)
    t.kernel("k", 150, 90, correlation=123)   # launched before the trace
    t.copy(250, 5, 280, 100)
    t.launch(400, 5, 410, 200, tid=123)
    return t


def reference_nccl_worker0():
    # NCCL kernels are found by name here (the reference matched them through nccl:* ops)
    t = Trace()
    t.op("nccl:broadcast", 0, 75, tid=23803)
    t.kernel("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)", 16, 16, stream=16)
    t.op("aten::add_", 100, 20, tid=23803)
    t.kernel(ELEMENTWISE, 130, 161, stream=7)
    t.op("nccl:all_reduce", 160, 75, tid=25166)
    t.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 162, 1556, stream=16)
    return t


def reference_nccl_worker1():
    t = Trace()
    t.op("nccl:broadcast", 0, 20, tid=23803)
    t.kernel("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)", 8, 31, stream=16)
    t.op("aten::add_", 25, 20, tid=23803)
    t.kernel(ELEMENTWISE, 30, 161, stream=7)
    t.op("nccl:all_reduce", 160, 75, tid=25166)
    t.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 562, 1058, stream=16)
    return t


def gloo_ops(t, worker):
    if worker == 0:
        t.op("gloo:broadcast", 16, 38, tid=23803)
        t.op("gloo:broadcast", 25, 36, tid=23805)
        t.op("gloo:broadcast", 66, 18, tid=23803)
        t.op("aten::add_", 0, 20, tid=23800)
        t.op("gloo:all_reduce", 110, 18, tid=23805)
        t.op("gloo:all_reduce", 120, 36, tid=23803)
    else:
        t.op("gloo:broadcast", 20, 28, tid=23803)
        t.op("gloo:broadcast", 28, 30, tid=23805)
        t.op("gloo:broadcast", 77, 6, tid=23803)
        t.op("aten::add_", 0, 30, tid=23800)
        t.op("gloo:all_reduce", 88, 38, tid=23805)
        t.op("gloo:all_reduce", 130, 16, tid=23803)


def reference_gloo_cpu(worker):
    def build():
        t = Trace()
        gloo_ops(t, worker)
        if worker == 0:
            t.op("aten::mul", 30, 101, tid=23800)
        else:
            t.op("aten::mul", 70, 70, tid=23800)
        return t
    return build


def reference_gloo_gpu(worker):
    def build():
        t = Trace()
        gloo_ops(t, worker)
        if worker == 0:
            t.kernel(ELEMENTWISE, 30, 101)
        else:
            t.kernel(ELEMENTWISE, 70, 70)
        return t
    return build


# --- PyTorch 2.x and fixed reference bugs -----------------------------------------------------

def gpu_copy_of_step():
    # The GPU-side ProfilerStep copy (35..95) is neither a second step nor CPU work.
    t = Trace()
    t.step(1, 0, 100, gpu=(35, 60))
    t.op("aten::mm", 10, 20)                  # 10..30
    t.launch(30, 5, 40, 50)                   # runtime 30..35, kernel 40..90
    return t


def python_frames():
    t = Trace()
    t.step(1, 0, 100)
    t.python("train.py(1): <module>", 0, 100, python_id=1)
    t.python("model.py(5): forward", 10, 50, python_id=2, parent_id=1)
    t.op("aten::mm", 20, 20)                  # 20..40
    return t


def nccl_overlapping_compute():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(10, 2, 20, 40)                   # kernel 20..60
    t.launch(14, 2, 40, 50, name=NCCL_ALLREDUCE, stream=20)   # communication 40..90
    return t


def driver_launch():
    t = Trace()
    t.step(1, 0, 100)
    t.op("aten::mm", 5, 40)                   # 5..45
    t.launch(10, 10, 110, 40, driver=True)    # cuLaunchKernel 10..20 -> kernel 110..150
    return t


def kernels_outside_steps():
    # No launches in the trace: steps keep their host ranges; only the kernel time inside counts.
    t = Trace()
    t.kernel("k", 20, 40)                     # 20..60, before the step
    t.step(1, 100, 100)
    t.kernel("k", 180, 40)                    # 180..220, 20 inside
    t.kernel("k", 250, 50)                    # after
    return t


def dataloader_with_ops_inside():
    t = Trace()
    t.step(1, 0, 100)
    t.dataloader(0, 40)
    t.op("aten::stack", 10, 20)               # inside the DataLoader: DataLoader wins
    t.op("aten::mm", 50, 20)
    return t


def synchronize():
    t = Trace()
    t.step(1, 0, 100)
    t.op("aten::item", 40, 55)                # 40..95
    t.runtime("cudaDeviceSynchronize", 50, 40)    # 50..90
    return t


def device_priority():
    t = Trace()
    t.step(1, 0, 100)
    t.kernel("k", 10, 40)                     # 10..50
    t.memcpy(30, 40, stream=8)                # 30..70
    t.memset(60, 20, stream=9)                # 60..80
    return t


def annotation_around_ops():
    t = Trace()
    t.step(1, 0, 100)
    t.annotation("## forward ##", 10, 80)     # 10..90
    t.op("aten::mm", 20, 10)
    t.op("aten::relu", 40, 20)
    return t


def memcpy_over_runtime_and_comm():
    t = Trace()
    t.step(1, 0, 100)
    t.op("gloo:all_reduce", 0, 30)            # host collective 0..30
    t.copy(20, 30, 25, 10)                    # runtime 20..50, memcpy 25..35
    return t


CASES = [
    # kernel 430..445; memcpy 405..415; memset 420..425; runtime 360..380 + 390..400 + 405..410 minus memcpy = 30;
    # DataLoader 100..280 (aten::to inside it); CPU 340..410 minus runtime/memcpy = 20 + 10 + 5 = 35;
    # other 50..100 + 280..340 + 415..420 + 425..430 + 445..450 = 125
    pytest.param(reference_all_categories,
                 [row("1", 400, kernel=15, memcpy=10, memset=5, runtime=30, dataloader=180, cpu_exec=35, other=125)],
                 id="reference-all-categories"),
    pytest.param(reference_runtime_in_step, [row("1", 300, kernel=8, runtime=20, other=300 - 8 - 20)],
                 id="reference-runtime-called-by-step"),
    # step "0" = 100..420; runtime 310..320 (then the kernel); CPU 60 + (310 - 300); other 300 - (100 + 60)
    pytest.param(reference_no_profiler_step,
                 [row("0", 320, kernel=100, runtime=10, cpu_exec=70, other=140)], id="reference-no-ProfilerStep"),
    pytest.param(reference_two_steps_no_overlap, [
        # 100..320: memcpy 280..320; runtime 250..255; CPU 60 - 5; other 200 - 60 - 20
        row("1", 220, memcpy=40, runtime=5, cpu_exec=55, other=120),
        # 350..610: kernel 410..610; runtime 400..405; CPU 50 - 5; other 350..360
        row("2", 260, kernel=200, runtime=5, cpu_exec=45, other=10),
    ], id="reference-two-steps-no-overlap"),
    pytest.param(reference_two_steps_with_overlap, [
        # 240..380: CPU (200 + 60) - (150 + 90) - 5 = 15; other 280 - (200 + 60) = 20
        row("1", 140, memcpy=100, runtime=5, cpu_exec=15, other=20),
        # 380..610: CPU (280 + 100) - 360 + (410 - 405) = 25
        row("2", 230, kernel=200, runtime=5, cpu_exec=25),
    ], id="reference-two-steps-with-overlap"),
    pytest.param(reference_pure_cpu, [row("1", 200, cpu_exec=10, other=190), row("2", 100, cpu_exec=40, other=60)],
                 id="reference-pure-cpu"),
    # 0..235: kernel 130..235; communication 16..32 (162..235 is under the kernel);
    # CPU 0..16 + 32..75 + 100..120 = 79; other 75..100 + 120..130 = 35
    pytest.param(reference_nccl_worker0, [row("0", 235, kernel=105, communication=16, cpu_exec=79, other=35)],
                 id="reference-nccl-worker0"),
    # 0..235: communication 8..30 = 22 (then the elementwise kernel 30..191)
    pytest.param(reference_nccl_worker1, [row("0", 235, kernel=161, communication=22, cpu_exec=52)],
                 id="reference-nccl-worker1"),
    # communication 16..61 + 66..84 + 110..156 = 109; CPU 0..16 + 61..66 + 84..110 = 47
    pytest.param(reference_gloo_cpu(0), [row("0", 156, communication=109, cpu_exec=47)], id="reference-gloo-cpu-worker0"),
    # communication 20..58 + 77..83 + 88..126 + 130..146 = 98; CPU 0..20 + 70..77 + 83..88 + 126..130 = 36; other 58..70
    pytest.param(reference_gloo_cpu(1), [row("0", 146, communication=98, cpu_exec=36, other=12)],
                 id="reference-gloo-cpu-worker1"),
    # kernel 30..131; communication 16..30 + 131..156 = 39; CPU 0..16
    pytest.param(reference_gloo_gpu(0), [row("0", 156, kernel=101, communication=39, cpu_exec=16)],
                 id="reference-gloo-gpu-worker0"),
    # kernel 70..140; communication 20..58 + 140..146 = 44; CPU 0..20; other 58..70
    pytest.param(reference_gloo_gpu(1), [row("0", 146, kernel=70, communication=44, cpu_exec=20, other=12)],
                 id="reference-gloo-gpu-worker1"),
    # kernel 40..90; runtime 30..35; CPU 10..30; other 0..10 + 35..40 + 90..100 = 25 (not CPU: the GPU copy 35..95)
    pytest.param(gpu_copy_of_step, [row("1", 100, kernel=50, runtime=5, cpu_exec=20, other=25)],
                 id="gpu_user_annotation-step-copy-not-cpu-exec"),
    # only aten::mm 20..40 is CPU work; the frames around it are context
    pytest.param(python_frames, [row("1", 100, cpu_exec=20, other=80)], id="python_function-not-cpu-exec"),
    # kernel 20..60; communication 60..90 (40..60 is under the kernel); runtime 10..12 + 14..16;
    # other 0..10 + 12..14 + 16..20 + 90..100 = 26
    pytest.param(nccl_overlapping_compute, [row("1", 100, kernel=40, communication=30, runtime=4, other=26)],
                 id="nccl-kernel-is-communication"),
    # step 0..150 (kernel end); runtime 10..20; CPU 5..45 minus 10..20 = 30; other 0..5 + 45..110 = 70
    pytest.param(driver_launch, [row("1", 150, kernel=40, runtime=10, cpu_exec=30, other=70)],
                 id="cuda_driver-launch-is-runtime"),
    pytest.param(kernels_outside_steps, [row("1", 100, kernel=20, other=80)], id="kernels-outside-steps"),
    # DataLoader 0..40 (aten::stack inside it); CPU 50..70; other 40..50 + 70..100
    pytest.param(dataloader_with_ops_inside, [row("1", 100, dataloader=40, cpu_exec=20, other=40)],
                 id="dataloader-over-cpu"),
    # runtime 50..90; CPU 40..50 + 90..95
    pytest.param(synchronize, [row("1", 100, runtime=40, cpu_exec=15, other=45)], id="synchronize-is-runtime"),
    # kernel 10..50; memcpy 50..70; memset 70..80; other 0..10 + 80..100
    pytest.param(device_priority, [row("1", 100, kernel=40, memcpy=20, memset=10, other=30)],
                 id="kernel-over-memcpy-over-memset"),
    # the annotation 10..90 is CPU work, ops nested in it add nothing
    pytest.param(annotation_around_ops, [row("1", 100, cpu_exec=80, other=20)], id="nested-annotation-and-ops"),
    # memcpy 25..35; communication 0..25 (25..30 is under the memcpy); runtime 35..50; other 50..100
    pytest.param(memcpy_over_runtime_and_comm, [row("1", 100, memcpy=10, communication=25, runtime=15, other=50)],
                 id="memcpy-over-communication-over-runtime"),
]


@pytest.mark.parametrize("build, expected", CASES)
def test_step_breakdown(build, expected):
    got = run(build())["steps"]
    assert [{k: v for k, v in step.items() if k not in ("start_us", "end_us")} for step in got] == expected
    assert all(step["end_us"] - step["start_us"] == pytest.approx(step["total_us"]) for step in got)


@pytest.mark.parametrize("build, expected", CASES)
def test_categories_sum_to_step_total(build, expected):
    for step in run(build())["steps"]:
        assert sum(step[f"{c}_us"] for c in CATEGORIES) == pytest.approx(step["total_us"])


def test_average_is_mean_over_steps():
    out = run(reference_two_steps_no_overlap())
    # ((320 - 100) + (610 - 350)) / 2
    assert out["average"]["total_us"] == 240
    assert out["average"]["kernel_us"] == 100           # (0 + 200) / 2
    assert out["average"]["cpu_exec_us"] == 50          # (55 + 45) / 2
    assert "step" not in out["average"]


def test_gpu_step_copies_do_not_double_steps():
    t = Trace()
    for n in range(3):
        base = 100 * n
        t.step(n + 1, base, 100, gpu=(base + 20, 60))
        t.launch(base + 10, 5, base + 20, 60)
    assert [s["step"] for s in run(t)["steps"]] == ["1", "2", "3"]


def test_legacy_and_modern_spellings_agree():
    def build(legacy):
        t = Trace(legacy=legacy)
        t.step(1, 0, 200)
        t.dataloader(0, 30)
        t.op("aten::mm", 40, 60)
        t.launch(50, 5, 60, 80)
        t.copy(70, 5, 150, 20)
        t.copy(80, 5, 175, 5, memset=True)
        return t
    assert run(build(True))["steps"] == run(build(False))["steps"]


# --- GPU summary --------------------------------------------------------------------------------

def reference_gpu_utilization():
    t = Trace(legacy=True)
    t.op("aten::mat_mul", 100, 100, tid=456)
    t.op("aten::mm", 120, 70, tid=456)
    c = t.runtime("cudaLaunchKernel", 120, 0, tid=456)
    t.kernel("void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", 130, 10, correlation=c, device=1,
             stream=7, blocks_per_sm=0.5, occupancy=0.6)
    c = t.runtime("cudaLaunchKernel", 120, 0, tid=456)
    t.kernel("void gemmSN_TN_kernel_64addr", 135, 15, correlation=c, device=1, stream=8, blocks_per_sm=0.6,
             occupancy=0.1)
    t.kernel("void gemmSN_TN_kernel_64addr", 150, 0, correlation=c, device=1, stream=8, blocks_per_sm=0.3,
             occupancy=0.2)
    c = t.runtime("cudaLaunchKernel", 125, 3, tid=456)
    t.kernel("void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", 145, 25, correlation=c, device=1,
             stream=7, blocks_per_sm=0.3, occupancy=1.0)
    c = t.runtime("cudaLaunchKernel", 195, 1, tid=456)
    t.kernel("void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", 200, 20, correlation=c, device=1,
             stream=7, blocks_per_sm=10.5, occupancy=0.3)
    return t


def reference_gpu_kernels_out_of_step():
    t = Trace(legacy=True)
    t.op("aten::mat_mul", 10, 10, tid=456)
    t.op("aten::mm", 120, 70, tid=456)
    t.op("aten::mm", 220, 20, tid=456)
    t.step(2, 100, 100, tid=456)
    c = t.runtime("cudaLaunchKernel", 15, 5, tid=456)
    t.kernel("k", 60, 20, correlation=c, device=1, blocks_per_sm=0.5, occupancy=0.6)
    c = t.runtime("cudaLaunchKernel", 230, 10, tid=456)
    t.kernel("k", 240, 25, correlation=c, device=1, blocks_per_sm=10.5, occupancy=0.3)
    return t


def two_gpus():
    t = Trace()
    t.device(0, name="NVIDIA H100 80GB HBM3", memory_bytes=85017493504, major=9, minor=0)
    t.device(1, name="NVIDIA A100-SXM4-40GB", memory_bytes=42505273344, major=8, minor=0)
    t.step(1, 0, 100)
    t.kernel("k", 0, 50, device=0, blocks_per_sm=2.0, occupancy=50)
    t.kernel("k", 0, 25, device=1, blocks_per_sm=0.5, occupancy=20)
    t.kernel("k", 50, 25, device=1, blocks_per_sm=0.5, occupancy=20)
    return t


def concurrent_kernels():
    t = Trace()
    t.step(1, 0, 100)
    t.kernel("a", 0, 40, stream=7, blocks_per_sm=0.6, occupancy=30)
    t.kernel("b", 20, 40, stream=8, blocks_per_sm=0.7, occupancy=60)
    return t


def tensor_core_time():
    t = Trace()
    t.step(1, 0, 100)
    t.kernel(TC_GEMM, 10, 30)
    t.kernel(ELEMENTWISE, 50, 10)
    t.kernel(TC_GEMM, 150, 100)               # outside the step: not counted
    return t


def occupancy_clipped_to_steps():
    t = Trace()
    t.step(1, 0, 100)
    t.kernel("a", 50, 100, occupancy=80)      # 50 us inside
    t.kernel("b", 0, 10, occupancy=20)
    t.kernel("c", 20, 10)                     # no occupancy recorded: not in the mean
    return t


def kernel_without_device_arg():
    t = Trace()
    t.step(1, 0, 100)
    t.add({"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": 7, "ts": 0, "dur": 25, "args": {"stream": 7}})
    return t


GPU_CASES = [
    # step "0" = 100..220; busy 130..170 + 200..220
    pytest.param(reference_gpu_utilization, [{
        "device": 1,
        "utilization_ratio": (40 + 20) / 120,
        # per-kernel blocks per SM summed over concurrent kernels, capped at 1
        "sm_efficiency_ratio": (0.5 * (135 - 130) + 1.0 * (140 - 135) + 0.6 * (145 - 140) + 0.9 * (150 - 145)
                                + 0.3 * (170 - 150) + 1.0 * (220 - 200)) / (220 - 100),
        # time-weighted; the 0-us kernel weighs nothing; Kineto's percent -> ratio
        "achieved_occupancy_ratio": (0.6 * 10 + 0.1 * 15 + 1.0 * 25 + 0.3 * 20) / (10 + 15 + 25 + 20) / 100,
        "tensor_core_ratio": 0.0,
    }], id="reference-gpu-utilization"),
    # both kernels lie outside ProfilerStep#2 (100..200); sm_efficiency_ratio: see the test below
    pytest.param(reference_gpu_kernels_out_of_step, [{
        "device": 1, "utilization_ratio": 0.0, "achieved_occupancy_ratio": None, "tensor_core_ratio": None,
    }], id="reference-kernels-out-of-step"),
    pytest.param(two_gpus, [
        # GPU 0: busy 0..50; blocks 2.0 -> 1 for 50 us
        {"device": 0, "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85017493504, "compute_capability": "9.0",
         "utilization_ratio": 0.5, "sm_efficiency_ratio": 0.5, "achieved_occupancy_ratio": 0.5, "tensor_core_ratio": 0.0},
        # GPU 1: busy 0..25 + 50..75; 0.5 * 50 / 100
        {"device": 1, "name": "NVIDIA A100-SXM4-40GB", "memory_bytes": 42505273344, "compute_capability": "8.0",
         "utilization_ratio": 0.5, "sm_efficiency_ratio": 0.25, "achieved_occupancy_ratio": 0.2, "tensor_core_ratio": 0.0},
    ], id="two-gpus"),
    pytest.param(concurrent_kernels, [{
        "device": 0,
        "utilization_ratio": 0.6,                                       # 0..60
        "sm_efficiency_ratio": (0.6 * 20 + 1.0 * 20 + 0.7 * 20) / 100,  # 0.6 + 0.7 capped at 1 on 20..40
        "achieved_occupancy_ratio": (30 * 40 + 60 * 40) / 80 / 100,
        "tensor_core_ratio": 0.0,
    }], id="concurrent-kernels-sm-efficiency-capped"),
    pytest.param(tensor_core_time, [{
        "device": 0, "utilization_ratio": 0.4, "sm_efficiency_ratio": None, "achieved_occupancy_ratio": None,
        "tensor_core_ratio": 30 / (30 + 10),
    }], id="tensor-core-ratio-within-steps"),
    pytest.param(occupancy_clipped_to_steps, [{
        "device": 0, "utilization_ratio": (10 + 10 + 50) / 100, "sm_efficiency_ratio": None,
        "achieved_occupancy_ratio": (80 * 50 + 20 * 10) / (50 + 10) / 100, "tensor_core_ratio": 0.0,
    }], id="occupancy-time-weighted-inside-steps"),
    pytest.param(kernel_without_device_arg, [{
        "device": 3, "name": None, "memory_bytes": None, "compute_capability": None, "utilization_ratio": 0.25,
    }], id="device-from-pid-when-no-device-arg"),
]


@pytest.mark.parametrize("build, expected", GPU_CASES)
def test_gpu_summary(build, expected):
    gpus = run(build())["gpus"]
    assert len(gpus) == len(expected)
    for got, want in zip(gpus, expected):
        for key, value in want.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value), key
            else:
                assert got[key] == value, key


def test_sm_efficiency_none_when_kernels_all_outside_steps():
    gpu = run(reference_gpu_kernels_out_of_step())["gpus"][0]
    assert gpu["sm_efficiency_ratio"] is None


@pytest.mark.parametrize("build", [
    pytest.param(reference_pure_cpu, id="cpu-only"),
    pytest.param(reference_gloo_cpu(0), id="gloo-cpu-only"),
])
def test_no_kernels_no_gpus(build):
    assert run(build())["gpus"] == []


def test_device_properties_without_kernels_give_no_gpus():
    t = reference_pure_cpu()
    t.device(0)
    assert run(t)["gpus"] == []


# --- recommendations and odd input ---------------------------------------------------------------

@pytest.mark.parametrize("build, ids", [
    # DataLoader 40 / 100 = 40% > 5%; no GPU
    pytest.param(dataloader_with_ops_inside, ["dataloader_bound"], id="dataloader-bound"),
    # communication 30% > 10%; GPU busy 20..90 = 70% is fine
    pytest.param(nccl_overlapping_compute, ["high_communication"], id="high-communication"),
    # GPU busy 10..40 + 50..60 = 40% of the step < 50%
    pytest.param(tensor_core_time, ["low_gpu_utilization"], id="low-utilization"),
    pytest.param(reference_pure_cpu, [], id="nothing"),
])
def test_recommendations(build, ids):
    assert sorted(r["id"] for r in run(build())["recommendations"]) == sorted(ids)


def test_empty_trace_gives_one_empty_step_and_warnings():
    out = overview(parse({"traceEvents": []}))
    assert out["steps"] == [{**row("0", 0), "start_us": 0.0, "end_us": 0.0}]
    assert out["gpus"] == [] and out["recommendations"] == []
    assert any("no complete events" in w for w in out["warnings"])


def test_step_warnings_reach_the_overview():
    out = run(reference_no_profiler_step())
    assert any("no ProfilerStep" in w for w in out["warnings"])
