"""Kernel view: every GPU kernel, aggregated by name (or name and launching operator).

- Calls, total / mean / max / min duration: over the kernel events of the trace.
- Mean blocks per SM, mean est. achieved occupancy: the trace's per-kernel values averaged
  with each kernel's duration as its weight (kernels without the value are left out). Kineto
  writes an occupancy of 0 where CUPTI could not estimate it (a kernel that ran had warps on an
  SM): a kernel whose every call says 0 has no occupancy (shown as n/a); where only some calls
  say 0, they count in the mean, as in the reference.
- Tensor cores: told from the kernel name (see the tensor-core note); "guess" marks names
  that a rule can misjudge (e.g. Triton templates, which may or may not use `tl.dot`).
- Launching operator: the operator whose runtime call launched the kernel (see the
  operator tree's note); kernels launched outside any operator have none.
- Filtered by an operator: the kernels launched by it or by the operators it called.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..trace.schema import Kind
from .optree import OpTree
from .records import clean_row
from .tensor_cores import tensor_core_family

KernelGrouping = Literal["name", "name_op"]


def _tensor_core_flags(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel row: uses tensor cores, and whether that is a guess."""
    families = [tensor_core_family(str(c)) for c in names.cat.categories]
    used = np.array([f is not None for f in families] + [False], dtype=bool)
    guess = np.array([f is not None and f.guess for f in families] + [False], dtype=bool)
    codes = names.cat.codes.to_numpy()
    codes = np.where(codes >= 0, codes, len(families))
    return used[codes], guess[codes]


def _dims(text: Any) -> list[int] | None:
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _weighted(values: np.ndarray, weights: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    has = np.isfinite(values) & (values >= 0)
    top = np.bincount(group[has], weights=values[has] * weights[has], minlength=groups)
    bottom = np.bincount(group[has], weights=weights[has], minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.nan)


def kernel_rows(events: pd.DataFrame, tree: OpTree, op: str | None = None) -> np.ndarray:
    """Event rows of the kernels, optionally only those launched under operator `op`."""
    kind = events["kind"].to_numpy()
    dur = events["dur"].to_numpy()
    rows = np.flatnonzero((kind == Kind.KERNEL) & np.isfinite(dur) & np.isfinite(events["ts"].to_numpy()))
    if op is None:
        return rows
    named = events["name"].array[tree.rows] == op
    under = tree.ancestors_or_self(tree.launcher[rows], np.asarray(named, dtype=bool))
    return rows[under]


def kernel_table(events: pd.DataFrame, tree: OpTree, group_by: KernelGrouping = "name",
                 op: str | None = None) -> list[dict[str, Any]]:
    """Kernel rows (see the note above), by total time, largest first."""
    rows = kernel_rows(events, tree, op)
    if not len(rows):
        return []
    names = events["name"].iloc[rows]
    dur = events["dur"].to_numpy()[rows]
    used, guess = _tensor_core_flags(names)
    keys = {"name": names.cat.codes.to_numpy()}
    launcher = tree.launcher[rows]
    if group_by == "name_op":
        op_rows = tree.event_rows(launcher)
        op_codes = events["name"].cat.codes.to_numpy()
        keys.update({
            "op": np.where(op_rows >= 0, op_codes[np.maximum(op_rows, 0)], -1),
            "grid": events["grid"].cat.codes.to_numpy()[rows],
            "block": events["block"].cat.codes.to_numpy()[rows],
            "registers_per_thread": events["registers_per_thread"].to_numpy()[rows],
            "shared_memory_bytes": events["shared_memory"].to_numpy()[rows],
        })
    group, first = _group_ids(keys)
    count = len(first)
    calls = np.bincount(group, minlength=count)
    total = np.bincount(group, weights=dur, minlength=count)
    maximum = np.full(count, -np.inf)
    np.maximum.at(maximum, group, dur)
    minimum = np.full(count, np.inf)
    np.minimum.at(minimum, group, dur)
    blocks = _weighted(events["blocks_per_sm"].to_numpy()[rows], dur, group, count)
    occupancy_values = events["occupancy"].to_numpy()[rows]
    occupancy = _weighted(occupancy_values, dur, group, count) / 100.0
    occupancy[np.bincount(group, weights=occupancy_values > 0, minlength=count) == 0] = np.nan

    categories = events["name"].cat.categories
    out = []
    for g in np.argsort(-total, kind="stable"):
        i = first[g]
        row = {
            "name": str(names.iat[i]),
            "calls": int(calls[g]),
            "total_us": total[g],
            "mean_us": total[g] / calls[g],
            "max_us": maximum[g],
            "min_us": minimum[g],
            "tensor_cores": used[i],
            "tensor_cores_guess": guess[i],
            "blocks_per_sm": blocks[g],
            "achieved_occupancy_ratio": occupancy[g],
        }
        if group_by == "name_op":
            node = launcher[i]
            op_code = keys["op"][i]
            row.update({
                "op": str(categories[op_code]) if op_code >= 0 else None,
                "grid": _dims(events["grid"].iat[rows[i]]),
                "block": _dims(events["block"].iat[rows[i]]),
                "registers_per_thread": keys["registers_per_thread"][i] if keys["registers_per_thread"][i] >= 0 else None,
                "shared_memory_bytes": keys["shared_memory_bytes"][i] if keys["shared_memory_bytes"][i] >= 0 else None,
                "op_tc_eligible": bool(node >= 0 and tree.tc_eligible[node]),
            })
        out.append(clean_row(row))
    return out


def _group_ids(keys: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Group id of each row over the key columns, and the first row of each group."""
    frame = pd.DataFrame(keys)
    group = frame.groupby(list(keys), sort=False, dropna=False).ngroup().to_numpy()
    _, first = np.unique(group, return_index=True)
    return group, first
