"""`low_gpu_utilization`: a GPU busy (any kernel running) under 50% of the steps' time. Evidence:
the GPU, and the steps where it was idlest. Not raised when torch.compile compiled for over half
of the steps' time (`compile_dominated` says so instead): the GPU waits on the compiler in such a
trace (a first call), which says nothing of the steady state.

The finding says where the step goes: the GPU's idle time by cause (idle.py) and what the host
does meanwhile (the step breakdown's host categories). A trace that already replays CUDA graphs
(launch.is_graph_launch) is not told to use them. Saving: the GPU's idle time per step waiting
for the host or for other work (host wait + other); kernel waits (gaps under 30 us between queued
kernels) are the cost of running kernels back to back and stay. It includes the savings of the
findings about one cause of that idle (syncs, input loading, launching).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...trace.schema import LAUNCH_KINDS, Kind
from .. import ranges
from ..idle import HOST_WAIT, KERNEL_WAIT, OTHER, idle_by_cause
from ..kinds import of_kinds
from ..launch import is_graph_launch
from ..names import name_mask
from ..recommendations import Context, Finding, finding, step_evidence
from ..savings import BANDS, saving
from .compile import is_compile_dominated

LOW_UTILIZATION = 0.5
# The host's categories of the step breakdown, as the detail names them.
HOST_WORK = {"cpu_exec_us": "in operators (CPU Exec)", "runtime_us": "in CUDA runtime calls",
             "dataloader_us": "loading data", "other_us": "outside any operator (Python, the framework)"}


def _busy_per_step(ctx: Context, device: int) -> np.ndarray:
    events = ctx.tables.events
    kernels = np.flatnonzero((events["kind"].to_numpy() == Kind.KERNEL) & (events["device"].to_numpy() == device))
    start = events["ts"].to_numpy()[kernels]
    busy = ranges.union(start, start + events["dur"].to_numpy()[kernels])
    return np.array([ranges.clip_total(busy, s, e) for s, e in zip(ctx.steps.starts, ctx.steps.ends)])


def _graph_launches_per_step(ctx: Context) -> float:
    events = ctx.tables.events
    graph = of_kinds(events["kind"].to_numpy(), LAUNCH_KINDS) & name_mask(events["name"], is_graph_launch)
    inside = ranges.covers(ranges.union(ctx.steps.starts, ctx.steps.ends), events["ts"].to_numpy()[graph])
    return float(inside.sum()) / max(len(ctx.steps.names), 1)


def _where_the_step_goes(ctx: Context, idle: np.ndarray, graphs: float) -> str:
    """The detail: the GPU's idle by cause, what the host does, and what to try."""
    step = ctx.step_time_us
    host = {k: float(ctx.breakdown[k].mean()) for k in HOST_WORK}
    doing = "; ".join(f"{us:,.0f} us {HOST_WORK[k]}" for k, us in sorted(host.items(), key=lambda kv: -kv[1])
                      if us >= 0.01 * step)
    text = (f"Of the {step:,.0f} us step, the GPU waits {idle[HOST_WAIT]:,.0f} us for the host to launch work, "
            f"{idle[OTHER]:,.0f} us for other work (other streams, syncs) and {idle[KERNEL_WAIT]:,.0f} us between "
            f"queued kernels. Meanwhile the host spends {doing or 'little time'}. ")
    if graphs > 0:
        return text + (f"The step already replays CUDA graphs ({graphs:.3g} graph launch{'' if graphs == 1 else 'es'} a step), so it is the "
                       "host's work around them that sets the step time: move that work out of the step (logging, "
                       "metrics, optimizer bookkeeping), bring the eager code between graphs into the compiled "
                       "region, or give each step more GPU work (a larger batch).")
    return text + ("Look at the step breakdown for the host's largest costs; larger batches, fewer host-device "
                   "synchronisations, or torch.compile with CUDA graphs (mode=\"reduce-overhead\") usually help.")


def low_gpu_utilization(ctx: Context) -> list[Finding]:
    if is_compile_dominated(ctx):
        return []
    windows = (ctx.steps.starts, ctx.steps.ends)
    graphs = _graph_launches_per_step(ctx)
    found = []
    for gpu in ctx.gpus:
        util = gpu.get("utilization_ratio")
        if util is None or util >= LOW_UTILIZATION:
            continue
        evidence: list[dict[str, Any]] = [{"kind": "gpu", "label": f"GPU {gpu['device']}", "device": gpu["device"],
                                           "utilization_ratio": util}]
        idle = np.zeros(3)
        if len(ctx.steps.names):
            lengths = ctx.steps.ends - ctx.steps.starts
            per_step = _busy_per_step(ctx, gpu["device"]) / np.where(lengths > 0, lengths, 1)
            evidence += [step_evidence(ctx, int(i), utilization_ratio=round(float(per_step[i]), 6))
                         for i in np.argsort(per_step, kind="stable")[:3]]
            idle = idle_by_cause(ctx.device_gaps[gpu["device"]], windows).mean(axis=0)
        found.append(finding(
            "low_gpu_utilization",
            saving(idle[HOST_WAIT] + idle[OTHER], ctx.step_time_us, "GPU idle waiting for the host or other work"),
            f"GPU {gpu['device']} is busy only {util:.1%} of the step time",
            _where_the_step_goes(ctx, idle, graphs),
            numbers={"utilization_ratio": util, "device": gpu["device"],
                     **{f"{c}_us": round(float(v), 3) for c, v in zip(("host_wait", "kernel_wait", "other"), idle)},
                     "graph_launches_per_step": round(graphs, 3)},
            thresholds={"utilization_ratio": LOW_UTILIZATION, **BANDS},
            evidence=evidence))
    return found
