"""Allocator state: segments and their blocks at a chosen point of the history.

1. `at` is a trace entry index: the state after that entry (-1: before the first entry; None:
   the snapshot's final state, the segments as stored).
2. Segments: the stored segments, with the history after `at` undone from the last entry
   back (as memory_viz's allocator state history does): a segment_alloc removes its segment,
   a segment_free puts it back; for expandable segments a segment_map cuts its range out and a
   segment_unmap maps it back, joining a neighbour on the same stream.
3. Blocks: the allocations live after `at` (see history.py), which is the same as undoing
   each later alloc / free_requested / free_completed, done at once over the columns. A block
   is "pending free" from its free_requested to its free_completed.
4. Inactive blocks are the gaps between active blocks in a segment (the allocator merges
   neighbouring free blocks). Fragmentation of a segment: inactive / total size.
5. Approximation: blocks not in the final state have estimated sizes (history.py, step 4),
   so in a past state part of a block's rounding may show as inactive; `approximate` says
   when that can happen. Segments put back by replay have no segment_type.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from ..analysis.records import clean
from .frames import SiteIndex
from .history import (ACTIONS, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP, OOM,
                      DeviceHistory, as_int, build_history)

DEFAULT_MAX_BLOCKS = 20000


class _Segments:
    """Segment ranges by start address, edited while undoing segment entries."""

    def __init__(self, stored: list[dict[str, Any]]) -> None:
        self.by_start: dict[int, dict[str, Any]] = {}
        for s in stored:
            addr, size = as_int(s.get("address"), None), as_int(s.get("total_size"), None)
            if addr is not None and size is not None:
                kind = s.get("segment_type")
                self.by_start[addr] = {"address": addr, "total_bytes": size, "stream": as_int(s.get("stream")),
                                       "segment_type": kind if isinstance(kind, str) else None,
                                       "is_expandable": bool(s.get("is_expandable", False))}
        self.starts = sorted(self.by_start)
        self.misses = 0

    def _put(self, seg: dict[str, Any]) -> None:
        self.by_start[seg["address"]] = seg
        bisect.insort(self.starts, seg["address"])

    def _drop(self, addr: int) -> dict[str, Any]:
        self.starts.pop(bisect.bisect_left(self.starts, addr))
        return self.by_start.pop(addr)

    def _containing(self, addr: int, size: int) -> dict[str, Any] | None:
        i = bisect.bisect_right(self.starts, addr) - 1
        seg = self.by_start[self.starts[i]] if i >= 0 else None
        return seg if seg and addr + size <= seg["address"] + seg["total_bytes"] else None

    def undo_alloc(self, addr: int) -> None:
        if addr in self.by_start:
            self._drop(addr)
        else:
            self.misses += 1

    def undo_free(self, addr: int, size: int, stream: int) -> None:
        self._put({"address": addr, "total_bytes": size, "stream": stream, "segment_type": None,
                   "is_expandable": False})

    def undo_map(self, addr: int, size: int) -> None:
        seg = self._containing(addr, size)
        if seg is None:
            self.misses += 1
            return
        seg_end, end = seg["address"] + seg["total_bytes"], addr + size
        self._drop(seg["address"])
        if seg["address"] < addr:
            self._put({**seg, "total_bytes": addr - seg["address"]})
        if end < seg_end:
            self._put({**seg, "address": end, "total_bytes": seg_end - end})

    def undo_unmap(self, addr: int, size: int, stream: int) -> None:
        seg = {"address": addr, "total_bytes": size, "stream": stream, "segment_type": None, "is_expandable": True}
        i = bisect.bisect_left(self.starts, addr)
        if i > 0:
            prev = self.by_start[self.starts[i - 1]]
            if prev["address"] + prev["total_bytes"] == addr and prev["stream"] == stream:
                self._drop(prev["address"])
                seg = {**prev, "total_bytes": prev["total_bytes"] + size}
        nxt = self.by_start.get(addr + size)
        if nxt is not None and nxt["stream"] == stream:
            self._drop(nxt["address"])
            seg = {**seg, "total_bytes": seg["total_bytes"] + nxt["total_bytes"]}
        self._put(seg)

    def ordered(self) -> list[dict[str, Any]]:
        return [self.by_start[a] for a in self.starts]


def _segments_at(history: DeviceHistory, at: int, warnings: list[str]) -> list[dict[str, Any]]:
    e = history.entries
    segs = _Segments(history.segments)
    codes = (SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP)
    later = np.flatnonzero(np.isin(e.action, codes))
    for i in later[later > at][::-1].tolist():
        action, addr, size, stream = int(e.action[i]), int(e.addr[i]), int(e.size[i]), int(e.stream[i])
        if action == SEGMENT_ALLOC:
            segs.undo_alloc(addr)
        elif action == SEGMENT_FREE:
            segs.undo_free(addr, size, stream)
        elif action == SEGMENT_MAP:
            segs.undo_map(addr, size)
        else:
            segs.undo_unmap(addr, size, stream)
    if segs.misses:
        warnings.append(f"{segs.misses} segment entries did not match the segments they should undo")
    return segs.ordered()


def _entry(history: DeviceHistory, i: int, sites: SiteIndex) -> dict[str, Any] | None:
    e = history.entries
    if not 0 <= i < len(e):
        return None
    raw = e.raw[i]
    return {"index": i, "action": raw.get("action") if isinstance(raw.get("action"), str) else ACTIONS[e.action[i]],
            "address": int(e.addr[i]), "size_bytes": int(e.size[i]), "stream": int(e.stream[i]),
            "time_us": clean("time_us", e.time_us[i]), "device_free_bytes": as_int(raw.get("device_free"), None),
            "site": sites.site_of(raw.get("frames"))}


def _fill(seg: dict[str, Any], addr: np.ndarray, size: np.ndarray, req: np.ndarray, pending: np.ndarray,
          recorded: np.ndarray, site: list[int], with_blocks: bool) -> dict[str, Any]:
    """One segment's active blocks (sorted by address) and the inactive gaps between them."""
    start, total = seg["address"], seg["total_bytes"]
    blocks, cursor, inactive, largest = [], start, 0, 0
    for k in range(len(addr)):
        b_addr, b_size = int(addr[k]), int(size[k])
        if b_addr > cursor:
            gap = b_addr - cursor
            inactive, largest = inactive + gap, max(largest, gap)
            if with_blocks:
                blocks.append({"address": cursor, "size_bytes": gap, "state": "inactive"})
        if with_blocks:
            blocks.append({"address": b_addr, "size_bytes": b_size, "requested_bytes": int(req[k]),
                           "state": "active_pending_free" if pending[k] else "active_allocated",
                           "alloc_recorded": bool(recorded[k]), "site": site[k]})
        cursor = max(cursor, b_addr + b_size)
    if start + total > cursor:
        gap = start + total - cursor
        inactive, largest = inactive + gap, max(largest, gap)
        if with_blocks:
            blocks.append({"address": cursor, "size_bytes": gap, "state": "inactive"})
    allocated = int(size[~pending].sum())
    return {**seg, "allocated_bytes": allocated, "pending_free_bytes": int(size[pending].sum()),
            "inactive_bytes": inactive, "requested_bytes": int(req.sum()),
            "largest_inactive_bytes": largest,
            "fragmentation_ratio": clean("fragmentation_ratio", inactive / total) if total else None,
            "blocks": blocks if with_blocks else None}


def allocator_state(snap: dict[str, Any], device: int = 0, at: int | None = None,
                    max_blocks: int = DEFAULT_MAX_BLOCKS, history: DeviceHistory | None = None) -> dict[str, Any]:
    """Segments and blocks after entry `at` (module note), with totals in bytes and the device's OOM events."""
    history = history or build_history(snap, device)
    warnings = list(history.warnings)
    n = len(history.entries)
    point = n - 1 if at is None else int(at)
    if not -1 <= point < n:
        warnings.append(f"at={at} is outside the history (-1..{n - 1}); the nearest point is shown")
        point = min(max(point, -1), n - 1)
    a = history.allocations
    live = np.flatnonzero((a.start <= point) & (point < a.end))
    pending = a.freed[live] <= point
    segments = _segments_at(history, point, warnings)
    starts = np.array([s["address"] for s in segments], dtype=np.int64)
    ends = starts + np.array([s["total_bytes"] for s in segments], dtype=np.int64)
    owner = np.searchsorted(starts, a.addr[live], side="right") - 1
    inside = np.zeros(len(live), dtype=bool)
    if len(segments):
        inside = (owner >= 0) & (a.addr[live] < ends[np.clip(owner, 0, None)])
    if np.count_nonzero(~inside):
        warnings.append(f"{int(np.count_nonzero(~inside))} live blocks lie in no segment at this point and are left out")
    live, pending, owner = live[inside], pending[inside], owner[inside]
    order = np.lexsort((a.addr[live], owner))
    live, pending, owner = live[order], pending[order], owner[order]
    bounds = np.searchsorted(owner, np.arange(len(segments) + 1))
    sites = SiteIndex()
    site = [sites.site_of(a.frames(i, history.entries)) for i in live.tolist()]
    # Within the block budget, the largest segments keep their blocks.
    budget, with_blocks = max_blocks, np.zeros(len(segments), dtype=bool)
    for k in sorted(range(len(segments)), key=lambda k: -segments[k]["total_bytes"]):
        cost = 2 * int(bounds[k + 1] - bounds[k]) + 1
        if cost <= budget:
            with_blocks[k], budget = True, budget - cost
    if not with_blocks.all():
        warnings.append(f"blocks of {int(np.count_nonzero(~with_blocks))} smaller segments are left out "
                        f"(over {max_blocks} blocks); their totals are kept")
    out = []
    for k, seg in enumerate(segments):
        rows = live[bounds[k]:bounds[k + 1]]
        part = slice(bounds[k], bounds[k + 1])
        out.append(_fill(seg, a.addr[rows], a.block[rows], a.requested[rows], pending[part], a.recorded[rows],
                         site[part], bool(with_blocks[k])))
    totals = {key: sum(s[key] for s in out) for key in
              ("total_bytes", "allocated_bytes", "pending_free_bytes", "inactive_bytes", "requested_bytes")}
    reserved = totals.pop("total_bytes")
    e = history.entries
    ooms = [{"index": int(i), "time_us": clean("time_us", e.time_us[i]), "size_bytes": int(e.size[i]),
             "device_free_bytes": as_int(e.raw[i].get("device_free"), None), "before": bool(i <= point)}
            for i in np.flatnonzero(e.action == OOM).tolist()]
    return {"device": history.device, "at": None if at is None else point, "index": point, "entries": n,
            "entry": _entry(history, point, sites), "time_us": clean("time_us", e.time_us[point]) if point >= 0 else None,
            "totals": {"segments": len(out), "reserved_bytes": reserved, **totals,
                       "active_bytes": totals["allocated_bytes"] + totals["pending_free_bytes"],
                       "largest_inactive_bytes": max([s["largest_inactive_bytes"] for s in out], default=0),
                       "fragmentation_ratio": clean("fragmentation_ratio", totals["inactive_bytes"] / reserved) if reserved else None},
            "segments": out, "sites": sites.sites, "ooms": ooms,
            "approximate": bool(np.count_nonzero(~a.exact[live])), "warnings": warnings}
