"""Memory view (profiler traces): the devices, every allocation and free, and per-operator memory
statistics, from the `[memory]` records that `profile_memory=True` writes (the curve of
allocated and reserved memory over time: memory_curve.py).

- Devices: "CPU" for host memory, "GPU0", "GPU1", ... for CUDA devices (others by their type).
- Traces from before PyTorch 1.10 record no addresses (and no totals): they have no events
  table (and no curve, see memory_curve.py), only the statistics.
- Which operator a record belongs to: the innermost operator running on the record's thread
  at its time (start <= t < end). Annotations (`record_function` ranges) are looked through
  to the operator around them; a record directly inside a step, the DataLoader or an
  optimizer step belongs to no operator. A call that only wraps one call of itself counts
  as one call.
- Events: each free is paired with the allocation just before it at the same address on the
  same device, over the whole trace (zero-byte records are left out). A row's operator is the
  allocating one; when that is a factory such as `aten::empty`, the row is named after the
  operator that called it, "caller (aten::empty)". Allocations never freed in the trace have no release time; frees
  whose allocation the trace did not see have no allocation time and no operator.
- Time range: an event row is in the range when its allocation or its release lies in it
  (ends included); its other time is shown even when outside. A statistics row counts only
  the records that lie in the range, and the calls that overlap it.
- Statistics per operator name: size increase = bytes allocated less bytes freed, allocation
  count and size = allocations only (frees ignored); "self" counts the records that belong to
  the operator itself, the others add every operator it called. Calls: its calls that
  overlap the range, whether or not they touched memory on this device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import Kind
from ..trace.tables import TraceTables
from .names import name_mask
from .operators import is_operator_name
from .optree import OpTree, climb, subtree_sums, thread_key
from .records import clean_row

# c10::DeviceType values that name a device; others show as "TYPE<n>:<id>".
_DEVICE_TYPES = {0: "CPU", 1: "GPU", 12: "XPU", 13: "MPS", 15: "HPU", 19: "MTIA"}
# Factory operators that merely allocate: their rows are named after their caller.
_FACTORY_PREFIX = "aten::empty"

NO_ADDRESSES = ("these memory records carry no addresses (PyTorch before 1.10 did not record them), so "
                "allocations cannot be paired with their frees; the statistics table still works")


# -- devices ----------------------------------------------------------------------------------


def device_name(device_type: int, device_id: int) -> str:
    """"CPU", "GPU0", ...: one name per device, as the API and the page use it."""
    kind = _DEVICE_TYPES.get(int(device_type))
    if kind == "CPU":
        return "CPU"  # host memory is one pool whatever id the record carries
    if kind is None:
        return f"TYPE{int(device_type)}:{int(device_id)}"
    return f"{kind}{int(device_id)}"


def _device_of_records(memory: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Per record a code into the returned device names."""
    device_type = memory["device_type"].to_numpy().astype(np.int64)
    device_id = memory["device_id"].to_numpy().astype(np.int64)
    # One integer per (type, id): factorising it is several times cheaper than pairs.
    codes, uniques = pd.factorize((device_type << 32) | (device_id & 0xFFFFFFFF))
    names = [device_name(u >> 32, ((u & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000) for u in uniques.tolist()]
    # Several (type, id) pairs can share a name (CPU records with different ids).
    merged, name_codes = np.unique(np.array(names, dtype=object), return_inverse=True)
    return (name_codes[codes] if len(codes) else codes), [str(m) for m in merged]


def device_mask(memory: pd.DataFrame, device: str) -> np.ndarray:
    codes, names = _device_of_records(memory)
    if device not in names:
        return np.zeros(len(memory), dtype=bool)
    return codes == names.index(device)


def _device_order(name: str) -> tuple[int, int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (0 if name == "CPU" else 1 if name.startswith("GPU") else 2, int(digits) if digits else 0, name)


def devices(tables: TraceTables) -> list[dict[str, Any]]:
    """The devices with memory records, CPU first then GPUs by id: name, label, record count, and
    whether the records carry totals (needed for the curve) and addresses (needed for events)."""
    memory = tables.memory
    if memory.empty:
        return []
    codes, names = _device_of_records(memory)
    totals = np.isfinite(memory["total_allocated"].to_numpy())
    addressed = memory["addr"].to_numpy() >= 0
    out = []
    for code, name in enumerate(names):
        mine = codes == code
        out.append({"device": name, "label": re.sub(r"^([A-Z]+)(\d+)$", r"\1 \2", name), "records": int(mine.sum()),
                    "has_totals": bool(totals[mine].any()), "has_addresses": bool(addressed[mine].any())})
    return sorted(out, key=lambda d: _device_order(d["device"]))


def default_device(found: list[dict[str, Any]]) -> str | None:
    """The device a page opens on: the first GPU, else the first device (as the reference chose)."""
    gpus = [d["device"] for d in found if d["device"].startswith("GPU")]
    return gpus[0] if gpus else (found[0]["device"] if found else None)


# -- time ranges ------------------------------------------------------------------------------------


def in_range(ts: np.ndarray, start_us: float | None, end_us: float | None) -> np.ndarray:
    """start_us <= ts <= end_us, an absent bound open; NaN is never in range."""
    keep = np.isfinite(ts)
    if start_us is not None:
        keep &= ts >= start_us
    if end_us is not None:
        keep &= ts <= end_us
    return keep


def _before(ts: np.ndarray, start_us: float | None) -> np.ndarray:
    return ts < start_us if start_us is not None else np.zeros(len(ts), dtype=bool)


def _after(ts: np.ndarray, end_us: float | None) -> np.ndarray:
    return ts > end_us if end_us is not None else np.zeros(len(ts), dtype=bool)


# -- which operator each record belongs to ----------------------------------------------------


@dataclass(frozen=True)
class Attribution:
    """Memory records placed in the operator tree. Per record: `op`, the tree node of the operator
    it belongs to (-1: none), and `caller`, the node around that operator (-1: top of its thread;
    annotations are looked through). Per tree node: `is_op`, an operator in this view's sense."""

    op: np.ndarray
    caller: np.ndarray
    is_op: np.ndarray


def _node_flags(events: pd.DataFrame, tree: OpTree) -> tuple[np.ndarray, np.ndarray]:
    """Per tree node: is it an operator; is it a node records can stop at (all but annotations
    other than steps: the reference dropped those ranges from its tree)."""
    kind = events["kind"].to_numpy()[tree.rows]
    names = events["name"].iloc[tree.rows]
    is_op = (kind == Kind.CPU_OP) & name_mask(names, is_operator_name)
    step = name_mask(names, lambda n: n.startswith("ProfilerStep#"))
    visible = (kind != Kind.USER_ANNOTATION) | step
    return is_op, visible


def _owners(tree: OpTree) -> tuple[np.ndarray, np.ndarray]:
    """The node each node counts as (a folded call counts as the call it folded into), and each
    node's parent with folded calls included. A folded node is the only child of its parent, so
    in preorder its parent is the node just before it."""
    n = len(tree.rows)
    positions = np.arange(n)
    up = np.where(tree.merged, positions - 1, tree.parent)
    owner = positions.copy()
    folded = np.flatnonzero(tree.merged)
    while len(folded):
        hop = owner[folded - 1]
        if np.array_equal(hop, owner[folded]):
            break
        owner[folded] = hop
    return owner, up


def _codes_in(column: pd.Series, categories: pd.Index) -> np.ndarray:
    """Per row of a categorical column: the position of its value in `categories`, -1 if absent."""
    lookup = np.r_[pd.Index(categories).get_indexer(column.cat.categories.astype(str)), -1]
    codes = column.cat.codes.to_numpy()
    return lookup[np.where(codes >= 0, codes, len(lookup) - 1)]


def _record_threads(memory: pd.DataFrame, events: pd.DataFrame) -> np.ndarray:
    """Per record the key `thread_key(events)` gives its thread, -1 for a thread without events."""
    pids, tids = events["pid"].cat.categories, events["tid"].cat.categories
    pid, tid = _codes_in(memory["pid"], pids), _codes_in(memory["tid"], tids)
    known = (pid >= 0) & (tid >= 0)
    # Records re-coded with the events' categories get the same keys as the events' threads.
    as_events = pd.DataFrame({"pid": pd.Categorical.from_codes(np.where(known, pid, -1), categories=pids),
                              "tid": pd.Categorical.from_codes(np.where(known, tid, -1), categories=tids)})
    return np.where(known, thread_key(as_events), -1)


def _last_started(node_thread: np.ndarray, node_start: np.ndarray, threads: np.ndarray,
                  t: np.ndarray) -> np.ndarray:
    """Per record, the last node of its thread (in preorder) that started at or before it, -1 none.
    Nodes are in preorder per thread, so sorted by thread then start."""
    out = np.full(len(t), -1, dtype=np.int64)
    order = np.argsort(threads, kind="stable")
    keys, first = np.unique(threads[order], return_index=True)
    bounds = np.r_[first, len(order)]
    for k, (lo, hi) in zip(keys.tolist(), zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        n_lo, n_hi = np.searchsorted(node_thread, k, side="left"), np.searchsorted(node_thread, k, side="right")
        if k < 0 or n_lo == n_hi:
            continue
        picked = order[lo:hi]
        at = np.searchsorted(node_start[n_lo:n_hi], t[picked], side="right") - 1
        out[picked] = np.where(at >= 0, at + n_lo, -1)
    return out


def attribution(tables: TraceTables, tree: OpTree) -> Attribution:
    """Every memory record placed in the operator tree (see the note above); the API may memoise it
    and pass it to `memory_events` and `memory_stats`."""
    events, memory = tables.events, tables.memory
    is_op, visible = _node_flags(events, tree)
    owner, up = _owners(tree)
    start = events["ts"].to_numpy()[tree.rows]
    end = start + events["dur"].to_numpy()[tree.rows]
    t = memory["ts"].to_numpy()
    candidate = _last_started(thread_key(events)[tree.rows], start, _record_threads(memory, events), t)
    # Ancestors of the last node started before t started before it too: climb until one still runs.
    node = climb(candidate, up, lambda at, nodes: visible[nodes] & (t[at] < end[nodes]))
    inside = node >= 0
    op = np.full(len(t), -1, dtype=np.int64)
    op[inside] = np.where(is_op[node[inside]], owner[node[inside]], -1)
    has_op = op >= 0
    caller = np.full(len(t), -1, dtype=np.int64)
    above = tree.parent[op[has_op]]
    caller[has_op] = climb(above, tree.parent, lambda at, nodes: visible[nodes])
    return Attribution(op=op, caller=caller, is_op=is_op)


# -- events -----------------------------------------------------------------------------------


def _pairs(addr: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(allocation, free) positions; -1 on the missing side. Records are in time order; a free
    pairs with the record just before it at its address when that is an allocation."""
    order = np.lexsort((np.arange(len(addr)), addr))
    a, b = order[:-1], order[1:]
    paired = (addr[a] == addr[b]) & (nbytes[a] > 0) & (nbytes[b] < 0)
    alloc_of_free = np.full(len(addr), -1, dtype=np.int64)
    alloc_of_free[b[paired]] = a[paired]
    allocs = np.flatnonzero(nbytes > 0)
    frees = np.flatnonzero(nbytes < 0)
    free_of_alloc = np.full(len(addr), -1, dtype=np.int64)
    free_of_alloc[a[paired]] = b[paired]
    lone_frees = frees[alloc_of_free[frees] < 0]
    return np.r_[allocs, np.full(len(lone_frees), -1)], np.r_[free_of_alloc[allocs], lone_frees]


def _names(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Name of each events row as an object array, None for -1."""
    names = events["name"]
    out = np.full(len(rows), None, dtype=object)
    live = rows >= 0
    if live.any():
        out[live] = names.cat.categories.astype(str).to_numpy()[names.cat.codes.to_numpy()[rows[live]]]
    return out


def _op_labels(events: pd.DataFrame, tree: OpTree, op: np.ndarray,
               caller: np.ndarray) -> tuple[list[str | None], np.ndarray]:
    """Operator name per row, and whether it is named after its caller: a factory op is shown
    as "caller (aten::empty)"."""
    op_names = _names(events, tree.event_rows(op))
    caller_names = _names(events, tree.event_rows(caller))
    relabel = np.array([isinstance(n, str) and n.startswith(_FACTORY_PREFIX) for n in op_names], dtype=bool)
    relabel &= caller >= 0
    labels = op_names.copy()
    labels[relabel] = [f"{c} ({o})" for c, o in zip(caller_names[relabel], op_names[relabel])]
    return labels.tolist(), relabel


def memory_events(tables: TraceTables, tree: OpTree, device: str, start_us: float | None = None,
                  end_us: float | None = None, placed: Attribution | None = None,
                  limit: int | None = None) -> dict[str, Any]:
    """Allocations of `device` paired with their frees (see the note above): `rows` of operator,
    size_bytes, alloc_us, free_us, lifetime_us (None where a side is missing), addr, op_id and
    caller_id (events-table rows, None when absent), in allocation time order, the first `limit`
    of them; `total` counts them all; `reason` says why there are no rows."""
    memory = tables.memory
    mine = np.flatnonzero(device_mask(memory, device))
    out: dict[str, Any] = {"device": device, "rows": [], "total": 0, "reason": None}
    if not len(mine):
        out["reason"] = f"no memory records for device {device}"
        return out
    addr = memory["addr"].to_numpy()[mine]
    if not (addr >= 0).any():
        out["reason"] = NO_ADDRESSES
        return out
    # Zero-byte records allocate nothing: left out, they would split a pair.
    usable = (addr >= 0) & (memory["bytes"].to_numpy()[mine] != 0)
    mine, addr = mine[usable], addr[usable]
    ts = memory["ts"].to_numpy()[mine]
    nbytes = memory["bytes"].to_numpy()[mine]
    alloc, free = _pairs(addr, nbytes)
    alloc_ts = np.where(alloc >= 0, ts[np.maximum(alloc, 0)], np.nan)
    free_ts = np.where(free >= 0, ts[np.maximum(free, 0)], np.nan)
    keep = in_range(alloc_ts, start_us, end_us) | in_range(free_ts, start_us, end_us)
    alloc, free, alloc_ts, free_ts = alloc[keep], free[keep], alloc_ts[keep], free_ts[keep]
    order = np.lexsort((free_ts, np.where(np.isnan(alloc_ts), free_ts, alloc_ts)))[:limit]
    out["total"] = len(alloc)
    alloc, free, alloc_ts, free_ts = alloc[order], free[order], alloc_ts[order], free_ts[order]
    placed = placed or attribution(tables, tree)
    has_alloc = alloc >= 0
    record = mine[np.where(has_alloc, alloc, free)]
    op = np.where(has_alloc, placed.op[record], -1)
    caller = np.where(has_alloc, placed.caller[record], -1)
    labels, named_after_caller = _op_labels(tables.events, tree, op, caller)
    size = np.abs(memory["bytes"].to_numpy()[record])
    op_id, caller_id = tree.event_rows(op), tree.event_rows(caller)
    columns = {
        "operator": labels,
        "size_bytes": size.tolist(),
        "alloc_us": times(alloc_ts),
        "free_us": times(free_ts),
        "lifetime_us": times(free_ts - alloc_ts),
        "addr": memory["addr"].to_numpy()[record].tolist(),
        "op_id": _optional(np.where(op_id >= 0, op_id, -1), absent=-1),
        "caller_id": _optional(np.where(named_after_caller, caller_id, -1), absent=-1),
    }
    # Column lists zipped into rows: a per-row clean would take seconds on a million records.
    out["rows"] = [dict(zip(columns, values)) for values in zip(*columns.values())]
    return out


def times(values: np.ndarray) -> list[float | None]:
    """Microseconds rounded as `clean` rounds them (Python's round; numpy's differs in the last
    digit), None for NaN."""
    return [None if v != v else round(v, 3) for v in values.tolist()]


def _optional(values: np.ndarray, absent: int) -> list[int | None]:
    """Plain ints, None where the value is `absent`."""
    out = values.astype(object)
    out[values == absent] = None
    return out.tolist()


# -- statistics -------------------------------------------------------------------------------

_STAT_KEYS = ("size_increase_bytes", "self_size_increase_bytes", "allocation_count", "self_allocation_count",
              "allocation_size_bytes", "self_allocation_size_bytes")


def _int_sums(nodes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, nodes, values)
    return out


def _calls(events: pd.DataFrame, tree: OpTree, is_op: np.ndarray, start_us: float | None,
           end_us: float | None) -> np.ndarray:
    """Per tree node: whether it is an operator call that overlaps the range (ends included)."""
    start = events["ts"].to_numpy()[tree.rows]
    end = start + events["dur"].to_numpy()[tree.rows]
    return is_op & ~tree.merged & ~_before(end, start_us) & ~_after(start, end_us)


def memory_stats(tables: TraceTables, tree: OpTree, device: str, start_us: float | None = None,
                 end_us: float | None = None, placed: Attribution | None = None) -> dict[str, Any]:
    """Per operator name, over the records of `device` in [start_us, end_us] (see the note above):
    `rows` of name, calls and the six size/count columns (bytes, self and total), only names with
    a non-zero value, largest self size increase first; `warnings`."""
    memory, events = tables.memory, tables.events
    placed = placed or attribution(tables, tree)
    picked = device_mask(memory, device) & in_range(memory["ts"].to_numpy(), start_us, end_us)
    out: dict[str, Any] = {"device": device, "rows": [], "warnings": []}
    if not picked.any():
        return out
    owned = picked & (placed.op >= 0)
    loose = int(picked.sum() - owned.sum())
    if loose:
        out["warnings"].append(f"{loose} of {int(picked.sum())} memory records lie outside every operator "
                               "(e.g. directly inside a step or the DataLoader) and count in no row")
    n = len(tree.rows)
    nodes = placed.op[owned]
    nbytes = memory["bytes"].to_numpy()[owned]
    allocs = nbytes > 0
    self_values = {
        "self_size_increase_bytes": _int_sums(nodes, nbytes, n),
        "self_allocation_count": _int_sums(nodes[allocs], np.ones(int(allocs.sum()), dtype=np.int64), n),
        "self_allocation_size_bytes": _int_sums(nodes[allocs], nbytes[allocs], n),
    }
    values = dict(self_values)
    for key, own in self_values.items():
        values[key.replace("self_", "")] = subtree_sums(tree.parent, own)
    ops = np.flatnonzero(placed.is_op & ~tree.merged)
    calls = _calls(events, tree, placed.is_op, start_us, end_us)
    frame = pd.DataFrame({"name": events["name"].array[tree.rows[ops]], "calls": calls[ops].astype(np.int64),
                          **{k: values[k][ops] for k in _STAT_KEYS}})
    table = frame.groupby("name", observed=True, sort=False).sum()
    table = table[(table[list(_STAT_KEYS)] != 0).any(axis=1)].reset_index()
    table["name"] = table["name"].astype(str)
    table = table.sort_values(["self_size_increase_bytes", "name"], ascending=[False, True], kind="stable")
    out["rows"] = [clean_row(r) for r in table[["name", "calls", *_STAT_KEYS]].to_dict("records")]
    return out
