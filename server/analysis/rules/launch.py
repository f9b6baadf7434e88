"""`launch_bound`: the GPU waits while the host launches many short kernels one by one.

Judged on the launch-overhead analysis (see the compile view's note), over the mean step:
- at least 50 kernels launched one by one per step (CUDA graphs launch many in one call);
- the GPU busy (kernels, copies, sets) under half of the step;
- the launched kernels' GPU time under 0.4 of the host time spent in their launch calls: the
  host cannot hand the GPU work as fast as the GPU finishes it, whatever else it does.
Saving: the GPU's idle time while the host is inside launch calls (`idle_launching_us`): what
launching fewer, larger pieces of work removes; the host's other work (Python, operators'
dispatch) between launches is not counted. Evidence: the steps with the largest share
of GPU-idle time inside launch calls, and the kernels whose launch exceeds them most.
"""

from __future__ import annotations

import numpy as np

from ..recommendations import Context, Finding, finding, step_evidence
from ..savings import BANDS, saving

MIN_LAUNCHES_PER_STEP = 50
MAX_GPU_BUSY_RATIO = 0.5
MAX_KERNEL_TO_LAUNCH_RATIO = 0.4
MAX_EVIDENCE_STEPS = 3
MAX_EVIDENCE_KERNELS = 3


def _fires(summary: dict) -> bool:
    values = (summary["kernels_per_step"], summary["gpu_busy_ratio"], summary["kernel_to_launch_ratio"])
    if any(v is None for v in values):
        return False
    kernels, busy, kernel_to_launch = values
    return (kernels >= MIN_LAUNCHES_PER_STEP and busy < MAX_GPU_BUSY_RATIO
            and kernel_to_launch < MAX_KERNEL_TO_LAUNCH_RATIO)


def launch_bound(ctx: Context) -> list[Finding]:
    launch = ctx.launch
    summary = launch["summary"]
    if not _fires(summary):
        return []
    ratios = np.array([s["idle_launching_ratio"] or 0.0 for s in launch["steps"]])
    steps = [step_evidence(ctx, int(i), idle_launching_ratio=round(float(ratios[i]), 6))
             for i in np.argsort(-ratios, kind="stable")[:MAX_EVIDENCE_STEPS]]
    kernels = [{"kind": "kernel", "label": f"{w['name']} ({w['launch_name']} took longer than the kernel)",
                **{k: w[k] for k in ("start_us", "end_us", "event_id", "launch_event_id", "kernel_us", "launch_us")}}
               for w in launch["worst"][:MAX_EVIDENCE_KERNELS]]
    busy = summary["gpu_busy_ratio"]
    return [finding(
        "launch_bound", saving(summary["idle_launching_us"] or 0.0, ctx.step_time_us,
                               "GPU idle while the host is inside launch calls"),
        f"The GPU is busy {busy:.1%} of the step: it waits while {summary['kernels_per_step']:.0f} short kernels "
        "a step are launched one by one",
        "Launching costs more host time than the kernels take on the GPU. Capture the step in CUDA graphs "
        "(`torch.compile(model, mode=\"reduce-overhead\")`, or `torch.cuda.graphs`), let torch.compile fuse "
        "small operators into fewer kernels, or give each kernel more work with larger batches.",
        numbers={"gpu_busy_ratio": busy, "kernels_per_step": summary["kernels_per_step"],
                 "kernel_to_launch_ratio": summary["kernel_to_launch_ratio"],
                 "idle_launching_ratio": summary["idle_launching_ratio"],
                 "short_kernel_ratio": summary["short_kernel_ratio"],
                 "median_kernel_us": summary["median_kernel_us"], "median_launch_us": summary["median_launch_us"],
                 "step_us": summary["step_us"]},
        thresholds={"kernels_per_step": MIN_LAUNCHES_PER_STEP, "gpu_busy_ratio": MAX_GPU_BUSY_RATIO,
                    "kernel_to_launch_ratio": MAX_KERNEL_TO_LAUNCH_RATIO, **BANDS},
        evidence=steps + kernels)]
