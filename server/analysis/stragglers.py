"""Collectives matched across ranks: data transfer versus waiting, and who arrives last.

1. Alignment: NCCL requires every rank of a process group to issue the group's collectives
   in the same order, so the k-th call of a collective (by name) of a group within a step is
   the same collective on every rank of the group. Calls are keyed by (step, group, name, k);
   a key found on two ranks or more is aligned. Where ranks made different numbers of calls
   of a collective in a step, the first calls are aligned and the rest are reported, never
   dropped silently.
2. Data transfer and waiting, as the reference plugin defined them: a collective finishes on
   every rank together, so its shortest GPU time among the ranks is the time spent moving
   data, and what a rank spent beyond that is time waiting for the others (synchronizing).
3. Arrival delay: the same fact read the other way. A collective ends on every rank at
   about the same instant, so a rank that entered it d us after the earliest rank spent d us
   less in it: delay = the longest time among the ranks minus the rank's own. This needs no
   shared clock (hosts' clocks differ by more than a collective lasts) and no agreement on
   where steps start. Times are GPU kernel times; a gloo call's host time. The rank(s) whose
   delay is within 1 us (TIE_US) of the largest, when ranks differ by more than that, count one
   "last" each; the rank(s) last most often are named stragglers, with their median, mean
   and largest delay over the aligned collectives. For reading, each occurrence also lists
   when each rank entered it, from the start of its own step (GPU kernel start, else the
   host call's start), and where the call lies on that rank's own clock (`start_us`/`end_us`,
   for opening the rank's Trace view on it). Only symmetric collectives (all-reduce, all-gather, reduce-scatter,
   all-to-all, barrier) count: in a rooted one (broadcast, reduce, send/recv) the root may
   leave before the others arrive, so its short time says nothing about when it came.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from .records import clean_row

# Arrivals closer than this are a tie: nobody is last (timestamps are rounded to ~1 us).
TIE_US = 1.0
# Occurrences listed one by one in the response, the widest spreads (the aggregates use all).
MAX_OCCURRENCES = 1000
KEY = ["step_name", "group", "name", "index"]
_SYMMETRIC = re.compile(r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|barrier", re.IGNORECASE)


def is_symmetric(name: str) -> bool:
    """Collectives every rank leaves together (nobody finishes before the last one arrives)."""
    return bool(_SYMMETRIC.search(name))


def align_calls(calls_by_rank: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """All ranks' calls in one frame with `rank`, `ranks_present` (ranks holding the same
    (step, name, k) call), `transfer_us` (the shortest busy time among them, NaN when not
    aligned) and `wait_us` (busy time beyond it)."""
    frames = [calls.assign(rank=rank) for rank, calls in calls_by_rank.items() if len(calls)]
    if not frames:
        return pd.DataFrame(columns=[*KEY, "rank", "busy_us", "ranks_present", "transfer_us", "wait_us"])
    calls = pd.concat(frames, ignore_index=True)
    grouped = calls.groupby(KEY, sort=False)
    calls["ranks_present"] = grouped["rank"].transform("nunique")
    shortest = grouped["busy_us"].transform("min")
    aligned = (calls["ranks_present"] >= 2) & np.isfinite(calls["busy_us"])
    calls["transfer_us"] = np.where(aligned, shortest, np.nan)
    calls["wait_us"] = calls["busy_us"] - calls["transfer_us"]
    return calls


def _busy_matrix(calls: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Per aligned call (rows) and rank (columns): its busy time, for the calls that at least
    two ranks timed, with each row's basis ("gpu": kernels, "cpu": host time); and where each
    rank's call lies: `arrival_us` from its step's start, `start_us`/`end_us` on its own clock."""
    symmetric = calls["name"].map(is_symmetric).astype(bool)
    aligned = calls[(calls["ranks_present"] >= 2) & np.isfinite(calls["busy_us"]) & symmetric]
    on_gpu = aligned["kernels"] > 0
    aligned = aligned.assign(arrival_us=aligned["gpu_arrival_us"].where(on_gpu, aligned["cpu_arrival_us"]),
                             start_us=aligned["gpu_ts"].where(on_gpu, aligned["cpu_ts"]),
                             end_us=aligned["gpu_end"].where(on_gpu, aligned["cpu_end"]))
    placed = ["arrival_us", "start_us", "end_us"]
    wide = aligned.pivot_table(index=KEY, columns="rank", values=["busy_us", *placed], aggfunc="first", dropna=False)
    if not len(wide):
        return pd.DataFrame(), {k: pd.DataFrame() for k in placed}
    busy = wide["busy_us"]
    keep = busy.notna().sum(axis=1) >= 2
    basis = aligned.groupby(KEY)["kernels"].max().reindex(busy.index)
    busy = busy[keep].copy()
    busy.insert(0, "basis", np.where(basis[keep] > 0, "gpu", "cpu"))
    return busy, {k: wide[k][keep] for k in placed}


def stragglers(calls: pd.DataFrame, ranks: list[dict[str, Any]], step_us: dict[int, float]) -> dict[str, Any]:
    """Who arrives last at the aligned collectives, by how much, and what could not be aligned.

    `calls` is `align_calls`' frame; `ranks` the identities ({"rank", "worker"}) in rank order;
    `step_us` each rank's mean step time."""
    order = [r["rank"] for r in ranks]
    worker = {r["rank"]: r["worker"] for r in ranks}
    busy, placed = _busy_matrix(calls) if len(calls) else (pd.DataFrame(), {})
    busy = busy.reindex(columns=["basis", *order])
    placed = {k: placed.get(k, pd.DataFrame()).reindex(index=busy.index, columns=order)
              for k in ("arrival_us", "start_us", "end_us")}
    times = busy[order].to_numpy(dtype=np.float64)
    with np.errstate(all="ignore"):
        longest = np.nanmax(times, axis=1) if len(times) else np.empty(0)
    delay = longest[:, None] - times
    spread = np.nanmax(delay, axis=1) if len(times) else np.empty(0)
    counted = spread > TIE_US
    last = (delay >= (spread - TIE_US)[:, None]) & counted[:, None]
    per_rank = [_rank_row(rank, worker[rank], delay[:, i], int(last[:, i].sum()), int(counted.sum()),
                          step_us.get(rank)) for i, rank in enumerate(order)]
    most = max((r["times_last"] for r in per_rank), default=0)
    named = [r for r in per_rank if most > 0 and r["times_last"] == most]
    return {
        "collectives": int(len(times)),
        "decided": int(counted.sum()),
        "basis": {b: int(n) for b, n in busy["basis"].value_counts().items()},
        "ranks": per_rank,
        "stragglers": named,
        "occurrences": _occurrences(busy["basis"], placed, delay, spread, last),
        "unaligned": unaligned(calls, order),
    }


def _rank_row(rank: int, worker: str, delay: np.ndarray, times_last: int, decided: int,
              step_us: float | None) -> dict[str, Any]:
    mine = delay[np.isfinite(delay)]
    return clean_row({
        "rank": rank, "worker": worker, "collectives": int(len(mine)), "times_last": times_last,
        "last_ratio": times_last / decided if decided else None,
        "median_delay_us": float(np.median(mine)) if len(mine) else None,
        "mean_delay_us": float(mine.mean()) if len(mine) else None,
        "max_delay_us": float(mine.max()) if len(mine) else None,
        "mean_step_us": step_us,
    })


def _occurrences(basis: pd.Series, placed: dict[str, pd.DataFrame], delay: np.ndarray, spread: np.ndarray,
                 last: np.ndarray) -> list[dict[str, Any]]:
    order = list(placed["arrival_us"].columns)
    times = {k: frame.to_numpy(dtype=np.float64) for k, frame in placed.items()}
    shown = np.sort(np.argsort(-np.nan_to_num(spread), kind="stable")[:MAX_OCCURRENCES])
    out = []
    for i in shown.tolist():
        step, group, name, index = basis.index[i]
        out.append({
            **clean_row({"step": step, "group": group, "name": name, "index": int(index), "basis": basis.iloc[i],
                         "spread_us": spread[i]}),
            "last_ranks": [order[j] for j in np.flatnonzero(last[i])],
            "arrivals": [clean_row({"rank": r, **{k: t[i, j] for k, t in times.items()}, "delay_us": delay[i, j]})
                         for j, r in enumerate(order) if np.isfinite(delay[i, j])],
        })
    return out


def unaligned(calls: pd.DataFrame, order: list[int]) -> dict[str, Any]:
    """Per rank, calls aligned with no other rank; and per (step, collective) whose call count
    differs between ranks, each rank's count."""
    if calls.empty:
        return {"calls": [{"rank": r, "unaligned": 0} for r in order], "count_mismatches": []}
    alone = calls[calls["ranks_present"] < 2].groupby("rank").size()
    counts = calls.groupby(["step_name", "group", "name", "rank"]).size().unstack("rank").reindex(columns=order)
    counts = counts.fillna(0).astype(np.int64)
    differ = counts[counts.nunique(axis=1) > 1]
    return {
        "calls": [{"rank": r, "unaligned": int(alone.get(r, 0))} for r in order],
        "count_mismatches": [
            {"step": step, "group": group, "name": name, "calls": [{"rank": r, "calls": int(row[r])} for r in order]}
            for (step, group, name), row in differ.iterrows()],
    }
