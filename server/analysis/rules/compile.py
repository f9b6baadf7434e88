"""torch.compile findings.

- `graph_breaks`: torch.compile split the typical compiled call into several graphs. Counted as
  the compile view counts them (see its note): a compiled call's graph breaks are its nested
  compiled regions. Fires when the median call has at least 1; medium from 3, high from 10.
  No saving is claimed: what fusing across a break would save is not in the timeline (the
  eager code between the graphs is in the step breakdown). Evidence: where the calls broke (the
  user's Python frame when the trace has stacks, else the resume region and the region it
  broke out of), most frequent first, each with the resume region's event id.
- `compile_dominated`: torch.compile compiled (its host time, the compile view's total) for over
  half of the steps' time: a first call's trace, which says little of the steady state. Saving:
  the compile time per step (a one-time cost: cached or warmed up, the steps run without it).
  Evidence: the longest compile ranges.
"""

from __future__ import annotations

import numpy as np

from ..recommendations import Context, Finding, finding
from ..savings import BANDS, no_saving, saving

MIN_GRAPH_BREAKS_PER_CALL = 1
MEDIUM_GRAPH_BREAKS_PER_CALL = 3
HIGH_GRAPH_BREAKS_PER_CALL = 10
MAX_EVIDENCE = 5
COMPILE_DOMINATED = 0.5  # share of the steps' time spent compiling


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
        "graph_breaks", no_saving("not estimated: what fusing across the breaks would save is not in the "
                                  "timeline", _severity(per_call)),
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


def is_compile_dominated(ctx: Context) -> bool:
    """torch.compile compiled for over COMPILE_DOMINATED of the steps' time."""
    steps_us = float((ctx.steps.ends - ctx.steps.starts).sum())
    return steps_us > 0 and float(ctx.compiling["total_us"] or 0.0) > COMPILE_DOMINATED * steps_us


def compile_dominated(ctx: Context) -> list[Finding]:
    if not is_compile_dominated(ctx):
        return []
    total = float(ctx.compiling["total_us"])
    steps_us = float((ctx.steps.ends - ctx.steps.starts).sum())
    roots = sorted(ctx.compiling["roots"], key=lambda r: -r["dur_us"])[:MAX_EVIDENCE]
    return [finding(
        "compile_dominated",
        saving(total / max(len(ctx.steps.names), 1), ctx.step_time_us, "torch.compile's compile time per step"),
        f"torch.compile compiles for {total / 1e6:,.3g} s of the {steps_us / 1e6:,.3g} s of steps "
        f"({total / steps_us:.0%}): this trace is of a first call",
        "Compiling is a one-time cost, which this trace is mostly made of; the torch.compile view shows "
        "where it went. Profile steps after a warm-up (`torch.profiler.schedule(wait=, warmup=, active=)`) "
        "to see the steady state. To pay less of it on each start: keep the compile caches "
        "(`TORCHINDUCTOR_CACHE_DIR`, `torch.compiler.save_cache_artifacts`), avoid recompiling on new "
        "shapes (`dynamic=True`, `mark_dynamic`), or use a faster mode than max-autotune.",
        numbers={"compile_us": round(total, 3), "steps_us": round(steps_us, 3),
                 "compile_ratio": round(total / steps_us, 6)},
        thresholds={"compile_ratio": COMPILE_DOMINATED, **BANDS},
        evidence=[{"kind": "range", "label": f"{r['name']} ({r['dur_us'] / 1e6:,.3g} s)", "event_id": r["event_id"],
                   "start_us": r["start_us"], "end_us": r["end_us"]} for r in roots])]
