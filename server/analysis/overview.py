"""Overview: where each step's time goes, and how busy each GPU was.

Steps are found as described in the Steps note (ProfilerStep ranges, extended to the end of
the GPU work they launched).

Step time breakdown: every microsecond of a step goes to exactly one category, the first
that covers it in this order: Kernel > Memcpy > Memset > Communication > Runtime >
DataLoader > CPU Exec > Other. So the categories sum to the step time.
- Kernel: GPU kernels other than communication kernels.
- Memcpy / Memset: GPU copies and fills.
- Communication: NCCL/RCCL kernels, and CPU-side gloo collectives.
- Runtime: host calls into the CUDA runtime or driver (launches, copies, synchronisation).
- DataLoader: `enumerate(DataLoader)#...__next__` on the host.
- CPU Exec: host operators and user annotations (not GPU-side annotations, not Python
  tracer frames).
- Other: step time covered by none of the above (e.g. Python between operators).
The average row is the mean over steps.

GPU summary, per device that ran kernels, over all steps (first step start to last step end):
- GPU utilization: time with at least one kernel running / all-steps time.
- Est. SM efficiency: per kernel min(blocks per SM, 1), summed over concurrent kernels and
  capped at 1, weighted by time / all-steps time.
- Est. achieved occupancy: kernels' `est. achieved occupancy %` weighted by their time within
  the steps.
- Kernel time using tensor cores: time of tensor-core kernels (told from kernel names) / all
  kernel time, within the steps.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

from ..trace.schema import Kind
from ..trace.tables import TraceTables
from . import ranges
from .categories import role_masks
from .devices import device_of_kernels
from .idle import gpu_idle, kernel_gaps
from .optree import OpTree
from .recommendations import Context, recommend, recommend_across_ranks
from .records import clean_row
from .steps import Steps, detect_steps
from .tensor_cores import uses_tensor_cores

CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")

# The trace's store keeps what step_breakdown and worker_overview return (with every rule of RULES and
# the analyses they read): bump the "breakdown" or "overview" item's version in server/items.py when
# it changes.


def step_breakdown(events: pd.DataFrame, steps: Steps) -> pd.DataFrame:
    """One row per step: total_us and each category's *_us, the categories summing to the total."""
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    layers = [ranges.union(ts[mask], end[mask]) for mask in role_masks(events).values()]
    shares = ranges.assign_by_priority(layers, (steps.starts, steps.ends))
    frame = pd.DataFrame(shares, columns=[f"{c}_us" for c in CATEGORIES])
    frame.insert(0, "total_us", steps.ends - steps.starts)
    frame.insert(0, "step", steps.names)
    return frame


def _step_rows(breakdown: pd.DataFrame, steps: Steps) -> list[dict[str, Any]]:
    """Breakdown rows with each step's range on the trace clock (for links to the trace view)."""
    rows = breakdown.to_dict("records")
    for row, start, end in zip(rows, steps.starts, steps.ends):
        row["start_us"], row["end_us"] = float(start), float(end)
    return [clean_row(row) for row in rows]


def gpu_summary(events: pd.DataFrame, steps: Steps, device_properties: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GPU that ran kernels: properties and utilization / SM efficiency / occupancy / tensor-core ratios."""
    kernels = np.flatnonzero(events["kind"].to_numpy() == Kind.KERNEL)
    if not len(kernels):
        return []
    lo, hi = steps.span
    span = hi - lo
    device = device_of_kernels(events, kernels)
    ts = events["ts"].to_numpy()[kernels]
    end = ts + events["dur"].to_numpy()[kernels]
    blocks = events["blocks_per_sm"].to_numpy()[kernels]
    occupancy = events["occupancy"].to_numpy()[kernels]
    tensor = uses_tensor_cores(events["name"])[kernels]
    clipped = np.clip(np.minimum(end, hi) - np.maximum(ts, lo), 0.0, None)
    props = {p.get("id"): p for p in device_properties if isinstance(p, dict)}
    out = []
    for dev in sorted(set(device.tolist())):
        on = device == dev
        busy = ranges.clip_total(ranges.union(ts[on], end[on]), lo, hi)
        out.append({
            "device": int(dev),
            **gpu_properties(props.get(dev)),
            "utilization_ratio": busy / span if span > 0 else None,
            "sm_efficiency_ratio": _sm_efficiency(ts[on], end[on], blocks[on], lo, hi),
            "achieved_occupancy_ratio": _weighted_mean(occupancy[on], clipped[on], scale=0.01),
            "tensor_core_ratio": _ratio(clipped[on & tensor].sum(), clipped[on].sum()),
        })
    return out


def gpu_properties(prop: dict[str, Any] | None) -> dict[str, Any]:
    """A GPU's name, memory and compute capability from its deviceProperties entry."""
    if not prop:
        return {"name": None, "memory_bytes": None, "compute_capability": None}
    # The trace's own JSON: a value of another type than Kineto writes counts as absent.
    name, memory = prop.get("name"), prop.get("totalGlobalMem")
    major, minor = (v if isinstance(v, int) and not isinstance(v, bool) else None
                    for v in (prop.get("computeMajor"), prop.get("computeMinor")))
    return {
        "name": name if isinstance(name, str) else None,
        "memory_bytes": memory if isinstance(memory, int) and not isinstance(memory, bool) else None,
        "compute_capability": f"{major}.{minor}" if major is not None and minor is not None else None,
    }


def _sm_efficiency(ts: np.ndarray, end: np.ndarray, blocks: np.ndarray, lo: float, hi: float) -> float | None:
    has = np.isfinite(blocks) & (blocks > 0)
    if not has.any() or hi <= lo:
        return None
    seg_start, seg_end, level = ranges.sweep_sum(ts[has], end[has], blocks[has])
    inside = np.clip(np.minimum(seg_end, hi) - np.maximum(seg_start, lo), 0.0, None)
    if not ((inside > 0) & (level > 0)).any():
        return None
    return float(np.sum(np.clip(level, 0.0, 1.0) * inside) / (hi - lo))


def _weighted_mean(values: np.ndarray, weights: np.ndarray, scale: float = 1.0) -> float | None:
    has = np.isfinite(values) & (values >= 0) & (weights > 0)
    if not has.any():
        return None
    return float(np.sum(values[has] * weights[has]) / np.sum(weights[has]) * scale)


def _ratio(part: float, whole: float) -> float | None:
    return float(part / whole) if whole > 0 else None


def overview(tables: TraceTables, tree_of: Callable[[], OpTree] | None = None,
             distributed_of: Callable[[], dict[str, Any] | None] | None = None,
             worker: str | None = None) -> dict[str, Any]:
    """The Overview view's data: per-step breakdown, its average, GPU summary, GPU idle time by
    cause, recommendations, warnings. `tree_of` gives the trace's operator tree when the caller
    has it memoised; `distributed_of` the run's Distributed view, in which this trace is
    `worker`, when the run has other workers (for the rules across ranks)."""
    own = worker_overview(tables, tree_of)
    view = distributed_of() if distributed_of is not None else None
    return across_ranks(own, view, worker) if view else own


def across_ranks(own: dict[str, Any], view: dict[str, Any], worker: str | None) -> dict[str, Any]:
    """A worker's overview (`worker_overview`'s) with the findings of the rules across ranks, read
    in the run's Distributed view `view` as `worker`; `own` is not changed."""
    return {**own, "recommendations": recommend_across_ranks(own["recommendations"], view, worker)}


def worker_overview(tables: TraceTables, tree_of: Callable[[], OpTree] | None = None, steps: Steps | None = None,
                    breakdown: pd.DataFrame | None = None) -> dict[str, Any]:
    """The overview of one worker on its own (no rule across ranks). `steps` and `breakdown` are
    the trace's (detect_steps, step_breakdown) when the caller has them."""
    events = tables.events
    steps = detect_steps(events) if steps is None else steps
    breakdown = step_breakdown(events, steps) if breakdown is None else breakdown
    rows = _step_rows(breakdown, steps)
    average = clean_row({k: float(breakdown[k].mean()) for k in breakdown.columns if k != "step"})
    gpus = gpu_summary(events, steps, tables.metadata.get("deviceProperties") or [])
    gaps = kernel_gaps(events, steps)
    return {
        "steps": rows,
        "average": average,
        "gpus": gpus,
        "idle": gpu_idle(events, steps, gaps),
        "recommendations": recommend(Context(tables, steps, breakdown, gpus, tree_of, gaps)),
        "warnings": list(tables.warnings) + steps.warnings,
    }
