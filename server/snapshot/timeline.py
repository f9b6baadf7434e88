"""Active memory timeline: live allocations over the recorded history, stacked.

1. X axis: the trace entry index (as memory_viz draws it, and the `at` of the allocator state,
   so a click on the timeline can open the state there). A value at x is the state after entry
   x was applied; x = -1 is the state before the first recorded entry. Each point also carries
   the entry's `time_us` where PyTorch recorded one, for hover; time itself is not the axis
   because allocations come in bursts that a time axis would squeeze into slivers.
2. Y: the requested bytes of every live allocation (alloc up to its free_completed, so memory
   awaiting free on another stream still counts), plus those made before the history
   (see history.py). This is what memory_viz's timeline stacks.
3. Bands: the `max_allocations` largest allocations, each a band of constant height from its
   alloc to its free, stacked in allocation order; everything else is summed per point into
   `other_bytes` (memory_viz draws that on top).
4. Down-sampling: with more entries than `max_points`, the axis is cut into equal buckets and
   each keeps its highest and lowest point, so every peak (the global one exactly) survives;
   every band's first and last live point and both ends of the history are kept too. Values at
   kept points are exact, so the bands and `other_bytes` add up to `total_bytes` at each x.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.records import clean
from .frames import SiteIndex
from .history import DeviceHistory, build_history

DEFAULT_MAX_ALLOCATIONS = 200
DEFAULT_MAX_POINTS = 2000


def active_curve(history: DeviceHistory) -> np.ndarray:
    """Requested bytes live after each entry; position p is after entry p - 1 (p = 0: before all)."""
    a = history.allocations
    n = len(history.entries)
    delta = np.zeros(n + 2, dtype=np.int64)
    np.add.at(delta, a.start + 1, a.requested)
    np.add.at(delta, a.end + 1, -a.requested)  # end = n (still live) lands past the curve
    return np.cumsum(delta[: n + 1])


def _bucket_extremes(values: np.ndarray, buckets: int) -> np.ndarray:
    width = -(-len(values) // buckets)
    padded = np.full(buckets * width, values[-1], dtype=values.dtype)
    padded[: len(values)] = values
    rows = padded.reshape(buckets, width)
    base = np.arange(buckets) * width
    picks = np.concatenate([base + rows.argmax(axis=1), base + rows.argmin(axis=1)])
    return picks[picks < len(values)]


def _grid(total: np.ndarray, max_points: int, must: np.ndarray) -> np.ndarray:
    if len(total) <= max_points:
        return np.arange(len(total))
    keep = [np.array([0, len(total) - 1, int(total.argmax())]), must,
            _bucket_extremes(total, max(1, max_points // 2))]
    return np.unique(np.concatenate(keep).astype(np.int64))


def _time(history: DeviceHistory, index: int) -> float | None:
    return clean("time_us", history.entries.time_us[index]) if 0 <= index < len(history.entries) else None


def active_timeline(snap: dict[str, Any], device: int = 0, max_allocations: int = DEFAULT_MAX_ALLOCATIONS,
                    max_points: int = DEFAULT_MAX_POINTS, history: DeviceHistory | None = None) -> dict[str, Any]:
    """The stacked live-allocation timeline of one device (module note): points, bands, `other_bytes`, sites."""
    history = history or build_history(snap, device)
    a = history.allocations
    n = len(history.entries)
    total = active_curve(history)
    # The largest allocations become bands (ties: the earlier one), drawn in allocation order.
    chosen = np.sort(np.lexsort((a.start, -a.requested))[: max(0, max_allocations)])
    born, gone = a.start[chosen] + 1, a.end[chosen]  # live at positions born..gone
    grid = _grid(total, max(4, max_points), np.concatenate([born, np.minimum(gone, n)]))
    first = np.searchsorted(grid, born, side="left")
    last = np.searchsorted(grid, gone, side="right") - 1
    in_bands = np.zeros(len(grid) + 1, dtype=np.int64)
    np.add.at(in_bands, first, a.requested[chosen])
    np.add.at(in_bands, last + 1, -a.requested[chosen])
    x = grid - 1
    sites = SiteIndex()
    bands = []
    for row, lo, hi in zip(chosen.tolist(), first.tolist(), last.tolist()):
        start, end = int(a.start[row]), int(a.end[row])
        bands.append({
            "allocation": row, "address": int(a.addr[row]), "size_bytes": int(a.requested[row]),
            "block_bytes": int(a.block[row]), "stream": int(a.stream[row]),
            "first": lo, "last": hi,  # positions in x where the band is live
            "start_index": start, "end_index": end if end < n else None,
            "start_time_us": _time(history, start), "end_time_us": _time(history, end),
            "alloc_recorded": bool(a.recorded[row]),
            "site": sites.site_of(a.frames(row, history.entries))})
    peak = int(total.argmax()) if len(total) else 0
    return {
        "device": history.device, "entries": n, "x_axis": "entry_index",
        "x": x.tolist(), "time_us": [_time(history, int(i)) for i in x],
        "total_bytes": total[grid].tolist(),
        "other_bytes": (total[grid] - np.cumsum(in_bands)[: len(grid)]).tolist(),
        "bands": bands, "sites": sites.sites,
        "peak": {"index": peak - 1, "bytes": int(total[peak]) if len(total) else 0, "time_us": _time(history, peak - 1)},
        "allocations": len(a), "other_allocations": len(a) - len(chosen),
        "warnings": list(history.warnings)}
