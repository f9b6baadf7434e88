"""Each rank's clock against a reference rank's, from when matched collectives end, so that
several ranks' timelines can be drawn on one clock.

1. A symmetric collective (stragglers' `is_symmetric`) ends on every rank of its group at
   about the same instant: NCCL completes it once the last rank has arrived, and every rank's
   kernel leaves then. Where it started says nothing (a rank waits there for the others). So
   for each matched collective (group, match) that two ranks timed, the difference between
   their ends is the difference between their clocks, plus a few us of noise (a ring's last
   hop). A call is timed by its GPU kernels when it ran any (Kineto puts them on the host's
   clock), else by its host time (gloo).
2. A rank's `offset_us` is the median, over the collectives it shares with the reference
   rank (the lowest rank), of its end minus the reference's: its timestamps are `offset_us`
   ahead, and `t - offset_us` puts them on the reference's clock. `used` counts those
   collectives and `spread_us` is the median absolute deviation of the differences: how far
   one collective's reading typically strays from the offset, i.e. how sure it is.
3. A rank that shares no collective with the reference (other process groups only) is read
   against the ranks already placed: its end minus the median of their ends on the
   reference's clock, collective by collective, repeated until no more ranks can be placed.
   A rank sharing none with any placed rank has no offset (None, used 0).
4. Ranks on one host share one clock: there the offsets come out within a few us of 0 (the
   last rank into a collective leaves a few us after the others).
5. One collective across ranks (the Trace view's highlight): the call an event on the GPU (a
   communication kernel, or the `nccl:*` annotation over its kernels) belongs to is the call whose
   kernels start with it, else the one whose kernels' range overlaps it most; for a host op
   (`nccl:*`, `gloo:*`, `record_param_comms`), the narrowest call whose host range holds it; the same collective on another rank is its call with the same (group, match) once the
   shown ranks' calls are matched (stragglers' definition 1, among those ranks); on each rank the
   event shown for it is the same side as the one picked: its first communication kernel, or its
   host op (the `nccl:*` / `gloo:*` op of the call's name, else its `record_param_comms`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import HOST_OP_KINDS, Kind
from ..trace.tables import TraceTables
from .categories import is_communication_kernel_name
from .kinds import of_kinds
from .names import name_mask
from .records import clean_row
from .stragglers import KEY, is_symmetric


def end_matrix(calls: pd.DataFrame, ranks: list[int]) -> np.ndarray:
    """Matched symmetric collectives (rows) x `ranks` (columns): when each rank's call ended,
    NaN where the rank did not time it (definition 1); from stragglers.align_calls' frame."""
    if calls.empty:
        return np.empty((0, len(ranks)))
    symmetric = calls["name"].map(is_symmetric).astype(bool).to_numpy()
    timed = calls[(calls["match"].to_numpy() >= 0) & symmetric & (calls["ranks_present"].to_numpy() >= 2)]
    end = timed["gpu_end"].where(timed["kernels"] > 0, timed["cpu_end"])
    wide = timed.assign(end=end).pivot_table(index=KEY, columns="rank", values="end", aggfunc="first")
    return wide.reindex(columns=ranks).to_numpy(dtype=np.float64)


def clock_offsets(ends: np.ndarray, ranks: list[int]) -> list[dict[str, Any]]:
    """Per rank (in `ranks` order, the first is the reference): offset_us, used, spread_us
    (definitions 2 and 3)."""
    n = len(ranks)
    offset = np.full(n, np.nan)
    used = np.zeros(n, dtype=np.int64)
    spread = np.full(n, np.nan)
    if n:
        offset[0] = 0.0
        used[0] = int(np.isfinite(ends[:, 0]).sum()) if len(ends) else 0
        spread[0] = 0.0
    placed = np.isfinite(offset)
    while len(ends) and not placed.all():
        # The placed ranks' ends on the reference's clock, per collective: their median.
        with warnings.catch_warnings():   # a collective no placed rank timed stays NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            anchor = np.nanmedian(ends[:, placed] - offset[placed], axis=1)
        progress = False
        for j in np.flatnonzero(~placed):
            diff = ends[:, j] - anchor
            diff = diff[np.isfinite(diff)]
            if not len(diff):
                continue
            offset[j] = np.median(diff)
            used[j] = len(diff)
            spread[j] = np.median(np.abs(diff - offset[j]))
            progress = True
        if not progress:
            break
        placed = np.isfinite(offset)
    return [clean_row({"rank": rank, "offset_us": _float(offset[i]), "used": int(used[i]),
                       "spread_us": _float(spread[i])}) for i, rank in enumerate(ranks)]


def _float(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def timeline_ranks(late: dict[str, Any]) -> dict[str, int | None]:
    """The two ranks the Trace view shows by default, from stragglers' result: the straggler (the
    first named one, else the rank with the largest median arrival delay) and the fastest (the
    smallest median delay: it arrives first and waits); None where fewer than two ranks were compared."""
    compared = [r for r in late["ranks"] if r.get("median_delay_us") is not None]
    if len(compared) < 2:
        return {"straggler": None, "fastest": None}
    named = late["stragglers"]
    straggler = named[0]["rank"] if named else max(compared, key=lambda r: (r["median_delay_us"], -r["rank"]))["rank"]
    fastest = min((r for r in compared if r["rank"] != straggler), key=lambda r: (r["median_delay_us"], r["rank"]))
    return {"straggler": straggler, "fastest": fastest["rank"]}


def clocks(calls: pd.DataFrame, ranks: list[int], late: dict[str, Any]) -> dict[str, Any]:
    """/api/distributed's `clock`: the reference rank, every rank's offset, and the ranks the
    Trace view shows by default."""
    return {"reference": ranks[0] if ranks else None,
            "ranks": clock_offsets(end_matrix(calls, ranks), ranks), **timeline_ranks(late)}


# --- one collective across ranks (definition 5) ---------------------------------------------

COLLECTIVE_HOST_OP = "record_param_comms"


def is_collective_event(name: str, kernel: bool) -> bool:
    """Events the Trace view can pick a collective by: a communication kernel, a collective op or
    annotation (host or GPU)."""
    if kernel:
        return is_communication_kernel_name(name)
    return name == COLLECTIVE_HOST_OP or name.startswith(("nccl:", "gloo:"))


def call_of_event(calls: pd.DataFrame, ts: float, dur: float, on_gpu: bool) -> int | None:
    """The row of `calls` (a worker's collective_calls) the event belongs to (definition 5), None
    when none holds it. On the GPU (a kernel, or the `nccl:*` annotation over its kernels): the call
    whose kernels start with it, else the one whose kernels' range overlaps it most."""
    lo, hi = ("gpu_ts", "gpu_end") if on_gpu else ("cpu_ts", "cpu_end")
    start, end = calls[lo].to_numpy(dtype=np.float64), calls[hi].to_numpy(dtype=np.float64)
    if on_gpu:
        overlap = np.where(calls["kernels"].to_numpy() > 0, np.minimum(end, ts + dur) - np.maximum(start, ts), -1.0)
        first = np.flatnonzero((overlap >= 0) & (start == ts))
        if len(first):
            return int(first[0])
        best = int(np.argmax(overlap)) if len(overlap) else -1
        return best if best >= 0 and overlap[best] > 0 else None
    rows = np.flatnonzero((start <= ts) & (ts + dur <= end))
    return int(rows[np.argmin(end[rows] - start[rows])]) if len(rows) else None


def same_collective(aligned: pd.DataFrame, rank: int, row: int) -> dict[int, int]:
    """Per rank, the row of its own calls holding the collective that `rank`'s call `row` is;
    `aligned` is stragglers.align_calls' frame of calls carrying their row in a `call` column."""
    mine = aligned[(aligned["rank"] == rank) & (aligned["call"] == row)]
    if mine.empty or mine["match"].iat[0] < 0:
        return {rank: row} if not mine.empty else {}
    group, match = mine["group"].iat[0], mine["match"].iat[0]
    same = aligned[(aligned["group"] == group) & (aligned["match"] == match)]
    return {int(r): int(c) for r, c in zip(same["rank"], same["call"])}


def event_of_call(tables: TraceTables, call: pd.Series, on_gpu: bool) -> int | None:
    """The event shown for a call on its rank: its first communication kernel, or its host op."""
    events = tables.events
    ts = events["ts"].to_numpy()
    kind = events["kind"].to_numpy()
    if on_gpu and call["kernels"] > 0:
        inside = (kind == Kind.KERNEL) & (ts >= call["gpu_ts"]) & (ts < call["gpu_end"])
        rows = np.flatnonzero(inside)
        rows = rows[name_mask(events["name"].iloc[rows], is_communication_kernel_name)] if len(rows) else rows
    else:
        inside = of_kinds(kind, HOST_OP_KINDS) & (ts >= call["cpu_ts"]) & (ts < call["cpu_end"])
        rows = np.flatnonzero(inside)
        names = events["name"].iloc[rows].astype(str).to_numpy() if len(rows) else np.empty(0, dtype=object)
        own = rows[names == call["name"]]
        rows = own if len(own) else rows[(names == COLLECTIVE_HOST_OP) & (ts[rows] == call["cpu_ts"])]
    return int(rows[np.argmin(ts[rows])]) if len(rows) else None
