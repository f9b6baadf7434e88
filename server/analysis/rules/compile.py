"""`graph_breaks`: torch.compile split the typical compiled call into several graphs.

Counted as the compile view counts them (see its note): a compiled call's graph breaks are its
nested compiled regions. Fires when the median call has at least 1; medium from 3, high from
10. Evidence: where the calls broke (the user's Python frame when the trace has stacks, else
the resume region and the region it broke out of), most frequent first, each with the resume
region's event id.
"""

from __future__ import annotations

import numpy as np

from ..recommendations import Context, Finding, finding

MIN_GRAPH_BREAKS_PER_CALL = 1
MEDIUM_GRAPH_BREAKS_PER_CALL = 3
HIGH_GRAPH_BREAKS_PER_CALL = 10
MAX_EVIDENCE = 5


def _severity(per_call: int) -> str:
    if per_call >= HIGH_GRAPH_BREAKS_PER_CALL:
        return "high"
    return "medium" if per_call >= MEDIUM_GRAPH_BREAKS_PER_CALL else "low"


def graph_breaks(ctx: Context) -> list[Finding]:
    regions = ctx.compiled
    summary = regions["summary"]
    per_call = summary["graph_breaks_per_call"]
    if summary["calls"] == 0 or per_call < MIN_GRAPH_BREAKS_PER_CALL:
        return []
    shares = [s["compiled_ratio"] for s in regions["steps"] if s["calls"] and s["compiled_ratio"] is not None]
    located = [loc for loc in regions["locations"] if loc["frame"]]
    where = "; ".join(sorted({loc["frame"] for loc in located})[:3])
    return [finding(
        "graph_breaks", _severity(per_call),
        f"torch.compile breaks each compiled call into {per_call + 1} graphs ({per_call} graph breaks)",
        (f"Graph breaks at {where}. " if where else "")
        + "Each break runs the code between graphs eagerly, launches the graphs separately and stops "
        "Inductor from fusing across them. Find the reasons with `TORCH_LOGS=graph_breaks` or "
        "`torch._dynamo.explain(model)(*inputs)`; common causes are `.item()`, `print`, data-dependent "
        "control flow and unsupported calls. `torch.compile(..., fullgraph=True)` turns breaks into errors.",
        numbers={"graph_breaks_per_call": per_call, "max_graph_breaks_per_call": summary["max_graph_breaks_per_call"],
                 "calls": summary["calls"], "graph_breaks": summary["graph_breaks"], "max_depth": summary["max_depth"],
                 "compiled_ratio": round(float(np.mean(shares)), 6) if shares else None},
        thresholds={"graph_breaks_per_call": MIN_GRAPH_BREAKS_PER_CALL,
                    "medium_graph_breaks_per_call": MEDIUM_GRAPH_BREAKS_PER_CALL,
                    "high_graph_breaks_per_call": HIGH_GRAPH_BREAKS_PER_CALL},
        evidence=[{"kind": "graph_break", **{k: loc[k] for k in (
            "label", "start_us", "end_us", "event_id", "region", "parent_region", "frame", "count")}}
                  for loc in regions["locations"][:MAX_EVIDENCE]])]
