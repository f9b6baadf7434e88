"""torch.compile view: operators that ran as aten inside compiled graphs.

Inductor's generated code for a graph runs under a `## Call CompiledFxGraph <key> ##` range.
Its direct children are the graph's work: Triton kernels (`triton_*` host events) and aten
operators, which are the ops Inductor left to aten: extern kernels it calls on purpose
(`aten::mm`, `aten::convolution`: cuBLAS and cuDNN beat generated code there) and fallbacks
for ops it cannot lower. Per operator name: calls, host time, and device time (the kernels
the call and the ops under it launched).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..trace.tables import TraceTables
from .names import name_mask
from .optree import OpTree
from .records import clean_row

GRAPH_CALL_PREFIX = "## Call CompiledFxGraph"


def aten_in_graphs(tables: TraceTables, tree: OpTree) -> dict[str, Any]:
    """`rows` (name, calls, host_us, device_us; most device time first), the number of graph
    calls and of Triton kernel calls among the graphs' direct children."""
    events = tables.events
    names = events["name"].iloc[tree.rows]
    graph = name_mask(names, lambda n: n.startswith(GRAPH_CALL_PREFIX))
    under = np.zeros(len(tree.rows), dtype=bool)
    has_parent = tree.parent >= 0
    under[has_parent] = graph[tree.parent[has_parent]]
    aten = under & name_mask(names, lambda n: n.startswith("aten::")) & ~tree.merged
    triton = under & name_mask(names, lambda n: n.startswith("triton_"))
    rows = tree.rows[aten]
    table = (events.iloc[rows][["name", "dur"]].assign(device_us=tree.device_total_us[aten])
             .groupby("name", observed=True).agg(calls=("dur", "size"), host_us=("dur", "sum"),
                                                 device_us=("device_us", "sum"))
             .reset_index().sort_values(["device_us", "name"], ascending=[False, True], kind="stable"))
    table["name"] = table["name"].astype(str)
    return {"graph_calls": int(graph.sum()), "triton_calls": int(triton.sum()),
            "rows": [clean_row(r) for r in table.to_dict("records")]}
