"""Host-device synchronisations and host-to-device copies inside the training steps.

1. Where a call is: a CUDA runtime call belongs to the step whose host `ProfilerStep` range
   holds its start (the host range: the step stretched to the end of its GPU work would
   take in the next step's first calls); a trace without ProfilerStep is one step. Steps the
   overview dropped (the profiler stopped before their kernels) are left out.
2. Only calls an operator made count (the operator tree's `launcher`), and none made while
   torch.compile compiles (under a `... (dynamo_timed)` range: a first call's constant
   folding and autotuning are not the training step).
3. The input pipeline, which is expected to copy to the GPU: an H2D copy is part of it when
   it is (a) from pinned host memory (`Memcpy HtoD (Pinned -> Device)`: a DataLoader with
   `pin_memory=True`, copied without blocking), (b) made before the step's first compute
   kernel is launched (a kernel launched by neither a copy/conversion operator nor
   `Optimizer.zero_grad`): the batch moved before the model runs, or (c) made inside the
   DataLoader's `__next__`. Syncs made by those copies (a pageable copy waits for the GPU)
   are part of it too.

- `host_device_sync`: operators that block the host until the GPU has caught up:
  `cudaStreamSynchronize`, `cudaDeviceSynchronize`, `cudaEventSynchronize`, synchronous
  `cudaMemcpy`, and `cudaMemcpyAsync` whose copy reads back (DtoH), inside steps, outside the
  input pipeline; and `torch.cuda.synchronize()` (`cudaDeviceSynchronize` made by no operator)
  inside a ProfilerStep. Fires on any. Saving: the GPU idle these calls and the in-step H2D
  copies' calls cause (savings.py note 2: from the drain until the GPU is busy again, at most
  the host's wait), not the host's wait alone: where the GPU stays busy, a sync costs little.
- `h2d_copy_in_step`: H2D copies inside steps outside the input pipeline: tensors made on the
  CPU and moved each step (`torch.tensor(...)`, `.cuda()` / `.to(device)` of a CPU tensor,
  indexing with a Python list or range). Fires on any. Saving: the GPU idle caused by those
  copies' calls and the syncs they made, the same way; host_device_sync's includes it.

Each finding names the operator that caused it (the outermost operator above the call, below
any `record_function` range) and its Python frame (the innermost frame outside PyTorch of
that operator's call stack, when the trace recorded stacks). Evidence: up to 5 places, those
that blocked longest first, each with the culprit operator's event id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...trace.schema import LAUNCH_KINDS, Kind
from .. import ranges
from ..callstacks import op_stacks, user_frame
from ..categories import is_dataloader_name
from ..kinds import of_kinds
from ..names import name_mask, names_at
from ..optree import climb
from ..recommendations import Context, Finding, finding
from ..savings import BANDS, Saving, idle_caused, saving

MAX_EVIDENCE = 5

SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
                        "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipMemcpy"})
COPY_CALLS = frozenset({"cudaMemcpyAsync", "cudaMemcpy", "hipMemcpyAsync", "hipMemcpy"})
# Operators that copy or convert tensors: their kernels are not the model's compute.
COPY_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_", "aten::contiguous", "aten::clone",
                      "aten::lift_fresh", "aten::_local_scalar_dense", "aten::item"})
_ZERO_GRAD = "Optimizer.zero_grad"
_COMPILING = "(dynamo_timed)"


@dataclass(frozen=True)
class _Calls:
    """Runtime calls of interest, one row each: events row, step index, launching tree node."""

    rows: np.ndarray
    step: np.ndarray
    node: np.ndarray


def _step_index(ctx: Context, ts: np.ndarray) -> np.ndarray:
    """Per time: index into ctx.steps of the host step holding it, -1 for none (see note 1)."""
    found = ctx.host_steps
    if len(found):
        position = {name: i for i, name in enumerate(ctx.steps.names)}
        index = np.array([position.get(name, -1) for name in found["name"]], dtype=np.int64)
        starts, ends = found["ts"].to_numpy(), found["end"].to_numpy()
    else:
        index = np.arange(len(ctx.steps.names))
        starts, ends = ctx.steps.starts, ctx.steps.ends
    at = ranges.which((starts, ends), ts)
    return np.where(at >= 0, index[np.maximum(at, 0)], -1)


def _node_flags(ctx: Context, predicate) -> np.ndarray:
    """Per tree node: the predicate on its name."""
    return name_mask(ctx.tables.events["name"], predicate)[ctx.tree.rows]


def _compiling(ctx: Context) -> np.ndarray:
    """Per tree node: whether it is a range torch.compile compiles in (note 2)."""
    return _node_flags(ctx, lambda n: n.endswith(_COMPILING))


def _runtime_calls(ctx: Context, rows: np.ndarray) -> _Calls:
    """The calls at `rows` that an operator made inside a step, not while compiling."""
    events, tree = ctx.tables.events, ctx.tree
    node = tree.launcher[rows]
    step = _step_index(ctx, events["ts"].to_numpy()[rows])
    compiling = tree.ancestors_or_self(node, ctx.once(_compiling))
    keep = (node >= 0) & (step >= 0) & ~compiling
    return _Calls(rows[keep], step[keep], node[keep])


def _runtime_rows(ctx: Context) -> np.ndarray:
    """Rows of the runtime and driver calls."""
    return np.flatnonzero(of_kinds(ctx.tables.events["kind"].to_numpy(), LAUNCH_KINDS))


def _launch_rows(ctx: Context, names: frozenset[str]) -> np.ndarray:
    """Rows of the runtime and driver calls named one of `names`."""
    rows = ctx.once(_runtime_rows)
    return rows[name_mask(ctx.tables.events["name"].iloc[rows], lambda n: n in names)]


def _launched(ctx: Context, rows: np.ndarray, kind: Kind) -> np.ndarray:
    """Per runtime call at `rows`: the events row of the device event of `kind` it launched, -1 if none."""
    events = ctx.tables.events
    device = np.flatnonzero(events["kind"].to_numpy() == kind)
    correlation = events["correlation"].to_numpy()
    by_correlation = pd.Series(device, index=correlation[device])
    by_correlation = by_correlation[~by_correlation.index.duplicated()]
    return by_correlation.reindex(correlation[rows]).fillna(-1).to_numpy().astype(np.int64)


def _copy_names(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Per runtime call at `rows`: the name of the memcpy it launched ('' if none)."""
    found = _launched(ctx, rows, Kind.MEMCPY)
    names = names_at(ctx.tables.events["name"], np.maximum(found, 0))
    return np.array([str(n) if r >= 0 else "" for r, n in zip(found, names)], dtype=object)


def _is_h2d(name: str) -> bool:
    return "HtoD" in name or "Host -> Device" in name


def _is_d2h(name: str) -> bool:
    return "DtoH" in name or "Device -> Host" in name or "Device -> Pinned" in name or "Device -> Pageable" in name


def _first_compute_launch(ctx: Context) -> np.ndarray:
    """Per step: start of its first call that launched a compute kernel (inf when none)."""
    events, tree = ctx.tables.events, ctx.tree
    kind = events["kind"].to_numpy()
    correlation = events["correlation"].to_numpy()
    kernels = correlation[kind == Kind.KERNEL]
    launches = np.flatnonzero(of_kinds(kind, LAUNCH_KINDS) & np.isin(correlation, kernels[kernels >= 0]))
    calls = _runtime_calls(ctx, launches)
    not_compute = _node_flags(ctx, lambda n: n in COPY_OPS or n.startswith(_ZERO_GRAD))
    compute = ~tree.ancestors_or_self(calls.node, not_compute)
    first = np.full(len(ctx.steps.names), np.inf)
    np.minimum.at(first, calls.step[compute], events["ts"].to_numpy()[calls.rows[compute]])
    return first


def _h2d_copies(ctx: Context) -> tuple[_Calls, np.ndarray, np.ndarray]:
    """Copy calls inside steps that launched an H2D copy; whether each is in the input pipeline
    (note 3); and each copy's device-side name. Both rules read it: ctx.once(_h2d_copies)."""
    events = ctx.tables.events
    rows = _launch_rows(ctx, COPY_CALLS)
    h2d = np.array([_is_h2d(n) for n in _copy_names(ctx, rows)], dtype=bool)
    calls = _runtime_calls(ctx, rows[h2d])
    copy_names = _copy_names(ctx, calls.rows)
    pinned = np.array(["Pinned" in n for n in copy_names], dtype=bool)
    prologue = events["ts"].to_numpy()[calls.rows] < _first_compute_launch(ctx)[calls.step]
    loading = ctx.tree.ancestors_or_self(calls.node, _node_flags(ctx, is_dataloader_name))
    return calls, pinned | prologue | loading, copy_names


def _cause(ctx: Context, nodes: np.ndarray) -> np.ndarray:
    """Per node: the outermost operator above or at it, below any annotation (the call the user made)."""
    kind = ctx.tables.events["kind"].to_numpy()[ctx.tree.rows]
    parent = ctx.tree.parent
    # Climb until the parent is no operator: that node is the outermost one.
    return climb(nodes, parent, lambda _, at: (parent[at] < 0) | (kind[np.maximum(parent[at], 0)] != Kind.CPU_OP))


def _frames(ctx: Context, rows: np.ndarray) -> dict[int, tuple[str, ...]]:
    """Call-stack frames (innermost first) of the operators at event `rows`."""
    stacks = op_stacks(ctx.tables.events, np.unique(rows))
    return {int(r): stacks.frames[stacks.of_row[r]] if stacks.of_row[r] >= 0 else () for r in rows}


def _sites(ctx: Context, table: pd.DataFrame) -> list[dict[str, Any]]:
    """Evidence: per (cause operator, frame) the occurrence that blocked longest, worst sites first.
    `table` has one row per occurrence: cause (events row), via (events row), calls, blocked_us."""
    events = ctx.tables.events
    frames = _frames(ctx, table["cause"].to_numpy())
    table = table.assign(op=names_at(events["name"], table["cause"].to_numpy()).astype(str),
                         frame=[user_frame(frames[int(r)]) or "" for r in table["cause"]])
    out = []
    for (op, frame), group in table.groupby(["op", "frame"], sort=False):
        worst = group.loc[group["blocked_us"].idxmax()]
        row = int(worst["cause"])
        start = float(events["ts"].iloc[row])
        out.append({
            "kind": "operator", "label": f"{op} at {frame}" if frame else op, "event_id": row,
            "start_us": start, "end_us": start + float(events["dur"].iloc[row]),
            "op": op, "via": str(events["name"].iloc[int(worst["via"])]), "calls": worst["calls"],
            "frame": frame or None, "frames": list(frames[row][:8]), "step": ctx.steps.names[int(worst["step"])],
            "count": int(len(group)), "blocked_us": round(float(group["blocked_us"].sum()), 3),
        })
    return sorted(out, key=lambda e: -e["blocked_us"])[:MAX_EVIDENCE]


def _occurrences(ctx: Context, calls: _Calls, extra: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """One row per launching node: its step, cause, call names and blocked time (call durations)."""
    events = ctx.tables.events
    frame = pd.DataFrame({"node": calls.node, "step": calls.step,
                          "call": names_at(events["name"], calls.rows).astype(str),
                          "dur": events["dur"].to_numpy()[calls.rows], **(extra or {})})
    grouped = frame.groupby("node", sort=False)
    out = grouped.agg(step=("step", "first"), blocked_us=("dur", "sum"),
                      calls=("call", lambda c: sorted(set(c))), **{k: (k, "sum") for k in (extra or {})})
    nodes = out.index.to_numpy()
    return out.reset_index(drop=True).assign(via=ctx.tree.event_rows(nodes),
                                             cause=ctx.tree.event_rows(_cause(ctx, nodes)))


def _per_step(ctx: Context, table: pd.DataFrame, column: str) -> float:
    return float(table[column].sum()) / max(len(ctx.steps.names), 1)


def _blocking_calls(ctx: Context) -> _Calls:
    """Sync calls and read-back copies made by operators inside steps (notes 1, 2)."""
    rows = _launch_rows(ctx, SYNC_CALLS | COPY_CALLS)
    names = names_at(ctx.tables.events["name"], rows).astype(str)
    reads_back = np.array([_is_d2h(n) for n in _copy_names(ctx, rows)], dtype=bool)
    blocking = np.isin(names, list(SYNC_CALLS)) | reads_back
    return _runtime_calls(ctx, rows[blocking])


def _explicit_syncs(ctx: Context) -> pd.DataFrame:
    """`torch.cuda.synchronize()` inside a ProfilerStep: a device sync no operator made."""
    events = ctx.tables.events
    if not len(ctx.host_steps):
        return pd.DataFrame()
    rows = _launch_rows(ctx, frozenset({"cudaDeviceSynchronize", "hipDeviceSynchronize"}))
    rows = rows[ctx.tree.launcher[rows] < 0]
    step = _step_index(ctx, events["ts"].to_numpy()[rows])
    rows, step = rows[step >= 0], step[step >= 0]
    return pd.DataFrame({"row": rows, "step": step, "blocked_us": events["dur"].to_numpy()[rows]})


def _idle_saving(ctx: Context, rows: np.ndarray, what: str) -> Saving:
    """The GPU idle the calls at `rows` cause, per step (savings.py note 2)."""
    events = ctx.tables.events
    ts = events["ts"].to_numpy()[rows]
    idle = idle_caused(ctx.gaps, ts, ts + events["dur"].to_numpy()[rows], ctx.steps)
    return saving(idle / max(len(ctx.steps.names), 1), ctx.step_time_us,
                  f"GPU idle caused by {what}: from the GPU's drain until it is busy again, at most the host's wait")


def host_device_sync(ctx: Context) -> list[Finding]:
    calls = _blocking_calls(ctx)
    copies, pipeline, _ = ctx.once(_h2d_copies)
    outside = ~np.isin(calls.node, copies.node[pipeline])
    table = _occurrences(ctx, _Calls(calls.rows[outside], calls.step[outside], calls.node[outside]))
    explicit = _explicit_syncs(ctx)
    if table.empty and explicit.empty:
        return []
    evidence = _sites(ctx, table) if len(table) else []
    evidence += [_explicit_evidence(ctx, explicit)] if len(explicit) else []
    count = (len(table) + len(explicit)) / max(len(ctx.steps.names), 1)
    blocked = _per_step(ctx, table, "blocked_us") + (_per_step(ctx, explicit, "blocked_us") if len(explicit) else 0.0)
    ratio = blocked / ctx.step_time_us if ctx.step_time_us > 0 else 0.0
    first = evidence[0]["label"] if evidence else "the step"
    copy_calls, _ = _in_step_copies(ctx, copies, pipeline)
    rows = np.r_[calls.rows[outside], explicit["row"].to_numpy() if len(explicit) else [], copy_calls.rows]
    found = _idle_saving(ctx, rows.astype(np.int64), "these syncs and the in-step host-to-device copies")
    return [finding(
        "host_device_sync", found,
        f"{count:.3g} host-device sync(s) per step block the host {blocked:,.0f} us ({ratio:.1%} of the step)",
        f"The host waits for the GPU (first: {first}). Reading a GPU value on the host (`.item()`, "
        "`.tolist()`, `.cpu()`, `if tensor:`, `assert` on a tensor, `torch.nonzero`, boolean-mask indexing) "
        "or copying from pageable memory drains the GPU's queue, so the GPU idles until the host has "
        f"launched more work: {found.us:,.0f} us a step here. Keep values on the GPU (log them every N steps, "
        "`torch.where` instead of branching, `nonzero(..., size=)`), or move the read to the end of the step.",
        numbers={"syncs_per_step": round(count, 3), "blocked_per_step_us": round(blocked, 3),
                 "blocked_ratio": round(ratio, 6), "step_us": round(ctx.step_time_us, 3)},
        thresholds=BANDS, evidence=evidence)]


def _explicit_evidence(ctx: Context, explicit: pd.DataFrame) -> dict[str, Any]:
    worst = explicit.loc[explicit["blocked_us"].idxmax()]
    row = int(worst["row"])
    start = float(ctx.tables.events["ts"].iloc[row])
    return {"kind": "runtime", "label": "torch.cuda.synchronize() (cudaDeviceSynchronize, no operator)",
            "event_id": row, "start_us": start, "end_us": start + float(worst["blocked_us"]),
            "step": ctx.steps.names[int(worst["step"])], "count": int(len(explicit)),
            "blocked_us": round(float(explicit["blocked_us"].sum()), 3)}


def _in_step_copies(ctx: Context, copies: _Calls, pipeline: np.ndarray) -> tuple[_Calls, np.ndarray]:
    """Of the H2D copy calls (`_h2d_copies`), those outside the input pipeline, then the syncs
    those copies made (a pageable copy waits for the GPU: part of their cost); each call's bytes."""
    keep = ~pipeline
    flagged = _Calls(copies.rows[keep], copies.step[keep], copies.node[keep])
    nbytes = ctx.tables.events["bytes"].to_numpy()[_launched(ctx, flagged.rows, Kind.MEMCPY)]
    syncs = _runtime_calls(ctx, _launch_rows(ctx, SYNC_CALLS))
    theirs = np.isin(syncs.node, flagged.node)
    both = _Calls(np.r_[flagged.rows, syncs.rows[theirs]], np.r_[flagged.step, syncs.step[theirs]],
                  np.r_[flagged.node, syncs.node[theirs]])
    return both, np.r_[np.maximum(nbytes, 0), np.zeros(theirs.sum(), np.int64)]


def h2d_copy_in_step(ctx: Context) -> list[Finding]:
    copies, pipeline, copy_names = ctx.once(_h2d_copies)
    if pipeline.all():
        return []
    both, nbytes = _in_step_copies(ctx, copies, pipeline)
    table = _occurrences(ctx, both, {"bytes": nbytes})
    count = len(table) / max(len(ctx.steps.names), 1)
    blocked = _per_step(ctx, table, "blocked_us")
    ratio = blocked / ctx.step_time_us if ctx.step_time_us > 0 else 0.0
    evidence = _sites(ctx, table)
    kinds = sorted(set(copy_names[~pipeline]))
    return [finding(
        "h2d_copy_in_step", _idle_saving(ctx, both.rows, "these copies and their syncs"),
        f"{count:.3g} host-to-device copies per step while the model runs ({blocked:,.0f} us of host time)",
        f"Tensors are made on the CPU and copied to the GPU inside the step (first: {evidence[0]['label']}; "
        f"{', '.join(kinds)}). A copy from pageable memory blocks the host until the GPU has caught up. "
        "Create constant tensors once on the GPU (outside the loop, or with `device=`), index with GPU "
        "tensors instead of Python lists or ranges, and move inputs with the batch "
        "(`pin_memory=True`, `.to(device, non_blocking=True)`).",
        numbers={"copies_per_step": round(count, 3), "per_step_bytes": round(_per_step(ctx, table, "bytes"), 3),
                 "blocked_per_step_us": round(blocked, 3), "blocked_ratio": round(ratio, 6),
                 "step_us": round(ctx.step_time_us, 3)},
        thresholds=BANDS, evidence=evidence)]
