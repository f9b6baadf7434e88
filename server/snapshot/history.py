"""One device's recorded history as columns, and every allocation's life on the entry axis.

1. Trace entries become numpy columns (action code, address, size, stream, time) in one pass.
2. Allocations pair each `alloc` with the next `free_completed` of its address (sorting the
   events by address, then entry index). An allocation is live from its alloc entry up to,
   not including, its free_completed entry; `free_requested` in between starts its "pending
   free" part (freed by the caller, waiting on another stream).
3. Allocations made before the history began come from two places: a free_completed whose
   address has no earlier event (start -1), and a block active in the final segments that no
   alloc of the history accounts for (start -1, still live at the end).
4. Block sizes: a block active in the final segments has its exact size. Any other block's
   size is estimated by the allocator's default rounding (up to a multiple of 512 bytes): the
   history records only the requested size, and a block given a whole unsplit remainder, or
   rounded by `roundup_power2_divisions`, was larger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot", "other")
(ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP,
 SEGMENT_UNMAP, OOM, SNAPSHOT, OTHER) = range(len(ACTIONS))
_CODE = {name: code for code, name in enumerate(ACTIONS)}

ACTIVE_STATES = ("active_allocated", "active_pending_free", "active_awaiting_free")
PENDING_STATES = ("active_pending_free", "active_awaiting_free")  # the C++ and the docs' names
MIN_BLOCK_BYTES = 512


def as_int(value: Any, default: int | None = 0) -> int | None:
    """An int field read from untrusted data: ints (not bools) pass, anything else is `default`."""
    return value if isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63 else default


def finite_float(value: Any) -> float | None:
    """A number field read from untrusted data as a finite float, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def segments_of(snap: dict[str, Any], device: int | None = None) -> list[dict[str, Any]]:
    """The stored segments (of one device, or all), skipping anything that is not a dict."""
    segments = snap.get("segments")
    return [s for s in (segments if isinstance(segments, list) else [])
            if isinstance(s, dict) and (device is None or as_int(s.get("device", 0)) == device)]


def round_block(requested: np.ndarray) -> np.ndarray:
    """The allocator's default block size for requested sizes: a multiple of 512, at least 512."""
    requested = np.asarray(requested, dtype=np.int64)
    return np.maximum(MIN_BLOCK_BYTES, -(-requested // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES)


def _ints(values: list[Any]) -> np.ndarray:
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        return np.array([as_int(v) for v in values], dtype=np.int64)


def _floats(values: list[Any]) -> np.ndarray:
    try:
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        return np.array([math.nan if (f := finite_float(v)) is None else f for v in values], dtype=np.float64)


def device_trace(snap: dict[str, Any], device: int) -> list[dict[str, Any]]:
    """The device's trace entries as stored (an empty list where none were recorded)."""
    traces = snap.get("device_traces")
    if not isinstance(traces, list) or not 0 <= device < len(traces) or not isinstance(traces[device], list):
        return []
    return traces[device]


def segment_devices(snap: dict[str, Any]) -> list[int]:
    """Devices that have segments or trace entries, ascending."""
    found = {as_int(s.get("device", 0)) for s in segments_of(snap)}
    traces = snap.get("device_traces")
    if isinstance(traces, list):
        found |= {d for d, t in enumerate(traces) if isinstance(t, list) and t}
    return sorted(d for d in found if isinstance(d, int))


def final_blocks(segment: dict[str, Any]) -> list[dict[str, Any]]:
    """A stored segment's blocks with addresses, requested sizes and frames filled in.

    Blocks lie end to end from the segment's address (older snapshots store no block address),
    and older snapshots keep the frames and real size in the block's first `history` record.
    """
    out = []
    addr = as_int(segment.get("address"))
    blocks = segment.get("blocks")
    for b in blocks if isinstance(blocks, list) else []:
        if not isinstance(b, dict):
            continue
        size = as_int(b.get("size"))
        history = b.get("history")
        first = history[0] if isinstance(history, list) and history and isinstance(history[0], dict) else {}
        requested = as_int(b.get("requested_size", first.get("real_size")), size)
        out.append({"address": as_int(b.get("address"), addr), "size": size, "requested_size": requested,
                    "state": b.get("state", "inactive"),
                    "frames": b.get("frames", first.get("frames", [])),
                    "stream": as_int(segment.get("stream"))})
        addr = out[-1]["address"] + size
    return out


@dataclass(frozen=True)
class Entries:
    """One device's trace entries as columns, in recorded order."""

    raw: list[dict[str, Any]]
    action: np.ndarray  # int8 codes into ACTIONS
    addr: np.ndarray  # int64; 0 where absent (OOM entries carry none)
    size: np.ndarray  # int64 bytes
    stream: np.ndarray  # int64
    time_us: np.ndarray  # float64; NaN where absent (older PyTorch records no time)

    def __len__(self) -> int:
        return len(self.raw)


def build_entries(snap: dict[str, Any], device: int) -> Entries:
    """The columns of one device's trace entries."""
    raw = device_trace(snap, device)
    if not all(type(e) is dict for e in raw):
        raw = [e if isinstance(e, dict) else {} for e in raw]
    codes = np.fromiter((_CODE.get(e.get("action"), OTHER) for e in raw), dtype=np.int8, count=len(raw))
    return Entries(raw=raw, action=codes,
                   addr=_ints([e.get("addr", 0) for e in raw]),
                   size=_ints([e.get("size", 0) for e in raw]),
                   stream=_ints([e.get("stream", 0) for e in raw]),
                   time_us=_floats([e.get("time_us", math.nan) for e in raw]))


@dataclass(frozen=True)
class Allocations:
    """Every allocation of one device the snapshot knows of, as columns (see the module note)."""

    start: np.ndarray  # entry index of its alloc; -1 = made before the history
    end: np.ndarray  # entry index of its free_completed; len(entries) = still live at the end
    freed: np.ndarray  # entry index of its free_requested (pending from there); `end` when none
    requested: np.ndarray  # bytes asked for
    block: np.ndarray  # block bytes (exact where `exact`, else rounded, see the module note)
    exact: np.ndarray  # bool: the block is in the final segments
    addr: np.ndarray
    stream: np.ndarray
    recorded: np.ndarray  # bool: its alloc entry is in the history
    frames_from: np.ndarray  # entry index whose frames are its stack; -1 - k = final block k
    final: list[dict[str, Any]]  # the final active blocks (see frames_from)

    def __len__(self) -> int:
        return len(self.start)

    def frames(self, i: int, entries: Entries) -> Any:
        src = int(self.frames_from[i])
        return entries.raw[src].get("frames") if src >= 0 else self.final[-1 - src].get("frames")


@dataclass(frozen=True)
class DeviceHistory:
    """What the analyses of one device share: its entries, allocations and final segments."""

    device: int
    entries: Entries
    allocations: Allocations
    segments: list[dict[str, Any]]  # the stored segments of this device
    warnings: list[str] = field(default_factory=list)


def _sorted_by_addr(idx: np.ndarray, addr: np.ndarray) -> np.ndarray:
    return idx[np.lexsort((idx, addr[idx]))]


def _find(values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Per query: the index of an equal item of `values`, or -1."""
    if not len(values):
        return np.full(len(queries), -1, dtype=np.int64)
    order = np.argsort(values, kind="stable")
    pos = np.clip(np.searchsorted(values[order], queries), 0, len(values) - 1)
    return np.where(values[order][pos] == queries, order[pos], -1)


def _last_request_before(entries: Entries, addr: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Per (addr, before): the last free_requested entry of that address before `before`, or -1."""
    req = np.flatnonzero(entries.action == FREE_REQUESTED)
    if not len(req) or not len(addr):
        return np.full(len(addr), -1, dtype=np.int64)
    # One sortable key per (address, index): the address's rank, then the index.
    known = np.unique(np.concatenate([entries.addr[req], addr]))
    width = len(entries) + 2
    key = np.searchsorted(known, entries.addr[req]) * width + req + 1
    order = np.argsort(key, kind="stable")
    key, req = key[order], req[order]
    query = np.searchsorted(known, addr) * width + before + 1
    pos = np.searchsorted(key, query, side="left") - 1  # the last request key below the query
    safe = np.clip(pos, 0, None)
    same = (pos >= 0) & (key[safe] // width == query // width)
    return np.where(same, req[safe], -1)


def build_allocations(entries: Entries, segments: list[dict[str, Any]], warnings: list[str]) -> Allocations:
    """Pair the history's allocs and frees, and add the allocations made before it (module note)."""
    n = len(entries)
    events = np.flatnonzero((entries.action == ALLOC) | (entries.action == FREE_COMPLETED))
    events = _sorted_by_addr(events, entries.addr)
    kind = entries.action[events]
    ev_addr = entries.addr[events]
    same_next = np.zeros(len(events), dtype=bool)
    same_next[:-1] = ev_addr[1:] == ev_addr[:-1]
    same_prev = np.zeros(len(events), dtype=bool)
    same_prev[1:] = same_next[:-1]
    is_alloc = kind == ALLOC
    nxt = np.minimum(np.arange(len(events)) + 1, max(len(events) - 1, 0))

    a = np.flatnonzero(is_alloc)
    a_start = events[a]
    a_end = np.where(same_next[a], events[nxt[a]], n).astype(np.int64)
    twice = int(np.count_nonzero(same_next[a] & (kind[nxt[a]] == ALLOC)))
    if twice:
        warnings.append(f"{twice} allocations of an address that was still live (a free is missing); "
                        "each is taken to end where its address was allocated again")
    f = np.flatnonzero(~is_alloc & ~same_prev)  # frees of allocations older than the history
    orphans = int(np.count_nonzero(~is_alloc & same_prev & ~np.roll(is_alloc, 1)))
    if orphans:
        warnings.append(f"{orphans} frees of an address with no live allocation were ignored")
    f_end = events[f]

    # The final state: active blocks, matched by address to allocations still live at the end.
    final = [b for s in segments for b in final_blocks(s) if b["state"] in ACTIVE_STATES]
    f_addr = _ints([b["address"] for b in final])
    f_size = _ints([b["size"] for b in final])
    f_req = _ints([b["requested_size"] for b in final])
    f_pending = np.array([b["state"] in PENDING_STATES for b in final], dtype=bool)
    live = np.flatnonzero(a_end == n)
    live_block = _find(f_addr, entries.addr[a_start[live]])
    hit = live_block >= 0
    matched_final = np.zeros(len(final), dtype=bool)
    matched_final[live_block[hit]] = True
    if np.count_nonzero(~hit):
        warnings.append(f"{int(np.count_nonzero(~hit))} allocations live at the end of the history "
                        "have no active block in the final segments")
    extra = np.flatnonzero(~matched_final)  # active at the end, allocated before the history

    start = np.concatenate([a_start, np.full(len(f), -1), np.full(len(extra), -1)]).astype(np.int64)
    end = np.concatenate([a_end, f_end, np.full(len(extra), n)]).astype(np.int64)
    addr = np.concatenate([entries.addr[a_start], entries.addr[f_end], f_addr[extra]]).astype(np.int64)
    requested = np.concatenate([entries.size[a_start], entries.size[f_end], f_req[extra]]).astype(np.int64)
    block = round_block(requested)
    exact = np.zeros(len(start), dtype=bool)
    live_rows = live[hit]
    block[live_rows] = f_size[live_block[hit]]
    exact[live_rows] = True
    extra_rows = np.arange(len(a_start) + len(f), len(start))
    block[extra_rows] = f_size[extra]
    exact[extra_rows] = True
    f_stream = _ints([b["stream"] for b in final])
    stream = np.concatenate([entries.stream[a_start], entries.stream[f_end], f_stream[extra]]).astype(np.int64)
    frames_from = np.concatenate([a_start, f_end, -1 - extra]).astype(np.int64)
    recorded = np.concatenate([np.ones(len(a_start), bool), np.zeros(len(f) + len(extra), bool)])

    # Pending free: the last free_requested of the address inside the allocation's life.
    req = _last_request_before(entries, addr, end)
    freed = np.where(req > start, req, end).astype(np.int64)
    pending_final = np.zeros(len(start), dtype=bool)
    pending_final[live_rows] = f_pending[live_block[hit]]
    pending_final[extra_rows] = f_pending[extra]
    at_end = end == n
    freed = np.where(at_end & ~pending_final, n, freed)  # the final state says it is not pending
    freed = np.where(at_end & pending_final & (freed == n), start, freed)  # pending, request unseen
    o = np.lexsort((addr, start))  # by start: the order allocations stack in
    return Allocations(start=start[o], end=end[o], freed=freed[o], requested=requested[o], block=block[o],
                       exact=exact[o], addr=addr[o], stream=stream[o], recorded=recorded[o],
                       frames_from=frames_from[o], final=final)


def build_history(snap: dict[str, Any], device: int) -> DeviceHistory:
    """Entries, allocations and final segments of one device (build once, share between views)."""
    warnings: list[str] = []
    segments = segments_of(snap, device)
    if not segments and not device_trace(snap, device):
        warnings.append(f"device {device} has no segments and no recorded history")
    entries = build_entries(snap, device)
    allocations = build_allocations(entries, segments, warnings)
    return DeviceHistory(device=device, entries=entries, allocations=allocations,
                         segments=segments, warnings=warnings)
