"""Distributed view: how the ranks of a run compute, communicate and wait for each other.

Each worker's trace is summarised on its own (`summarize_worker`, poolable); the summaries
are then combined (`combine`). Steps are found per worker as in the Overview.

1. Identity: rank, world size and backend from the trace's `distributedInfo`. Without it
   the rank is the number at the end of the worker name ("worker3" is rank 3), else the
   next free rank in name order; the world size is the number of workers; the backend is
   "nccl" when NCCL kernels ran. Each assumption is listed with the rank.
2. Topology: the node is the host the trace names (`host_name`, which newer PyTorch writes;
   `hostname`, which profboard's collectors add for older ones), else the host of the
   reference's worker naming `<host>_<pid>`, else the worker name (an assumption: workers
   named `rank<N>` then look like one node each). The process is the `<pid>` of that naming,
   else the trace's CPU process id. GPUs are the devices that ran kernels, with their
   properties from `deviceProperties`.
3. Computation/communication overlap, per step (as the reference defined it):
   computation = GPU kernel time (not communication kernels) not overlapping communication;
   overlapping = computation kernels ∩ communication; communication = communication not
   overlapping computation; other = step time with neither. Communication is the union of
   NCCL/RCCL kernels (`ncclDevKernel_*`, `ncclKernel_*`) and gloo host collectives. A trace
   with no GPU kernels uses host operator time as computation, as the reference did.
   "average" is the mean over steps.
4. Collective calls: a `record_param_comms` op that holds a `nccl:*` / `gloo:*` op, or a
   `nccl:*` / `gloo:*` op on its own (PyTorch 1.x), or a `record_param_comms` that launched
   a communication kernel. Its kernels carry the call's external id. Name: the `nccl:*` op's,
   else "nccl:" and the kernel's collective (`AllReduce` -> `nccl:all_reduce`). Size: the
   `nccl:*` op's input tensors (elements x element size, summed over inputs, as the
   reference). Latency: the call's GPU kernel time (a gloo call: its host time). The call
   belongs to the step its host op starts in (a gloo call, which runs on a worker thread
   when its queue reaches it: the step it ends in, a step's own end included), and to the
   process group its `record_param_comms` names ("" when the trace does not say, as in
   PyTorch 1.x). The run's
   process groups (name, description, ranks) come from the workers' `distributedInfo`.
   `record_param_comms` ops that launched nothing (`wait`) are not calls.
5. Data transfer vs synchronizing, and stragglers: see the Stragglers note (calls are matched
   across ranks over the whole trace; steps are only for reporting). Per step of a rank, a
   call counts its wait as its first wait_us and its transfer as its last transfer_us: a call
   inside the step counts them whole, one crossing the step's edges the part inside it. Neither
   exceeds the step's communication time (computation overlap included; calls on several
   streams at once can sum to more), transfer first; "unattributed" is the rest, which no
   matched call accounts for (kernels tied to no call, such as one launched before the trace
   began), so transfer + wait + unattributed = the step's communication time.
6. Communication ops per rank and collective name: calls, total/avg size, total/avg latency,
   total/avg data transfer time (over the aligned calls).
7. Step comparison: each rank's Overview step breakdown averaged over its steps.
8. Over all ranks (a run of a thousand): each rank's measures, the worst ranks by one of them
   and the ranks the run lacks: see the note of rankdist.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import HOST_OP_KINDS, Kind
from ..trace.tables import TraceTables
from . import ranges
from .categories import is_communication_kernel_name, is_host_collective_name, role_masks
from .kinds import of_kinds
from .names import name_mask
from .optree import thread_key
from .devices import device_of_kernels
from .overview import gpu_properties, step_breakdown
from .records import clean_row
from .rankdist import missing_ranks, missing_warning, rank_measures
from .steps import Steps, detect_steps, step_of
from .clocks import clocks
from .collectives import collective_report, delay_map
from .stragglers import align_calls, stragglers

# The trace's store keeps the summary summarize_worker returns: bump the "summary" item's version in
# server/items.py when it changes.

# Bytes per element of the `Input type` strings PyTorch writes for tensors.
ELEMENT_BYTES = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
    "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
    "unsigned int": 4, "unsigned long": 8, "unsigned short": 2,
}
RECORD_PARAM_COMMS = "record_param_comms"
_KERNEL_COLLECTIVE = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
_HOST_PID = re.compile(r"^(.*)_(\d+)$")  # the reference's <host>_<pid> worker names
_HOST_KEYS = ("host_name", "hostname")  # the trace's own host: PyTorch's key, profboard's collectors'
_TRAILING_NUMBER = re.compile(r"(\d+)$")


def is_collective_op_name(name: str) -> bool:
    """CPU-side collective ops: `nccl:all_reduce`, `gloo:broadcast`, ..."""
    return name.startswith("nccl:") or is_host_collective_name(name)


def has_communication(tables: TraceTables) -> bool:
    """Whether a trace took part in a distributed job: `distributedInfo`, a communication
    kernel or a CPU-side collective."""
    if tables.metadata.get("distributedInfo"):
        return True
    names = tables.events["name"]
    return bool(name_mask(names, lambda n: is_communication_kernel_name(n) or is_collective_op_name(n)
                          or n == RECORD_PARAM_COMMS).any())


# --- identity and topology -------------------------------------------------------------------

def worker_identity(name: str, tables: TraceTables) -> dict[str, Any]:
    """Rank, world size and backend of a worker, with what had to be assumed (rank None when
    neither distributedInfo nor the name gives one; `combine` then picks a free rank)."""
    info = tables.metadata.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    assumed = []
    rank = info.get("rank") if isinstance(info.get("rank"), int) else None
    if rank is None:
        match = _TRAILING_NUMBER.search(name)
        rank = int(match.group(1)) if match else None
        assumed.append("rank from the worker name" if match else "rank unknown")
    world = info.get("world_size") if isinstance(info.get("world_size"), int) else None
    backend = info.get("backend") if isinstance(info.get("backend"), str) else None
    if backend is None:
        kernels = tables.events[tables.events["kind"].to_numpy() == Kind.KERNEL]
        if name_mask(kernels["name"], is_communication_kernel_name).any():
            backend = "nccl"
            assumed.append("backend nccl from its kernels")
    return {"worker": name, "rank": rank, "world_size": world, "backend": backend, "assumed": assumed}


def settle_ranks(given: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Copies of the identities (same order) in which workers without a rank (or sharing one)
    get the next free ranks in name order, and the world size where it is missing; and
    warnings. The given identities are left as they are: they are the workers' stored
    summaries, which other combinations of workers read too."""
    identities = [{**ident, "assumed": list(ident["assumed"])} for ident in given]
    warnings = []
    seen: set[int] = set()
    pending = []
    n = len(identities)
    for ident in sorted(identities, key=lambda i: i["worker"]):
        # A number ending a `<host>_<pid>` name is a pid: out of range, it is no rank.
        guessed = "rank from the worker name" in ident["assumed"]
        if ident["rank"] is None or ident["rank"] in seen or (guessed and not 0 <= ident["rank"] < n):
            pending.append(ident)
        else:
            seen.add(ident["rank"])
    free = (r for r in range(n + len(seen)) if r not in seen)
    for ident in pending:
        ident["rank"] = next(free)
        ident["assumed"].append("rank assigned in worker-name order")
        warnings.append(f"worker {ident['worker']}: no usable rank, shown as rank {ident['rank']}")
    for ident in identities:
        if ident["world_size"] is None:
            ident["world_size"] = n
            ident["assumed"].append("world size = number of workers")
    return identities, warnings


def topology_entry(name: str, tables: TraceTables) -> dict[str, Any]:
    """Node, process and the GPUs (properties) that ran this worker's kernels."""
    match = _HOST_PID.match(name)
    events = tables.events
    kernels = np.flatnonzero(events["kind"].to_numpy() == Kind.KERNEL)
    props = {p.get("id"): p for p in tables.metadata.get("deviceProperties") or [] if isinstance(p, dict)}
    gpus = [{"device": int(d), **gpu_properties(props.get(d))} for d in sorted(set(device_of_kernels(events, kernels).tolist()))]
    named = next((v for key in _HOST_KEYS if isinstance(v := tables.metadata.get(key), str) and v), None)
    if match:
        process = match.group(2)
    else:
        pids = events[of_kinds(events["kind"].to_numpy(), HOST_OP_KINDS)]["pid"].astype(str)
        process = pids.mode().iloc[0] if len(pids) else None
    node = named or (match.group(1) if match else name)
    assumed = [] if named or match else ["node from the worker name (the trace names no host)"]
    return {"node": node, "process": process, "gpus": gpus, "assumed": assumed}


def topology(identities: list[dict[str, Any]], entries: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes, each with its processes (rank, worker, process id, GPUs), by rank."""
    nodes: dict[str, list[dict[str, Any]]] = {}
    for ident in sorted(identities, key=lambda i: i["rank"]):
        entry = entries[ident["worker"]]
        nodes.setdefault(entry["node"], []).append({
            "rank": ident["rank"], "worker": ident["worker"], "process": entry["process"],
            "gpus": entry["gpus"], "assumed": entry["assumed"]})
    return [{"node": node, "processes": procs} for node, procs in nodes.items()]


def process_groups(tables: TraceTables) -> list[dict[str, Any]]:
    """The process groups this worker's `distributedInfo` lists (name, description, size, ranks)."""
    info = tables.metadata.get("distributedInfo")
    config = info.get("pg_config") if isinstance(info, dict) else None
    return [{"name": str(g.get("pg_name")), "description": _text_or_none(g.get("pg_desc")),
             "size": _int_or_none(g.get("pg_size")), "ranks": _ints_or_none(g.get("ranks"))}
            for g in config or [] if isinstance(g, dict) and "pg_name" in g]


# distributedInfo is the trace's own JSON: a value of another type than PyTorch writes is left out.
def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ints_or_none(value: Any) -> list[int] | None:
    if not isinstance(value, list) or any(_int_or_none(v) is None for v in value):
        return None
    return value


def merge_groups(per_worker: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every process group any worker lists, once, by name (a rank lists only the groups it is in)."""
    groups: dict[str, dict[str, Any]] = {}
    for listed in per_worker:
        for group in listed:
            groups.setdefault(group["name"], group)
    return sorted(groups.values(), key=lambda g: (len(g["name"]), g["name"]))


# --- overlap -------------------------------------------------------------------------------

OVERLAP_PARTS = ("computation_us", "overlapping_us", "communication_us", "other_us")


def overlap(events: pd.DataFrame, steps: Steps) -> dict[str, Any]:
    """Per step (with its range on the trace clock) and on average: computation, overlapping,
    communication and other time (us)."""
    roles = role_masks(events)
    compute = roles["kernel"] if roles["kernel"].any() else roles["cpu_exec"]
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    comp = ranges.union(ts[compute], end[compute])
    comm = ranges.union(ts[roles["communication"]], end[roles["communication"]])
    windows = (steps.starts, steps.ends)
    # Computation first: its column is all computation, the next communication without it.
    first = ranges.assign_by_priority([comp, comm], windows)
    comm_all = ranges.assign_by_priority([comm], windows)[:, 0]
    both = comm_all - first[:, 1]
    frame = pd.DataFrame({
        "step": steps.names, "start_us": steps.starts, "end_us": steps.ends, "total_us": steps.ends - steps.starts,
        "computation_us": first[:, 0] - both, "overlapping_us": both,
        "communication_us": first[:, 1], "other_us": first[:, 2]})
    return {"steps": [clean_row(r) for r in frame.to_dict("records")],
            "average": _average(frame.drop(columns=["start_us", "end_us"]))}


def _average(frame: pd.DataFrame) -> dict[str, Any]:
    return clean_row({k: float(frame[k].mean()) if len(frame) else None for k in frame.columns if k != "step"})


# --- collective calls ----------------------------------------------------------------------

def collective_calls(events: pd.DataFrame, steps: Steps) -> tuple[pd.DataFrame, list[str]]:
    """One row per collective call (definition 4): name, group (process group), cpu_ts/cpu_end,
    gpu_ts/gpu_end, busy_us, kernels, bytes (NaN when unknown), step_name, index (k-th call of
    its name and group in its step), cpu_arrival_us and gpu_arrival_us (from its step's
    start); and warnings."""
    kind = events["kind"].to_numpy()
    names = events["name"]
    host = of_kinds(kind, HOST_OP_KINDS)
    rpc = np.flatnonzero(host & name_mask(names, lambda n: n == RECORD_PARAM_COMMS))
    ops = np.flatnonzero(host & name_mask(names, is_collective_op_name))
    parent = _enclosing(events, ops, rpc)
    # Roots: an op's record_param_comms when it has one, else the op; then lone record_param_comms.
    root_of_op = np.where(parent >= 0, parent, ops)
    first_op = pd.Series(ops, index=root_of_op)
    first_op = first_op[~first_op.index.duplicated()]
    lone_rpc = np.setdiff1d(rpc, first_op.index.to_numpy())
    roots = np.concatenate([first_op.index.to_numpy(), lone_rpc])
    op_row = np.concatenate([first_op.to_numpy(), np.full(len(lone_rpc), -1)])
    kern = _kernels_by_call(events, roots, op_row)
    keep = (op_row >= 0) | (kern["kernels"].to_numpy() > 0)
    calls = _call_frame(events, roots[keep], op_row[keep], kern[keep])
    calls = _place_in_steps(calls, steps)
    return calls, _call_warnings(events, calls, kern.attrs["unlinked"])


def _enclosing(events: pd.DataFrame, inner: np.ndarray, outer: np.ndarray) -> np.ndarray:
    """For each `inner` row, the `outer` row on its thread that encloses it (-1: none)."""
    if not len(inner) or not len(outer):
        return np.full(len(inner), -1, dtype=np.int64)
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    thread = thread_key(events)
    left = pd.DataFrame({"ts": ts[inner], "thread": thread[inner], "end": end[inner], "pos": np.arange(len(inner))})
    right = pd.DataFrame({"ts": ts[outer], "thread": thread[outer], "outer_end": end[outer], "outer": outer})
    merged = pd.merge_asof(left.sort_values("ts"), right.sort_values("ts"), on="ts", by="thread")
    inside = merged["outer"].notna() & (merged["outer_end"] >= merged["end"])
    found = np.full(len(inner), -1, dtype=np.int64)
    found[merged["pos"].to_numpy()] = np.where(inside, merged["outer"].fillna(-1), -1).astype(np.int64)
    return found


def _kernels_by_call(events: pd.DataFrame, roots: np.ndarray, op_row: np.ndarray) -> pd.DataFrame:
    """Per call: its communication kernels' first start, last end, summed time and count
    (tied by the external id of the call's root or of its collective op)."""
    kind = events["kind"].to_numpy()
    comm = np.flatnonzero((kind == Kind.KERNEL) & name_mask(events["name"], is_communication_kernel_name))
    ext = events["external_id"].to_numpy()
    call_ext = np.concatenate([ext[roots], np.where(op_row >= 0, ext[np.maximum(op_row, 0)], -1)])
    call_pos = np.concatenate([np.arange(len(roots))] * 2)
    valid = call_ext >= 0
    lookup = pd.Series(call_pos[valid], index=call_ext[valid])
    lookup = lookup[~lookup.index.duplicated()]
    owner = lookup.reindex(ext[comm]).fillna(-1).to_numpy().astype(np.int64)
    linked = comm[owner >= 0]
    ts = events["ts"].to_numpy()[linked]
    dur = events["dur"].to_numpy()[linked]
    frame = pd.DataFrame({"call": owner[owner >= 0], "ts": ts, "end": ts + dur, "dur": dur,
                          "name": texts_at(events["name"], linked)})
    grouped = frame.groupby("call")
    out = pd.DataFrame({"gpu_ts": grouped["ts"].min(), "gpu_end": grouped["end"].max(),
                        "busy_us": grouped["dur"].sum(), "kernels": grouped.size(),
                        "kernel_name": grouped["name"].first()}).reindex(np.arange(len(roots)))
    out["kernels"] = out["kernels"].fillna(0).astype(np.int64)
    out.attrs["unlinked"] = int((owner < 0).sum())
    return out


def _call_frame(events: pd.DataFrame, roots: np.ndarray, op_row: np.ndarray, kern: pd.DataFrame) -> pd.DataFrame:
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    has_op = op_row >= 0
    op = np.maximum(op_row, 0)
    name = np.where(has_op, texts_at(events["name"], op), [_kernel_collective(k) for k in kern["kernel_name"]])
    gloo = has_op & np.array([is_host_collective_name(n) for n in name], dtype=bool)
    # A gloo collective runs on the CPU: its host range is its communication.
    gpu_ts = np.where(gloo, ts[roots], kern["gpu_ts"].to_numpy())
    gpu_end = np.where(gloo, end[roots], kern["gpu_end"].to_numpy())
    busy = np.where(gloo, end[roots] - ts[roots], kern["busy_us"].to_numpy())
    nbytes = np.full(len(roots), np.nan)
    if has_op.any():
        nbytes[has_op] = tensor_bytes(texts_at(events["input_dims"], op_row[has_op]),
                                      texts_at(events["input_type"], op_row[has_op]))
    group = texts_at(events["process_group"], roots)
    return pd.DataFrame({
        "name": name, "group": np.where(pd.isna(group), "", group).astype(object), "on_host": gloo,
        "cpu_ts": ts[roots], "cpu_end": end[roots], "gpu_ts": gpu_ts, "gpu_end": gpu_end,
        "busy_us": busy, "kernels": kern["kernels"].to_numpy(), "bytes": nbytes,
    }).sort_values("cpu_ts", kind="stable", ignore_index=True)


def texts_at(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """A categorical column's values at `rows` (None where absent), without materialising the
    whole column (traces hold millions of events)."""
    codes = column.cat.codes.to_numpy()[rows]
    categories = column.cat.categories.to_numpy(dtype=object)
    if not len(categories):
        return np.full(len(rows), None, dtype=object)
    return np.where(codes >= 0, categories[np.maximum(codes, 0)], None)


def _kernel_collective(kernel_name: Any) -> str:
    """`ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)` -> `nccl:all_reduce`."""
    match = _KERNEL_COLLECTIVE.match(str(kernel_name)) if isinstance(kernel_name, str) else None
    if not match:
        return "nccl:unknown"
    return "nccl:" + re.sub(r"(?<!^)(?=[A-Z])", "_", match.group(1)).lower()


def tensor_bytes(dims: np.ndarray, types: np.ndarray) -> np.ndarray:
    """Bytes of each op's input tensors from its `Input Dims` / `Input type` JSON texts
    (NaN when a tensor's element type is unknown)."""
    cache: dict[tuple[Any, Any], float] = {}
    out = np.empty(len(dims))
    for i, key in enumerate(zip(dims, types)):
        if key not in cache:
            cache[key] = _bytes_of(*key)
        out[i] = cache[key]
    return out


def _bytes_of(dims_text: Any, types_text: Any) -> float:
    try:
        dims, types = json.loads(dims_text), json.loads(types_text)
    except (TypeError, ValueError):
        return np.nan
    total = 0
    for shape, dtype in zip(dims, types):
        if not shape or not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
            continue  # scalars and non-tensor arguments
        size = ELEMENT_BYTES.get(dtype)
        if size is None:
            return np.nan
        total += int(np.prod(shape, dtype=np.int64)) * size
    return float(total)


def _place_in_steps(calls: pd.DataFrame, steps: Steps) -> pd.DataFrame:
    """Step of each call (the one its host op starts in; a host collective's: the one it ends in),
    its k-th place among same-named calls of that step in its process group, and its arrivals
    from the step's start."""
    cpu_ts = calls["cpu_ts"].to_numpy()
    # A host collective (gloo) runs on a worker thread whenever its queue gets to it, maybe in a
    # later step than the one that asked for it; it ends when every rank has joined, so its end
    # says which step it completes on each rank.
    on_host = calls["on_host"].to_numpy(dtype=bool)
    idx = np.where(on_host, _step_ending(steps, calls["cpu_end"].to_numpy()), step_of(steps, cpu_ts))
    inside = idx >= 0
    names = np.array(steps.names, dtype=object)
    start = np.where(inside, steps.starts[np.maximum(idx, 0)], np.nan)
    calls = calls.assign(step_name=np.where(inside, names[np.maximum(idx, 0)] if len(names) else "", ""))
    calls["index"] = calls.groupby(["step_name", "group", "name"]).cumcount()
    calls["cpu_arrival_us"] = cpu_ts - start
    calls["gpu_arrival_us"] = calls["gpu_ts"].to_numpy() - start
    return calls


def _step_ending(steps: Steps, ends: np.ndarray) -> np.ndarray:
    """Index of the step each end time falls in, a step's own end included (a collective that
    ends as its step does belongs to it, not to the next one), -1 outside all."""
    idx = np.searchsorted(steps.ends, ends, side="left")
    inside = idx < len(steps.ends)
    inside[inside] = steps.starts[idx[inside]] < ends[inside]
    return np.where(inside, idx, -1)


def _call_warnings(events: pd.DataFrame, calls: pd.DataFrame, unlinked: int) -> list[str]:
    warnings = []
    if unlinked:
        warnings.append(f"{unlinked} communication kernel(s) are tied to no collective call (launched before "
                        "the trace began?): they count as communication time, not in the ops table")
    unknown = int(calls["bytes"].isna().sum())
    if unknown:
        warnings.append(f"{unknown} collective call(s) have no known size (no nccl:* op with input shapes; "
                        "record_param_comms' message sizes and dtype are not read)")
    outside = int((calls["step_name"] == "").sum())
    if outside:
        warnings.append(f"{outside} collective call(s) lie outside every step")
    return warnings


# --- per rank tables -----------------------------------------------------------------------

def comm_ops(calls: pd.DataFrame) -> dict[int, list[dict[str, Any]]]:
    """Per rank, per collective name of its calls (aligned, with `rank` and `transfer_us`): calls,
    total/avg bytes, total/avg latency, total/avg data transfer time."""
    out: dict[int, list[dict[str, Any]]] = {}
    if calls.empty:
        return out
    # One groupby over every rank: a groupby per rank cost seconds at 1,000 ranks.
    for (rank, name), group in calls.groupby(["rank", "name"], sort=True):
        rows = out.setdefault(int(rank), [])
        n = len(group)
        sizes = group["bytes"].dropna()
        transfer = group["transfer_us"].dropna()
        rows.append(clean_row({
            "name": name, "calls": n,
            "total_bytes": int(sizes.sum()) if len(sizes) else None,
            "avg_bytes": int(round(sizes.mean())) if len(sizes) else None,
            "total_latency_us": float(group["busy_us"].sum()), "avg_latency_us": float(group["busy_us"].mean()),
            "total_transfer_us": float(transfer.sum()) if len(transfer) else None,
            "avg_transfer_us": float(transfer.mean()) if len(transfer) else None,
            "transfer_calls": len(transfer)}))
    return out


TIMED = ["gpu_ts", "gpu_end", "wait_us", "transfer_us"]


def timed_calls(aligned: pd.DataFrame) -> dict[int, np.ndarray]:
    """Per rank, the TIMED columns of its matched calls (those with a transfer time), as
    wait_and_transfer reads them."""
    values = aligned[TIMED].to_numpy(dtype=np.float64)
    matched = np.isfinite(values[:, 3])
    rows = pd.Series(aligned["rank"].to_numpy()[matched]).groupby(aligned["rank"].to_numpy()[matched]).indices
    return {int(rank): values[matched][at] for rank, at in rows.items()}


def wait_and_transfer(timed: np.ndarray, overlap_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per step of one rank: communication time split into transfer_us, wait_us and
    unattributed_us (definition 5), with communication_us the step's communication time;
    `timed` holds the rank's `timed_calls`."""
    ts, end, wait, transfer = timed.reshape(-1, len(TIMED)).T
    windows = (np.array([r["start_us"] for r in overlap_rows], dtype=np.float64),
               np.array([r["end_us"] for r in overlap_rows], dtype=np.float64))
    # A call waits first (until the last rank arrives), then moves data: its first wait_us, its last transfer_us.
    moved_in = _per_window(end - transfer, end, transfer, windows)
    waited_in = _per_window(ts, ts + wait, wait, windows)
    rows = []
    for row, moved, waited in zip(overlap_rows, moved_in, waited_in):
        comm = (row["communication_us"] or 0.0) + (row["overlapping_us"] or 0.0)
        # Calls on several streams at once, or kernels with gaps between them, can add up to more
        # than the step's communication time: the parts never exceed it.
        moved = min(float(moved), comm)
        waited = min(float(waited), comm - moved)
        rows.append({"step": row["step"], "communication_us": comm, "transfer_us": moved, "wait_us": waited,
                     "unattributed_us": comm - moved - waited})
    frame = pd.DataFrame(rows, columns=["step", "communication_us", "transfer_us", "wait_us", "unattributed_us"])
    return {"steps": [clean_row(r) for r in rows], "average": _average(frame)}


def _per_window(starts: np.ndarray, ends: np.ndarray, amounts: np.ndarray,
                windows: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Per window, the amounts of the ranges inside it, and the part inside it of those crossing
    its edges (a range inside one window counts its amount as it is: sums stay exact)."""
    lo, hi = windows
    out = np.zeros(len(lo))
    if not len(lo) or not len(starts):
        return out
    first = np.searchsorted(lo, starts, side="right") - 1
    inside = (first >= 0) & (ends <= hi[np.maximum(first, 0)]) & (starts >= lo[np.maximum(first, 0)])
    np.add.at(out, first[inside], amounts[inside])
    for start, stop in zip(starts[~inside], ends[~inside]):
        out += np.clip(np.minimum(hi, stop) - np.maximum(lo, start), 0.0, None)
    return out


def step_comparison(breakdown: pd.DataFrame) -> dict[str, Any]:
    """One rank's Overview breakdown averaged over its steps."""
    return {"steps": len(breakdown), "average": _average(breakdown)}


# --- assembly ------------------------------------------------------------------------------

@dataclass
class WorkerSummary:
    """What the combine step needs of one worker: small, picklable."""

    identity: dict[str, Any]
    topology: dict[str, Any]
    overlap: dict[str, Any]
    calls: pd.DataFrame
    comparison: dict[str, Any]
    mean_step_us: float | None
    groups: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def summarize_worker(name: str, tables: TraceTables, steps: Steps | None = None,
                     breakdown: pd.DataFrame | None = None) -> WorkerSummary:
    """One worker's share of the Distributed view (no cross-worker state). `steps` and `breakdown`
    are the trace's (detect_steps, step_breakdown) when the caller has them."""
    events = tables.events
    steps = detect_steps(events) if steps is None else steps
    calls, warnings = collective_calls(events, steps)
    step_us = steps.ends - steps.starts
    return WorkerSummary(
        identity=worker_identity(name, tables), topology=topology_entry(name, tables),
        overlap=overlap(events, steps), calls=calls,
        comparison=step_comparison(step_breakdown(events, steps) if breakdown is None else breakdown),
        mean_step_us=float(step_us.mean()) if len(step_us) else None,
        groups=process_groups(tables),
        warnings=steps.warnings + warnings)


def combine(summaries: list[WorkerSummary]) -> dict[str, Any]:
    """The Distributed view's data from every worker's summary (ranks in rank order)."""
    identities, warnings = settle_ranks([s.identity for s in summaries])
    pairs = sorted(zip(identities, summaries), key=lambda p: p[0]["rank"])
    identities = [ident for ident, _ in pairs]
    by_rank = [s for _, s in pairs]
    aligned = align_calls({ident["rank"]: s.calls for ident, s in pairs})
    ops = comm_ops(aligned)
    timed = timed_calls(aligned)

    def per_rank(ident: dict[str, Any], **parts: Any) -> dict[str, Any]:
        return {"rank": ident["rank"], "worker": ident["worker"], **parts}

    ranks = [per_rank(ident) for ident in identities]
    overlap_rows = [per_rank(ident, **s.overlap) for ident, s in pairs]
    wait_rows = [per_rank(ident, **wait_and_transfer(timed.get(ident["rank"], np.empty((0, len(TIMED)))),
                                                     s.overlap["steps"])) for ident, s in pairs]
    late = stragglers(aligned, ranks, {ident["rank"]: s.mean_step_us for ident, s in pairs})
    unmatched = sum(u["unaligned"] for u in late["unaligned"]["calls"])
    if unmatched and len(pairs) > 1:
        warnings.append(f"{unmatched} collective call(s) could not be matched with another rank's (a rank's trace "
                        "began or ended at another call, or the ranks made different calls)")
    missing = missing_ranks(identities)
    if missing:
        warnings.append(missing_warning(missing, max(i["world_size"] for i in identities)))
    groups = merge_groups([s.groups for s in by_rank])
    return {
        "ranks": identities,
        "missing_ranks": missing,
        "topology": topology(identities, {ident["worker"]: s.topology for ident, s in pairs}),
        "groups": groups,
        "overlap": overlap_rows,
        "wait": wait_rows,
        "comm_ops": [per_rank(ident, rows=ops.get(ident["rank"], [])) for ident in identities],
        "stragglers": late,
        "collectives": collective_report(aligned, {g["name"]: g["size"] for g in groups if g["size"]}),
        "delay_map": delay_map(aligned, [ident["rank"] for ident in identities]),
        "clock": clocks(aligned, [ident["rank"] for ident in identities], late),
        "comparison": [per_rank(ident, **s.comparison) for ident, s in pairs],
        "distribution": rank_measures(overlap_rows, wait_rows, late["ranks"]),
        "warnings": warnings + _worker_warnings(by_rank),
    }


# Workers a shared warning names one by one; beyond, it counts the rest (a run of 1,000 ranks).
NAMED_WORKERS = 6


def _worker_warnings(summaries: list[WorkerSummary]) -> list[str]:
    """Each worker's warnings prefixed with its name; one line for a warning several share."""
    workers: dict[str, list[str]] = {}
    for s in summaries:
        for text in s.warnings:
            workers.setdefault(text, []).append(s.identity["worker"])
    return [f"{_names(names)}: {text}" for text, names in workers.items()]


def _names(names: list[str]) -> str:
    more = len(names) - NAMED_WORKERS
    return ", ".join(names) if more <= 0 else f"{', '.join(names[:NAMED_WORKERS])} and {more} other workers"


def distributed(workers: dict[str, TraceTables]) -> dict[str, Any]:
    """The `/api/distributed` object for a run's workers (name -> tables of one span)."""
    return combine([summarize_worker(name, tables) for name, tables in workers.items()])
