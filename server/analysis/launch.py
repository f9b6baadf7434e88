"""Launch overhead: GPU time lost while the host is busy launching work.

1. GPU busy: the union of every kernel, memcpy and memset (any device of the worker).
2. Launching: the union of the host's launch calls, runtime or driver events whose name holds
   `Launch` (`cudaLaunchKernel`, `cudaLaunchKernelExC`, `cuLaunchKernel`, `cudaGraphLaunch`,
   ...).
3. Per step: idle while launching = step time inside a launch call with no GPU work running;
   its share of the step is `idle_launching_ratio`. A GPU that waits for the host to hand it
   kernels one by one shows a high share; CUDA graphs (one launch for many kernels) or larger
   kernels (bigger batches, fusion) remove it.
4. Kernels shorter than their launch: a kernel whose GPU duration is less than the host time of
   the call that launched it (matched by correlation id): the host cannot keep the GPU fed with
   such kernels. Counted per step of the launch call; the worst examples are those whose
   launch call exceeds the kernel most.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import DEVICE_KINDS, LAUNCH_KINDS, Kind
from ..trace.tables import TraceTables
from . import ranges
from .flows import build_flows
from .kinds import of_kinds
from .names import name_mask, names_at
from .records import clean_row
from .steps import Steps, detect_steps, step_of

MAX_EXAMPLES = 10


def _is_launch_name(name: str) -> bool:
    return "Launch" in name


def is_graph_launch(name: str) -> bool:
    """A launch call that replays a CUDA (HIP) graph: `cudaGraphLaunch`, `hipGraphLaunch`, `cuGraphLaunch`."""
    return "Graph" in name and _is_launch_name(name)


def launch_calls(events: pd.DataFrame) -> np.ndarray:
    """Rows of the host's launch calls (note 2)."""
    launch = of_kinds(events["kind"].to_numpy(), LAUNCH_KINDS)
    return np.flatnonzero(launch & name_mask(events["name"], _is_launch_name))


def _short_kernels(tables: TraceTables, calls: np.ndarray) -> pd.DataFrame:
    """One row per kernel tied to a launch call (`calls`: launch_calls'): kernel row, call row, both durations."""
    events = tables.events
    kind = events["kind"].to_numpy()
    is_call = np.zeros(len(events), dtype=bool)
    is_call[calls] = True
    # Only launch calls and kernels matter here: fwdbwd pairs need operators, so they are not matched (3 s
    # of the Llama trace's overview).
    flows = build_flows(tables, is_call | (kind == Kind.KERNEL), backward=False)
    pick = flows.cat == 0
    src, dst = flows.src[pick], flows.dst[pick]
    keep = (kind[dst] == Kind.KERNEL) & is_call[src]
    dur = events["dur"].to_numpy()
    # A graph launch queues a graph's kernels at once, one of them or many: only one-by-one launches are
    # compared (a graph that ran a single kernel had counted as one; HTA's test data has 35 such).
    graph = name_mask(events["name"].iloc[src[keep]], is_graph_launch)
    call, kernel = src[keep][~graph], dst[keep][~graph]
    return pd.DataFrame({"kernel": kernel, "call": call, "kernel_us": dur[kernel], "launch_us": dur[call]})


def launch_overhead(tables: TraceTables, steps: Steps | None = None) -> dict[str, Any]:
    """Per step the GPU time idle while the host launches (note 3) and the kernels shorter than
    their launch call (note 4), in us."""
    events = tables.events
    steps = steps or detect_steps(events)
    kind = events["kind"].to_numpy()
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    device = of_kinds(kind, DEVICE_KINDS)
    calls = launch_calls(events)
    busy = ranges.union(ts[device], end[device])
    launching = ranges.union(ts[calls], end[calls])
    windows = (steps.starts, steps.ends)
    split = ranges.assign_by_priority([busy, launching], windows)
    pairs = _short_kernels(tables, calls)
    short = pairs[pairs["kernel_us"] < pairs["launch_us"]]
    step_of_pair = step_of(steps, ts[pairs["call"].to_numpy()])
    step_of_short = step_of_pair[(pairs["kernel_us"] < pairs["launch_us"]).to_numpy()]
    step_of_call = step_of(steps, ts[calls])
    per_step = []
    for i, name in enumerate(steps.names):
        total = float(steps.ends[i] - steps.starts[i])
        idle = float(split[i, 1])
        mine = short[step_of_short == i]
        per_step.append(clean_row({
            "step": name, "start_us": float(steps.starts[i]), "end_us": float(steps.ends[i]), "total_us": total,
            "gpu_busy_us": float(split[i, 0]), "gpu_idle_us": total - float(split[i, 0]),
            "launching_us": ranges.clip_total(launching, steps.starts[i], steps.ends[i]),
            "idle_launching_us": idle, "idle_launching_ratio": idle / total if total > 0 else None,
            "launches": int((step_of_call == i).sum()), "kernels": int((step_of_pair == i).sum()),
            "short_kernels": len(mine), "short_kernel_us": float(mine["kernel_us"].sum()),
        }))
    return {"steps": per_step, "summary": _summary(per_step, pairs, short), "worst": _worst(events, short)}


def _summary(per_step: list[dict[str, Any]], pairs: pd.DataFrame, short: pd.DataFrame) -> dict[str, Any]:
    """Means over steps, and the whole trace's launched kernels."""
    def mean(key: str) -> float | None:
        values = [s[key] for s in per_step if s[key] is not None]
        return float(np.mean(values)) if values else None

    total = mean("total_us")
    launch_us = float(pairs["launch_us"].sum())
    idle = mean("idle_launching_us")
    return clean_row({
        "step_us": total, "idle_launching_us": idle,
        "gpu_busy_ratio": mean("gpu_busy_us") / total if total else None,
        "idle_launching_ratio": idle / total if total and idle is not None else None,
        "launches_per_step": mean("launches"), "kernels_per_step": mean("kernels"),
        "kernels": len(pairs), "short_kernels": len(short), "short_kernel_us": float(short["kernel_us"].sum()),
        "short_kernel_ratio": len(short) / len(pairs) if len(pairs) else None,
        "kernel_to_launch_ratio": pairs["kernel_us"].sum() / launch_us if launch_us > 0 else None,
        "median_kernel_us": float(pairs["kernel_us"].median()) if len(pairs) else None,
        "median_launch_us": float(pairs["launch_us"].median()) if len(pairs) else None,
    })


def _worst(events: pd.DataFrame, short: pd.DataFrame) -> list[dict[str, Any]]:
    """The short kernels whose launch call exceeds them most."""
    worst = short.assign(excess=short["launch_us"] - short["kernel_us"]).nlargest(MAX_EXAMPLES, "excess")
    ts = events["ts"].to_numpy()
    kernel_names = names_at(events["name"], worst["kernel"].to_numpy())
    call_names = names_at(events["name"], worst["call"].to_numpy())
    return [clean_row({
        "event_id": int(r.kernel), "launch_event_id": int(r.call), "name": str(kernel_name),
        "launch_name": str(call_name), "kernel_us": r.kernel_us, "launch_us": r.launch_us,
        "start_us": float(ts[r.call]), "end_us": float(ts[r.kernel] + r.kernel_us),
    }) for r, kernel_name, call_name in zip(worst.itertuples(), kernel_names, call_names)]
