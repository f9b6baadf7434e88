"""Top allocation sites: where the bytes were allocated, by stack.

Each allocation (history.py) is charged to its site (frames.py: the user's Python line, else
torch's, else the ATen operator). Per site: calls (allocations), total bytes requested,
the largest single allocation, bytes still live at the end of the snapshot, and bytes live
at the device's peak of the active memory timeline (summed over devices when all are asked
for). An allocation whose alloc entry precedes the history has no allocating stack: a block
still live keeps the stack stored with it, one only seen being freed is charged to
"(allocated before the recorded history)".
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .frames import BEFORE_HISTORY, SiteIndex
from .history import DeviceHistory, build_history, segment_devices
from .timeline import active_curve

SiteOrder = Literal["total_bytes", "peak_bytes", "live_bytes", "calls"]
_COLUMNS = ("calls", "total_bytes", "max_bytes", "live_bytes", "peak_bytes")


def _sum_by(site: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    out = np.zeros(count, dtype=np.int64)  # integer sums: float weights would round huge totals
    np.add.at(out, site, values)
    return out


def _charge(history: DeviceHistory, sites: SiteIndex) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per allocation: its site id; and masks of those live at the end and at the peak."""
    a, entries = history.allocations, history.entries
    before = sites.named(BEFORE_HISTORY)
    raw = entries.raw
    site = np.fromiter(
        (sites.site_of(raw[src].get("frames")) if src >= 0 and rec else
         sites.site_of(a.final[-1 - src].get("frames")) if src < 0 else before
         for src, rec in zip(a.frames_from.tolist(), a.recorded.tolist())),
        dtype=np.int64, count=len(a))
    curve = active_curve(history)
    peak = int(curve.argmax()) - 1 if len(curve) else -1
    n = len(entries)
    return site, a.end == n, (a.start <= peak) & (peak < a.end)


def top_sites(snap: dict[str, Any], device: int | None = None, n: int = 20, by: SiteOrder = "total_bytes",
              histories: dict[int, DeviceHistory] | None = None) -> dict[str, Any]:
    """The `n` top allocation sites by `by` (module note); bytes are requested bytes."""
    devices = segment_devices(snap) if device is None else [device]
    sites = SiteIndex()
    sums = {k: [] for k in _COLUMNS}
    warnings: list[str] = []
    for d in devices:
        history = (histories or {}).get(d) or build_history(snap, d)
        warnings += history.warnings
        site, live, at_peak = _charge(history, sites)
        size = history.allocations.requested
        count = len(sites.sites)
        sums["calls"].append(np.bincount(site, minlength=count))
        sums["total_bytes"].append(_sum_by(site, size, count))
        top = np.zeros(count, dtype=np.int64)
        np.maximum.at(top, site, size)
        sums["max_bytes"].append(top)
        sums["live_bytes"].append(_sum_by(site[live], size[live], count))
        sums["peak_bytes"].append(_sum_by(site[at_peak], size[at_peak], count))
    count = len(sites.sites)
    table = {k: np.zeros(count, dtype=np.int64) for k in _COLUMNS}
    for k, parts in sums.items():
        for part in parts:  # sites seen on a later device make later parts longer
            if k == "max_bytes":
                table[k][: len(part)] = np.maximum(table[k][: len(part)], part)
            else:
                table[k][: len(part)] += part
    order = np.lexsort((np.arange(count), -table[by]))[: max(0, n)] if count else np.array([], dtype=np.int64)
    rows = [{**sites.sites[i], **{k: int(table[k][i]) for k in _COLUMNS}} for i in order.tolist()]
    return {"devices": devices, "by": by, "rows": rows, "sites": count,
            "allocations": int(table["calls"].sum()), "total_bytes": int(table["total_bytes"].sum()),
            "warnings": warnings}
