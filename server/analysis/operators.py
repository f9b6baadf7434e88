"""Operator view: every PyTorch operator, aggregated by name (or name and input shapes).

Operators are the `cpu_op` events of the operator tree (see the tree's note), less the
annotations that old traces recorded as operators (ProfilerStep, DataLoader, Optimizer and
DataParallel wrappers).
- Calls: how many times it ran (nested calls to itself count once).
- Host total / self time: its duration on the CPU / less the operators and runtime calls
  inside it.
- Device total / self time: GPU time of the kernels, memcpys and memsets launched by it and
  the operators it called / by itself only.
- Tensor cores eligible: the operator is a matrix product, convolution, attention or RNN
  cell, calls one, or launched a tensor-core kernel.
- Tensor cores self / total %: share of its self / total device time spent in kernels that
  use tensor cores (told from kernel names); empty when it has no device time.
- Input shape: the `Input Dims` recorded with `record_shapes=True`, `[]` for none.
- Call stacks: the distinct Python stacks it was called from, each with its own numbers.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..trace.schema import Kind
from .callstacks import Stacks, op_stacks, parse_frame
from .names import name_mask
from .optree import OpTree
from .records import clean_row

OpGrouping = Literal["name", "name_shape"]

_NOT_OPERATORS = ("DataParallel.forward", "DistributedDataParallel.forward")
_NOT_OPERATOR_PREFIXES = ("ProfilerStep#", "Optimizer.", "enumerate(DataLoader)#", "enumerate(DataPipe)#")

# The trace's store keeps the calls op_instances returns: bump the "op_instances" item's version in
# server/items.py when they or callstacks.op_stacks change.
_SUMS = ("device_self_us", "device_total_us", "host_self_us", "host_total_us", "tc_self_us", "tc_total_us")


def is_operator_name(name: str) -> bool:
    return name not in _NOT_OPERATORS and not name.startswith(_NOT_OPERATOR_PREFIXES)


def shape_text(raw: str | None) -> str:
    """Input Dims as one readable, comparable string: `[[32, 3, 224, 224], []]`."""
    if not raw:
        return "[]"
    try:
        return json.dumps(json.loads(raw), separators=(", ", ": "))
    except ValueError:
        return raw


def _shapes(column: pd.Series) -> pd.Categorical:
    texts = np.array([shape_text(str(c)) for c in column.cat.categories] + ["[]"], dtype=object)
    codes = column.cat.codes.to_numpy()
    return pd.Categorical(texts[np.where(codes >= 0, codes, len(texts) - 1)])


def operator_nodes(events: pd.DataFrame, tree: OpTree) -> np.ndarray:
    """The tree's nodes that are operator calls (the Operator view's rows): CPU ops named as operators,
    not merged into a parent."""
    rows = tree.rows
    names = events["name"].iloc[rows]
    return np.flatnonzero((events["kind"].to_numpy()[rows] == Kind.CPU_OP) & ~tree.merged
                          & name_mask(names, is_operator_name))


def op_instances(events: pd.DataFrame, tree: OpTree) -> tuple[pd.DataFrame, Stacks]:
    """One row per operator call with its times, input shape and call-stack id."""
    nodes = operator_nodes(events, tree)
    picked = tree.rows[nodes]
    stacks = op_stacks(events, picked)
    frame = pd.DataFrame({
        "name": events["name"].array[picked],
        "input_shape": _shapes(events["input_dims"].iloc[picked]),
        "host_total_us": events["dur"].to_numpy()[picked],
        "host_self_us": tree.host_self_us[nodes],
        "device_self_us": tree.device_self_us[nodes],
        "device_total_us": tree.device_total_us[nodes],
        "tc_self_us": tree.tc_self_us[nodes],
        "tc_total_us": tree.tc_total_us[nodes],
        "tc_eligible": tree.tc_eligible[nodes],
        "stack": stacks.of_row[picked],
    })
    frame["name"] = frame["name"].cat.remove_unused_categories()
    return frame, stacks


def _ratio(part: pd.Series, whole: pd.Series) -> list[float | None]:
    return [float(p / w) if w > 0 else None for p, w in zip(part.tolist(), whole.tolist())]


def _aggregate(instances: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    grouped = instances.groupby(keys, observed=True, sort=False)
    table = grouped[list(_SUMS)].sum()
    table["calls"] = grouped.size()
    table["tc_eligible"] = grouped["tc_eligible"].any()
    table["has_call_stack"] = grouped["stack"].max() >= 0
    table = table.reset_index()
    table["tc_self_ratio"] = _ratio(table["tc_self_us"], table["device_self_us"])
    table["tc_total_ratio"] = _ratio(table["tc_total_us"], table["device_total_us"])
    return table.sort_values(["device_self_us", "host_self_us"], ascending=False, kind="stable")


def _records(table: pd.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    return [clean_row(row) for row in table[columns].to_dict("records")]


_ROW_COLUMNS = ["calls", "device_self_us", "device_total_us", "host_self_us", "host_total_us",
                "tc_self_ratio", "tc_total_ratio"]


def operator_table(instances: pd.DataFrame, group_by: OpGrouping = "name") -> list[dict[str, Any]]:
    """Operator rows (see the note above), by device self time, largest first."""
    keys = ["name"] if group_by == "name" else ["name", "input_shape"]
    table = _aggregate(instances, keys)
    columns = keys + _ROW_COLUMNS + ["tc_eligible", "has_call_stack"]
    for key in keys:
        table[key] = table[key].astype(str)
    return _records(table, columns)


def stack_table(instances: pd.DataFrame, stacks: Stacks, name: str, input_shape: str | None = None) -> list[dict[str, Any]]:
    """Per distinct call stack of one operator (and shape): its numbers and frames, innermost first."""
    mine = instances[(instances["name"] == name).to_numpy() & (instances["stack"].to_numpy() >= 0)]
    if input_shape is not None:
        mine = mine[(mine["input_shape"] == input_shape).to_numpy()]
    table = _aggregate(mine, ["stack"])
    rows = _records(table, ["stack"] + _ROW_COLUMNS)
    for row in rows:
        row["frames"] = [parse_frame(f) for f in stacks.frames[row.pop("stack")]]
    return rows
