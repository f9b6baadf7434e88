"""`tensor_cores_unused`: matrix products and convolutions that run without tensor cores on a GPU
that has them.

1. GPUs with tensor cores: compute capability 7.0 or later (deviceProperties); GPUs the trace
   gives no properties for are left out.
2. An eligible call: an operator that can use tensor cores by name (`is_tc_eligible_op`:
   matmul, addmm, convolution, attention, ...), taken at its innermost eligible level (for
   `aten::linear` -> `aten::addmm`, the addmm: the casts autocast adds under linear are not
   the product). It used tensor cores when any kernel under it did (kernel names,
   tensor_cores.py). The kernels of calls that did not, within the steps, are the unused time.
3. Fires per GPU when that time is at least 10% of the steps' time (below that, faster
   products would not change the step much).
4. Saving, a bound rather than a measurement: the unused time per step times
   (1 - 1 / ASSUMED_SPEEDUP). Tensor cores run these products 2x (memory-bound shapes) to over
   8x (TF32 or bf16 against float32 on Ampere and later) faster; the lower end is assumed, and
   the step saves it only where the GPU sets the step time.
Suggestion: float32 operators -> TF32 (compute capability 8.0 or later) or bf16/fp16 autocast;
half types, or operators whose other calls did use tensor cores (so precision settings allow
them) -> shapes cuBLAS/cuDNN can tile on tensor cores (dimensions multiples of 8, channels_last).
Evidence: the 5 operators with most unused time, each at its longest call.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from ...trace.schema import Kind
from ..names import name_mask, names_at
from ..optree import climb, subtree_sums
from ..devices import device_of_kernels
from ..recommendations import Context, Finding, finding
from ..savings import BANDS, saving
from ..tensor_cores import is_tc_eligible_op

MIN_COMPUTE_CAPABILITY = 7.0
TF32_COMPUTE_CAPABILITY = 8.0
UNUSED_SHARE = 0.10
ASSUMED_SPEEDUP = 2.0
MAX_EVIDENCE = 5

_HALF_TYPES = ("c10::Half", "c10::BFloat16", "Half", "BFloat16")


def _innermost_eligible(ctx: Context) -> np.ndarray:
    """Per tree node: eligible by name, with no eligible node below it."""
    tree = ctx.tree
    eligible = name_mask(ctx.tables.events["name"], is_tc_eligible_op)[tree.rows] & ~tree.merged
    below = subtree_sums(tree.parent, eligible.astype(np.int64)) - eligible
    return eligible & (below == 0)


def _unused_kernels(ctx: Context) -> pd.DataFrame:
    """Kernels inside the steps under an eligible call that used no tensor cores: device, call
    node, time inside the steps."""
    events, tree = ctx.tables.events, ctx.tree
    kernels = np.flatnonzero(events["kind"].to_numpy() == Kind.KERNEL)
    innermost = _innermost_eligible(ctx)
    call = climb(tree.launcher[kernels], tree.parent, lambda _, nodes: innermost[nodes])
    unused = call >= 0
    unused[unused] = tree.tc_total_us[call[unused]] <= 0
    lo, hi = ctx.steps.span
    ts = events["ts"].to_numpy()[kernels]
    inside = np.clip(np.minimum(ts + events["dur"].to_numpy()[kernels], hi) - np.maximum(ts, lo), 0.0, None)
    device = device_of_kernels(events, kernels)
    keep = unused & (inside > 0)
    return pd.DataFrame({"device": device[keep], "node": call[keep], "us": inside[keep]})


def _is_float_type(text: str) -> bool:
    """Tensor element types that matter here (Kineto also lists Scalar, Int, ScalarList, ...)."""
    return text in ("float", "double") or text in _HALF_TYPES or text.startswith("c10::Float8")


def _input_types(ctx: Context, rows: np.ndarray) -> list[str]:
    """Distinct floating input types of the operators at `rows` (e.g. "float", "c10::BFloat16")."""
    found: set[str] = set()
    for text in ctx.tables.events["input_type"].iloc[rows].dropna().unique():
        try:
            types = json.loads(text)
        except (TypeError, ValueError):
            continue
        found.update(t for t in types if isinstance(t, str) and _is_float_type(t))
    return sorted(found)


def _ops_using_tensor_cores(ctx: Context) -> set[str]:
    """Names of eligible operators with at least one call that used tensor cores."""
    tree = ctx.tree
    used = _innermost_eligible(ctx) & (tree.tc_total_us > 0)
    return set(ctx.tables.events["name"].iloc[tree.rows[used]].astype(str))


def _evidence(ctx: Context, mine: pd.DataFrame) -> list[dict[str, Any]]:
    events, tree = ctx.tables.events, ctx.tree
    elsewhere = _ops_using_tensor_cores(ctx)
    per_call = mine.groupby("node")["us"].sum()
    rows = tree.event_rows(per_call.index.to_numpy())
    calls = pd.DataFrame({"row": rows, "us": per_call.to_numpy(),
                          "op": names_at(events["name"], rows).astype(str)})
    out = []
    for op, group in calls.groupby("op"):
        worst = int(group.loc[group["us"].idxmax(), "row"])
        start = float(events["ts"].iloc[worst])
        out.append({"kind": "operator", "label": f"{op} without tensor cores",
                    "event_id": worst, "start_us": start, "end_us": start + float(events["dur"].iloc[worst]),
                    "op": op, "calls": int(len(group)), "unused_us": round(float(group["us"].sum()), 3),
                    "input_types": _input_types(ctx, group["row"].to_numpy()),
                    "tensor_cores_elsewhere": op in elsewhere})
    return sorted(out, key=lambda e: -e["unused_us"])[:MAX_EVIDENCE]


_SHAPES = ("cuBLAS/cuDNN picked kernels without tensor cores for these shapes: make matrix and channel "
           "dimensions multiples of 8 (pad vocabulary, hidden, channel and batch sizes; channels_last for "
           "convolutions).")


def _advice(evidence: list[dict[str, Any]], capability: float) -> str:
    types = {t for e in evidence for t in e["input_types"]}
    precision_allows = all(e["tensor_cores_elsewhere"] for e in evidence)
    if precision_allows or ("float" not in types and types & set(_HALF_TYPES)):
        return ("Precision is not what keeps them off the tensor cores (other calls of these operators use "
                "them, or they run in half precision): " + _SHAPES)
    tf32 = ("enable TF32 (`torch.set_float32_matmul_precision(\"high\")` or "
            "`torch.backends.cuda.matmul.allow_tf32 = True`; `torch.backends.cudnn.allow_tf32` for "
            "convolutions), or " if capability >= TF32_COMPUTE_CAPABILITY else "")
    return (f"These run in float32 on CUDA cores. To use the tensor cores, {tf32}train under "
            "`torch.autocast(\"cuda\", dtype=torch.bfloat16)` (fp16 with a GradScaler on GPUs without bf16). "
            "If that does not help, " + _SHAPES)


def tensor_cores_unused(ctx: Context) -> list[Finding]:
    span = ctx.steps.span[1] - ctx.steps.span[0] if len(ctx.steps.names) else 0.0
    if span <= 0:
        return []
    kernels = _unused_kernels(ctx)
    found = []
    for gpu in ctx.gpus:
        capability = float(gpu["compute_capability"]) if gpu.get("compute_capability") else None
        if capability is None or capability < MIN_COMPUTE_CAPABILITY:
            continue
        mine = kernels[kernels["device"].to_numpy() == gpu["device"]]
        unused = float(mine["us"].sum())
        share = unused / span
        if share < UNUSED_SHARE:
            continue
        evidence = _evidence(ctx, mine)
        types = sorted({t for e in evidence for t in e["input_types"]})
        per_step = unused / len(ctx.steps.names)
        found.append(finding(
            "tensor_cores_unused",
            saving(per_step * (1 - 1 / ASSUMED_SPEEDUP), ctx.step_time_us,
                   f"a bound: the time without tensor cores if they ran it {ASSUMED_SPEEDUP:g}x faster"),
            f"GPU {gpu['device']}: {share:.1%} of the step time is matrix math without tensor cores",
            _advice(evidence, capability),
            numbers={"device": gpu["device"], "unused_per_step_us": round(per_step, 3), "unused_ratio": round(share, 6),
                     "compute_capability": gpu["compute_capability"], "input_types": types},
            thresholds={"unused_ratio": UNUSED_SHARE, "assumed_speedup": ASSUMED_SPEEDUP,
                        "min_compute_capability": MIN_COMPUTE_CAPABILITY, **BANDS},
            evidence=evidence))
    return found
