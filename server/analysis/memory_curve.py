"""Memory view (profiler traces): allocated and reserved memory of one device over time.

- Each `[memory]` record carries the device's totals after it (`Total Allocated`, `Total
  Reserved`), so the curve is a step plot of those values.
- Long curves are thinned per pixel: each pixel keeps its first and last record and the
  records holding its lowest and highest allocated and reserved values, so every peak
  survives exactly (a million records answer in tens of milliseconds).
- Traces from before PyTorch 1.10 record no totals: they have no curve.
- The device's capacity comes from the trace's `deviceProperties`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..trace.tables import TraceTables
from .memory import device_mask, in_range, times
from .records import clean

MAX_CURVE_PX = 10_000
NO_TOTALS = ("these memory records carry no Total Allocated / Total Reserved values (PyTorch before 1.10 "
             "did not record them), so there is no curve; the statistics table still works")


def _extreme_positions(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """Per bucket, the first position of its highest and of its lowest value (NaN ignored)."""
    n = len(values)
    positions = np.arange(n)
    out = []
    for reduce in (np.fmax, np.fmin):
        best = np.repeat(reduce.reduceat(values, starts), counts)
        out.append(np.minimum.reduceat(np.where(values == best, positions, n), starts))
    return [p[p < n] for p in out]


def _thin(ts: np.ndarray, allocated: np.ndarray, reserved: np.ndarray, lo: float, hi: float,
          width_px: int) -> np.ndarray:
    """Positions to keep: per pixel the first, last, lowest and highest records (see the note)."""
    n = len(ts)
    if n <= 4 * width_px or hi <= lo:
        return np.arange(n)
    bucket = np.clip(((ts - lo) * (width_px / (hi - lo))).astype(np.int64), 0, width_px - 1)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    counts = np.diff(np.r_[starts, n])
    keep = [starts, starts + counts - 1,
            *_extreme_positions(allocated, starts, counts), *_extreme_positions(reserved, starts, counts)]
    return np.unique(np.concatenate(keep))


def _peak(ts: np.ndarray, values: np.ndarray) -> dict[str, Any] | None:
    if not np.isfinite(values).any():
        return None
    at = int(np.nanargmax(values))  # the first record that reaches it
    return {"bytes": int(values[at]), "t_us": clean("t_us", ts[at])}


def _byte_list(values: np.ndarray) -> list[int | None]:
    finite = np.isfinite(values)
    if finite.all():
        return values.astype(np.int64).tolist()
    return [int(v) if ok else None for v, ok in zip(values.tolist(), finite.tolist())]


def _capacity(tables: TraceTables, device: str) -> int | None:
    """The GPU's memory size from the trace's deviceProperties, when it has them."""
    if not device.startswith("GPU"):
        return None
    for prop in tables.metadata.get("deviceProperties") or []:
        if isinstance(prop, dict) and f"GPU{prop.get('id')}" == device:
            size = prop.get("totalGlobalMem")
            return int(size) if isinstance(size, (int, float)) else None
    return None


def curve(tables: TraceTables, device: str, start_us: float | None = None, end_us: float | None = None,
          width_px: int = 1000) -> dict[str, Any]:
    """Allocated and reserved bytes of `device` after each record in [start_us, end_us] (whole trace
    by default) as step-plot points `t_us`, `allocated_bytes`, `reserved_bytes`, thinned to about
    `width_px` pixels without losing a peak; `peak_allocated` / `peak_reserved` ({bytes, t_us} of
    the first record reaching the highest value in the range); `at_start`, the values in effect
    at `start_us` from the last record before it; `reason` says why there is no curve."""
    memory = tables.memory
    mine = device_mask(memory, device)
    ts_all = memory["ts"].to_numpy()[mine]
    allocated_all = memory["total_allocated"].to_numpy()[mine]
    reserved_all = memory["total_reserved"].to_numpy()[mine]
    out: dict[str, Any] = {"device": device, "records": 0, "points": 0, "t_us": [], "allocated_bytes": [],
                           "reserved_bytes": [], "peak_allocated": None, "peak_reserved": None,
                           "at_start": None, "capacity_bytes": _capacity(tables, device), "reason": None}
    if not len(ts_all):
        out["reason"] = f"no memory records for device {device}"
        return out
    with_totals = np.isfinite(allocated_all)
    if not with_totals.any():
        out["reason"] = NO_TOTALS
        return out
    ts_all, allocated_all, reserved_all = ts_all[with_totals], allocated_all[with_totals], reserved_all[with_totals]
    inside = in_range(ts_all, start_us, end_us)
    ts, allocated, reserved = ts_all[inside], allocated_all[inside], reserved_all[inside]
    if start_us is not None:
        before = int(np.searchsorted(ts_all, start_us, side="left")) - 1
        if before >= 0:
            out["at_start"] = {"t_us": clean("t_us", start_us),
                               "allocated_bytes": _byte_list(allocated_all[before:before + 1])[0],
                               "reserved_bytes": _byte_list(reserved_all[before:before + 1])[0]}
    out["records"] = int(len(ts))
    if not len(ts):
        return out
    lo = float(ts[0]) if start_us is None else float(start_us)
    hi = float(ts[-1]) if end_us is None else float(end_us)
    keep = _thin(ts, allocated, reserved, lo, hi, int(np.clip(width_px, 1, MAX_CURVE_PX)))
    out.update({
        "points": int(len(keep)),
        "t_us": times(ts[keep]),
        "allocated_bytes": _byte_list(allocated[keep]),
        "reserved_bytes": _byte_list(reserved[keep]),
        "peak_allocated": _peak(ts, allocated),
        "peak_reserved": _peak(ts, reserved),
    })
    return out
