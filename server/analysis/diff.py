"""Diff: what changed between two selections (run, worker, span each), per training step.

Each side is read once (`side`): the Overview's steps and average step, its GPU summary and
findings, and the operators, kernels and nn.Modules of its steps. Runs with different numbers
of steps compare per step: every number is a sum over the side's steps divided by how many
steps it has.

- Steps: the Overview's average step (`total_us` and each category's `*_us`), base, new and
  new - base. `step_delta_ratio` = new average step / base average step - 1.
- Verdict: `regression` when the step got slower by more than VERDICT_BAND (2%),
  `improvement` when faster by more, else `unchanged`: a few profiled steps of the same program
  vary by a percent or two from one run to the next, so smaller changes are not news.
- Operators (by name, or by name and input shapes) and kernels (by name): the calls and times
  that start within the steps (from the first step's start, or its ProfilerStep range's start for
  operators, to the last step's end; kernels running before the first step were launched before
  it), per step. An operator's device time
  is its device total (the GPU time of what it and the operators it called launched), its host
  time its host total.
- Modules: the Module view's tree matched by module path (`ResNet_0 / Sequential_1 /
  Bottleneck_0`): occurrences, device and host total per step (the Module view counts the whole
  trace, which profiler schedules record as its steps).
- Status of an item: `added` (not in base), `removed` (not in new), else from the deltas of its
  device time and (operators, modules) host time: a time changed when |delta| is over
  NOISE_FLOOR_US (5 us per step: about what launch jitter and timer rounding move a short kernel
  or call by) and over NOISE_SHARE (5%) of the larger of its two values (a long kernel varies by
  a few percent between runs). Both bars must be passed: a 1 us kernel becoming 3 us is +200% but
  no news; 50 us more of a 10 ms kernel is noise. `increased` or `decreased` follows the largest
  changed time (a sync's host time, a GEMM's device time); `unchanged` when none changed. Lists
  are sorted by the largest |delta| of an item's times, largest first.
- GPU: utilization, est. SM efficiency, est. achieved occupancy and tensor-core share of the
  Overview's GPU summary (the mean over the worker's GPUs), base, new and delta.
- Memory: the highest peak allocated bytes over the worker's GPUs (the Memory view's curve),
  base, new and delta; None without memory records.
- Recommendations: ids found in base but not in new (`resolved`) and in new but not in base
  (`new`), from each worker's own findings (the rules across ranks are not compared).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..trace.tables import TraceTables
from .kernels import kernel_rows
from .memory import devices
from .memory_curve import curve
from .operators import operator_nodes, shape_text
from .optree import OpTree
from .records import clean, clean_row
from .steps import host_steps

NOISE_FLOOR_US = 5.0
NOISE_SHARE = 0.05
VERDICT_BAND = 0.02
GPU_KEYS = ("utilization_ratio", "sm_efficiency_ratio", "achieved_occupancy_ratio", "tensor_core_ratio")
MODULE_SEPARATOR = " / "

Grouping = Literal["name", "name_shape"]
Status = Literal["added", "removed", "increased", "decreased", "unchanged"]


@dataclass(frozen=True)
class Side:
    """What a diff reads of one selection; tables hold per-step numbers, keyed by `key`."""

    steps: int
    span: tuple[float, float]  # the first step's start, the last step's end (us, trace clock)
    average: dict[str, float]  # the Overview's average step, *_us
    gpu: dict[str, float | None]  # GPU_KEYS
    memory_peak_bytes: int | None
    recommendations: list[str]  # finding ids
    operators: pd.DataFrame  # name[, input_shape], calls, device_us, host_us
    kernels: pd.DataFrame  # name, calls, device_us
    modules: pd.DataFrame  # name (the path), calls, device_us, host_us


def side(tables: TraceTables, overview: dict[str, Any], tree: OpTree, modules: list[dict[str, Any]],
         group_by: Grouping = "name") -> Side:
    """One selection's side of a diff: `overview` is its worker's own (overview.worker_overview),
    `modules` the Module view's rows (modules.module_view's `modules`)."""
    events = tables.events
    steps = overview["steps"]
    n = len(steps)
    lo, hi = (steps[0]["start_us"], steps[-1]["end_us"]) if n else (np.inf, -np.inf)
    # The first step's host range may begin before the step (which starts after the device work
    # launched before it): its operators count from there.
    host = host_steps(events)
    host_lo = min(lo, float(host["ts"].iloc[0])) if len(host) else lo
    return Side(
        steps=n,
        span=(float(lo), float(hi)),
        average={k: v for k, v in overview["average"].items() if k.endswith("_us")},
        gpu={k: _mean([g[k] for g in overview["gpus"]]) for k in GPU_KEYS},
        memory_peak_bytes=memory_peak(tables),
        recommendations=sorted({f["id"] for f in overview["recommendations"]}),
        operators=_per_step(_operator_calls(events, tree, host_lo, hi, group_by), n),
        kernels=_per_step(_kernel_calls(events, tree, lo, hi), n),
        modules=_per_step(_module_rows(modules), n),
    )


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def memory_peak(tables: TraceTables) -> int | None:
    """The highest peak allocated bytes over the GPUs with memory records (None without any)."""
    peaks = [p["bytes"] for dev in devices(tables) if dev["device"].startswith("GPU") and dev["has_totals"]
             if (p := curve(tables, dev["device"], width_px=1)["peak_allocated"]) is not None]
    return max(peaks) if peaks else None


def _within(ts: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (ts >= lo) & (ts < hi)


def _operator_calls(events: pd.DataFrame, tree: OpTree, lo: float, hi: float, group_by: Grouping) -> pd.DataFrame:
    """One row per operator call within [lo, hi) (the operator view's calls: see operators.py)."""
    nodes = operator_nodes(events, tree)
    nodes = nodes[_within(events["ts"].to_numpy()[tree.rows[nodes]], lo, hi)]
    picked = tree.rows[nodes]
    frame = pd.DataFrame({
        "name": events["name"].array[picked],
        "calls": 1,
        "device_us": tree.device_total_us[nodes],
        "host_us": events["dur"].to_numpy()[picked],
    })
    if group_by == "name_shape":
        frame.insert(1, "input_shape", events["input_dims"].array[picked])  # the recorded text: see _per_step
    return frame


def _kernel_calls(events: pd.DataFrame, tree: OpTree, lo: float, hi: float) -> pd.DataFrame:
    rows = kernel_rows(events, tree)
    rows = rows[_within(events["ts"].to_numpy()[rows], lo, hi)]
    return pd.DataFrame({"name": events["name"].array[rows], "calls": 1,
                         "device_us": events["dur"].to_numpy()[rows]})


def module_paths(modules: list[dict[str, Any]]) -> list[str]:
    """Each Module view row's path of instance names from its top-level module."""
    path_of: dict[int, str] = {}
    for m in modules:  # preorder: a parent comes before its children
        parent = m["parent_id"]
        path_of[m["id"]] = m["name"] if parent is None else path_of[parent] + MODULE_SEPARATOR + m["name"]
    return [path_of[m["id"]] for m in modules]


def _module_rows(modules: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame({"name": module_paths(modules), "calls": [m["occurrences"] for m in modules],
                         "device_us": [m["device_total_us"] for m in modules],
                         "host_us": [m["host_total_us"] for m in modules]})


def _per_step(calls: pd.DataFrame, steps: int) -> pd.DataFrame:
    """Sums by key (the text columns), divided by the number of steps."""
    keys = [c for c in calls.columns if c in ("name", "input_shape")]
    # Keys stay categorical until grouped: a big trace's millions of calls are never made strings.
    table = calls.groupby(keys, sort=False, observed=True, dropna=False).sum().reset_index()
    table["name"] = table["name"].astype(str)
    if "input_shape" in keys:  # recorded texts that read the same once made readable are one shape
        table["input_shape"] = [shape_text(None if pd.isna(d) else str(d)) for d in table["input_shape"]]
        table = table.groupby(keys, sort=False).sum().reset_index()
    values = [c for c in table.columns if c not in keys]
    table[values] = table[values].astype(float) / max(steps, 1)
    return table


def status(base: dict[str, float] | None, new: dict[str, float] | None) -> Status:
    """An item's status from its times per step in base and new (None: not in that run): changed
    when one of its times changed past both noise bars, in the direction of the largest such change."""
    if base is None:
        return "added"
    if new is None:
        return "removed"
    changes = [new[k] - base[k] for k in base
               if abs(new[k] - base[k]) > max(NOISE_FLOOR_US, NOISE_SHARE * max(abs(base[k]), abs(new[k])))]
    if not changes:
        return "unchanged"
    return "increased" if max(changes, key=abs) > 0 else "decreased"


def verdict(step_delta_ratio: float | None) -> Literal["regression", "improvement", "unchanged"]:
    if step_delta_ratio is None or abs(step_delta_ratio) <= VERDICT_BAND:
        return "unchanged"
    return "regression" if step_delta_ratio > 0 else "improvement"


def matched(base: pd.DataFrame, new: pd.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    """Items of both tables matched by key, with their status, largest |delta| first."""
    keys = [c for c in base.columns if c in ("name", "input_shape")]
    both = base.merge(new, on=keys, how="outer", suffixes=("_base", "_new"), indicator=True)
    in_base = both["_merge"].to_numpy() != "right_only"
    in_new = both["_merge"].to_numpy() != "left_only"
    times = ["device_us", "host_us"] if "host_us_base" in both.columns else ["device_us"]
    filled = both.fillna({c: 0.0 for c in both.columns if c.endswith(("_base", "_new"))})
    out = []
    for i, row in enumerate(filled.to_dict("records")):
        base_times, new_times = ({t: row[f"{t}_{side}"] for t in times} for side in ("base", "new"))
        item = {key: row[key] for key in keys}
        item.update({
            "status": status(base_times if in_base[i] else None, new_times if in_new[i] else None),
            "base_calls": row["calls_base"], "new_calls": row["calls_new"],
        })
        for t in times:
            item.update({f"base_{t}": base_times[t], f"new_{t}": new_times[t], f"delta_{t}": new_times[t] - base_times[t]})
        out.append((max(abs(new_times[t] - base_times[t]) for t in times), clean_row(item)))
    out.sort(key=lambda pair: -pair[0])
    return [item for _, item in out[:limit]]


def _three(base: dict[str, Any], new: dict[str, Any]) -> dict[str, dict[str, Any]]:
    delta = {k: None if base[k] is None or new[k] is None else new[k] - base[k] for k in base}
    return {"base": clean_row(base), "new": clean_row(new), "delta": clean_row(delta)}


def compare(base: Side, new: Side, limit: int | None = None) -> dict[str, Any]:
    """The diff of two sides (see the module note); `limit`: at most this many rows per table."""
    base_step, new_step = base.average.get("total_us", 0.0), new.average.get("total_us", 0.0)
    ratio = new_step / base_step - 1 if base_step > 0 else None
    base_ids, new_ids = set(base.recommendations), set(new.recommendations)
    memory_delta = (None if base.memory_peak_bytes is None or new.memory_peak_bytes is None
                    else new.memory_peak_bytes - base.memory_peak_bytes)
    return {
        "step_delta_ratio": clean("step_delta_ratio", ratio),
        "verdict": verdict(ratio),
        "step_count": {"base": base.steps, "new": new.steps},
        "steps": _three(base.average, new.average),
        "gpu": _three(base.gpu, new.gpu),
        "memory": {"base_peak_bytes": base.memory_peak_bytes, "new_peak_bytes": new.memory_peak_bytes,
                   "delta_bytes": memory_delta},
        "operators": matched(base.operators, new.operators, limit),
        "kernels": matched(base.kernels, new.kernels, limit),
        "modules": matched(base.modules, new.modules, limit),
        "recommendations": {"resolved": sorted(base_ids - new_ids), "new": sorted(new_ids - base_ids)},
        "warnings": ([f"The baseline has {base.steps} steps, the candidate {new.steps}: compared per step."]
                     if base.steps != new.steps else []),
    }
