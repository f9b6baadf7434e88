"""`low_gpu_utilization`: a GPU busy (any kernel running) under 50% of the steps' time; high
under 20%. Evidence: the GPU, and the steps where it was idlest. Not raised when torch.compile
compiled for over half of the steps' time: the GPU waits on the compiler in such a trace (a
first call), which says nothing of the steady state; the torch.compile view shows that time."""

from __future__ import annotations

import numpy as np

from ...trace.schema import Kind
from .. import ranges
from ..recommendations import Context, Finding, finding, step_evidence

LOW_UTILIZATION = 0.5
VERY_LOW_UTILIZATION = 0.2
COMPILE_DOMINATED = 0.5  # share of the steps' time spent compiling


def _busy_per_step(ctx: Context, device: int) -> np.ndarray:
    events = ctx.tables.events
    kernels = events[(events["kind"].to_numpy() == Kind.KERNEL) & (events["device"].to_numpy() == device)]
    start = kernels["ts"].to_numpy()
    busy = ranges.union(start, start + kernels["dur"].to_numpy())
    return np.array([ranges.clip_total(busy, s, e) for s, e in zip(ctx.steps.starts, ctx.steps.ends)])


def low_gpu_utilization(ctx: Context) -> list[Finding]:
    steps_us = float((ctx.steps.ends - ctx.steps.starts).sum())
    if steps_us > 0 and ctx.compile_time_us > COMPILE_DOMINATED * steps_us:
        return []
    found = []
    for gpu in ctx.gpus:
        util = gpu.get("utilization_ratio")
        if util is None or util >= LOW_UTILIZATION:
            continue
        evidence: list[dict] = [{"kind": "gpu", "label": f"GPU {gpu['device']}", "device": gpu["device"],
                                 "utilization_ratio": util}]
        if len(ctx.steps.names):
            lengths = ctx.steps.ends - ctx.steps.starts
            per_step = _busy_per_step(ctx, gpu["device"]) / np.where(lengths > 0, lengths, 1)
            evidence += [step_evidence(ctx, int(i), utilization_ratio=round(float(per_step[i]), 6))
                         for i in np.argsort(per_step, kind="stable")[:3]]
        found.append(finding(
            "low_gpu_utilization", "high" if util < VERY_LOW_UTILIZATION else "medium",
            f"GPU {gpu['device']} is busy only {util:.1%} of the step time",
            "The GPU sits idle between kernels. Look at the step breakdown for what the host does "
            "meanwhile; larger batches, fewer host-device synchronisations, or torch.compile with "
            "CUDA graphs usually help.",
            numbers={"utilization_ratio": util, "device": gpu["device"]},
            thresholds={"utilization_ratio": LOW_UTILIZATION, "high_utilization_ratio": VERY_LOW_UTILIZATION},
            evidence=evidence))
    return found
