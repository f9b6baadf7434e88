"""Collectives matched across ranks: data transfer versus waiting, and who holds the others up.

1. Matching, independent of steps: NCCL requires every rank of a process group to issue the
   group's collectives in the same order, so per process group the ranks' calls, each in the
   order it was issued over the whole trace, are the same sequence. One rank's trace may begin
   or end at another call than the others' (a profiler started later), so each rank's sequence
   of (name, size) is aligned with the reference rank's (the one with the most calls in the
   group) at the first call both recorded: among the places where one rank's first call
   appears early in the other's sequence (ANCHOR_SEARCH calls), the one whose next
   ANCHOR_WINDOW calls agree most, and, when several agree equally (a step's calls repeat each
   step), the one whose matched calls end closest together on the two ranks' clocks
   (collectives end together; hosts' clocks agree to well under a step). From there calls pair
   one to one; where the sequences differ (a rank missing a call), the side whose call comes
   sooner in the other's sequence skips to it. A call paired with no other rank's is
   unmatched, counted per rank (`unaligned`) and in a warning. Steps play no part: each rank's steps start and end at other times (a
   slow rank's start later), and prefetching moves calls across them. The trace's `Seq` /
   `Comms Id`, which newer Kineto writes, would match calls directly, but the trace tables
   do not keep them yet.
2. Data transfer and waiting, as the reference plugin defined them: a collective finishes on
   every rank together, so its shortest GPU time among the ranks is the time spent moving
   data, and what a rank spent beyond that is time waiting for the others (synchronizing).
3. Arrival delay: the same fact read the other way. A collective ends on every rank at
   about the same instant, so a rank that entered it d us after the earliest rank spent d us
   less in it: delay = the longest time among the ranks minus the rank's own. This needs no
   shared clock (hosts' clocks differ by more than a collective lasts) and no agreement on
   where steps start. Times are GPU kernel times; a gloo call's host time. The rank(s) whose
   delay is within 1 us (TIE_US) of the largest, when ranks differ by more than that, are
   last into it, and hold the others up by their delay beyond the latest other rank's (the
   time the others waited for them alone). Only symmetric collectives (all-reduce,
   all-gather, reduce-scatter, all-to-all, barrier) count: in a rooted one (broadcast,
   reduce, send/recv) the root may leave before the others arrive, so its short time says
   nothing about when it came.
4. Stragglers, judged by size: per rank, `held_per_step_us` is the median, over the steps
   that compared collectives are reported in, of the time it held the others up in them. A rank is named only when its
   lateness is material: its median delay is at least DELAY_SHARE of the run's median step
   AND it held the others up at least HELD_SHARE of the step; named ranks are ranked by
   `held_per_step_us`, not by how often they were last (`times_last`, kept for reading).
5. Reporting: a matched collective is reported in the step, and as the k-th call of its name
   in that step (`index`), of the lowest rank that placed it in a step (each rank's transfer
   and waiting still count in its own steps). Each occurrence lists when each rank entered
   it, from the start of its own step (GPU kernel start, else the host call's start), and
   where the call lies on that rank's own clock (`start_us`/`end_us`, for opening the rank's
   Trace view on it). `count_mismatches` lists the steps whose call counts differ between
   ranks (a fact about step boundaries: matching does not use them).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from .records import clean_row

# Arrivals closer than this are a tie: nobody is last (timestamps are rounded to ~1 us).
TIE_US = 1.0
# A straggler's median delay, and the time it holds the others up per step, as shares of the step.
DELAY_SHARE = 0.01
HELD_SHARE = 0.05
# Calls searched for the first call two ranks share, and compared to choose among the places found.
ANCHOR_SEARCH = 512
ANCHOR_WINDOW = 64
# Occurrences listed one by one in the response, the widest spreads (the aggregates use all).
MAX_OCCURRENCES = 1000
KEY = ["group", "match"]
_SYMMETRIC = re.compile(r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|barrier", re.IGNORECASE)


def is_symmetric(name: str) -> bool:
    """Collectives every rank leaves together (nobody finishes before the last one arrives)."""
    return bool(_SYMMETRIC.search(name))


def align_calls(calls_by_rank: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """All ranks' calls in one frame with `rank`, `match` (the collective's number in its group,
    -1 when unmatched), `ranks_present` (ranks holding the same collective), `transfer_us` (the
    shortest busy time among them, NaN when not matched) and `wait_us` (busy time beyond it)."""
    frames = [calls.assign(rank=rank) for rank, calls in calls_by_rank.items() if len(calls)]
    if not frames:
        return pd.DataFrame(columns=["step_name", "index", *KEY, "name", "rank", "gpu_ts", "gpu_end", "busy_us",
                                     "ranks_present", "transfer_us", "wait_us"])
    calls = pd.concat(frames, ignore_index=True)
    calls["match"] = match_calls(calls)
    matched = calls["match"].to_numpy() >= 0
    grouped = calls[matched].groupby(KEY, sort=False)
    calls["ranks_present"] = grouped["rank"].transform("nunique").reindex(calls.index).fillna(1).astype(np.int64)
    shortest = grouped["busy_us"].transform("min").reindex(calls.index)
    aligned = (calls["ranks_present"] >= 2) & np.isfinite(calls["busy_us"])
    calls["transfer_us"] = np.where(aligned, shortest, np.nan)
    calls["wait_us"] = calls["busy_us"] - calls["transfer_us"]
    return calls


def match_calls(calls: pd.DataFrame) -> np.ndarray:
    """Per call (all ranks' calls, in each rank's issue order by `cpu_ts`): its position in the
    reference rank's sequence of its process group, -1 when no rank's call pairs with it."""
    out = np.full(len(calls), -1, dtype=np.int64)
    signature = pd.factorize(pd.MultiIndex.from_arrays([calls["name"], calls["bytes"].fillna(-1.0)]))[0]
    end = calls["gpu_end"].where(calls["gpu_end"].notna(), calls["cpu_end"]).to_numpy(dtype=np.float64)
    for _, rows in calls.sort_values("cpu_ts", kind="stable").groupby("group", sort=False):
        by_rank = {rank: part.index.to_numpy() for rank, part in rows.groupby("rank", sort=True)}
        ref = max(by_rank, key=lambda r: (len(by_rank[r]), -r))
        a = by_rank[ref]
        out[a] = np.arange(len(a))
        for rank, b in by_rank.items():
            if rank != ref:
                pairs = _pair(signature[a], signature[b], end[a], end[b])
                out[b[pairs[:, 1]]] = pairs[:, 0]
    return out


def _pair(a: np.ndarray, b: np.ndarray, end_a: np.ndarray, end_b: np.ndarray) -> np.ndarray:
    """(i, j) pairs of sequence a's i-th call with b's j-th (definition 1)."""
    if np.array_equal(a, b):   # the usual case: both recorded the same calls
        return np.column_stack([np.arange(len(a)), np.arange(len(b))])
    anchors = [(i, 0) for i in np.flatnonzero(a[:ANCHOR_SEARCH] == b[0])]
    anchors += [(0, j) for j in np.flatnonzero(b[1:ANCHOR_SEARCH] == a[0]) + 1]
    if not anchors:
        return np.empty((0, 2), dtype=np.int64)

    def rank_anchor(anchor: tuple[int, int]) -> tuple[int, float]:
        i, j = anchor
        pairs = _pair_from(a[i:i + ANCHOR_WINDOW], b[j:j + ANCHOR_WINDOW], i, j)
        offset = np.median(end_b[pairs[:, 1]] - end_a[pairs[:, 0]]) if len(pairs) else np.inf
        return -len(pairs), abs(float(np.nan_to_num(offset, nan=np.inf)))

    i, j = min(anchors, key=rank_anchor)
    return _pair_from(a[i:], b[j:], i, j)


def _pair_from(a: np.ndarray, b: np.ndarray, i: int, j: int) -> np.ndarray:
    """Pairs of a's and b's calls from their starts (numbered from i and j): one to one while
    they agree; where they differ, the side whose call comes sooner in the other's sequence
    is taken to have missed the calls before it (a rank that skipped a call)."""
    n = min(len(a), len(b))
    if np.array_equal(a[:n], b[:n]):   # the usual case, walked in one step
        return np.column_stack([np.arange(i, i + n), np.arange(j, j + n)])
    pairs = []
    p = q = 0
    while p < len(a) and q < len(b):
        if a[p] == b[q]:
            pairs.append((i + p, j + q))
            p, q = p + 1, q + 1
            continue
        in_a = np.flatnonzero(a[p + 1:p + 1 + ANCHOR_WINDOW] == b[q])    # a's calls b lacks
        in_b = np.flatnonzero(b[q + 1:q + 1 + ANCHOR_WINDOW] == a[p])    # b's calls a lacks
        if not len(in_a) and not len(in_b):
            p, q = p + 1, q + 1
        elif len(in_a) and (not len(in_b) or in_a[0] <= in_b[0]):
            p += 1 + int(in_a[0])
        else:
            q += 1 + int(in_b[0])
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def _busy_matrix(calls: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Per matched symmetric call (rows, by KEY) and rank (columns): its busy time, for the calls
    that at least two ranks timed, with each row's basis ("gpu": kernels, "cpu": host time) and
    where it is reported (step, name, index: definition 5); and where each rank's call lies:
    `arrival_us` from its step's start, `start_us`/`end_us` on its own clock."""
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
    # Reported where the lowest rank that placed it in a step has it.
    ordered = aligned.assign(outside=aligned["step_name"] == "").sort_values(["outside", "rank"], kind="stable")
    shown = ordered.groupby(KEY).agg(step=("step_name", "first"), name=("name", "first"), index=("index", "first"),
                                     basis=("kernels", "max")).reindex(busy.index)
    busy = busy[keep].copy()
    shown = shown[keep]
    busy.insert(0, "basis", np.where(shown["basis"] > 0, "gpu", "cpu"))
    busy.insert(1, "step", shown["step"])
    busy.insert(2, "name", shown["name"])
    busy.insert(3, "index", shown["index"])
    return busy, {k: wide[k][keep] for k in placed}


def stragglers(calls: pd.DataFrame, ranks: list[dict[str, Any]], step_us: dict[int, float]) -> dict[str, Any]:
    """Who holds the others up at the matched collectives, by how much, and what could not be matched.

    `calls` is `align_calls`' frame; `ranks` the identities ({"rank", "worker"}) in rank order;
    `step_us` each rank's mean step time."""
    order = [r["rank"] for r in ranks]
    worker = {r["rank"]: r["worker"] for r in ranks}
    busy, placed = _busy_matrix(calls) if len(calls) else (pd.DataFrame(), {})
    busy = busy.reindex(columns=["basis", "step", "name", "index", *order])
    placed = {k: placed.get(k, pd.DataFrame()).reindex(index=busy.index, columns=order)
              for k in ("arrival_us", "start_us", "end_us")}
    times = busy[order].to_numpy(dtype=np.float64)
    with np.errstate(all="ignore"):
        longest = np.nanmax(times, axis=1) if len(times) else np.empty(0)
    delay = longest[:, None] - times
    spread = np.nanmax(delay, axis=1) if len(times) else np.empty(0)
    counted = spread > TIE_US
    last = (delay >= (spread - TIE_US)[:, None]) & counted[:, None]
    # What the last rank(s) cost: their delay beyond the latest of the others.
    others = np.where(last, np.nan, delay)
    with np.errstate(all="ignore"):
        next_latest = np.nan_to_num(np.nanmax(others, axis=1), nan=0.0) if len(times) else np.empty(0)
    held = np.where(last, delay - next_latest[:, None], 0.0)
    in_step = busy["step"].to_numpy() != ""    # a collective no rank placed in a step has no step to count in
    held_steps = pd.DataFrame(held[in_step], columns=order).groupby(busy["step"].to_numpy()[in_step]).sum()
    run_step = _median([v for v in step_us.values() if v])
    per_rank = [_rank_row(rank, worker[rank], delay[:, i], int(last[:, i].sum()), int(counted.sum()),
                          step_us.get(rank), held_steps[rank] if len(held_steps) else pd.Series(dtype=float))
                for i, rank in enumerate(order)]
    named = sorted((r for r in per_rank if _material(r, run_step)), key=lambda r: -r["held_per_step_us"])
    return {
        "collectives": int(len(times)),
        "decided": int(counted.sum()),
        "basis": {b: int(n) for b, n in busy["basis"].value_counts().items()},
        "ranks": per_rank,
        "stragglers": named,
        "occurrences": _occurrences(busy[["basis", "step", "name", "index"]], placed, delay, spread, last),
        "unaligned": unaligned(calls, order),
    }


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def _material(row: dict[str, Any], step_us: float | None) -> bool:
    """Definition 4: late enough, and costing the others enough, to name."""
    if not step_us or not row["times_last"]:
        return False
    return (row["median_delay_us"] or 0.0) >= DELAY_SHARE * step_us and (
        row["held_per_step_us"] or 0.0) >= HELD_SHARE * step_us


def _rank_row(rank: int, worker: str, delay: np.ndarray, times_last: int, decided: int,
              step_us: float | None, held: pd.Series) -> dict[str, Any]:
    mine = delay[np.isfinite(delay)]
    return clean_row({
        "rank": rank, "worker": worker, "collectives": int(len(mine)), "times_last": times_last,
        "last_ratio": times_last / decided if decided else None,
        "median_delay_us": float(np.median(mine)) if len(mine) else None,
        "mean_delay_us": float(mine.mean()) if len(mine) else None,
        "max_delay_us": float(mine.max()) if len(mine) else None,
        "held_per_step_us": float(held.median()) if len(held) else None,
        "mean_step_us": step_us,
    })


def _occurrences(shown: pd.DataFrame, placed: dict[str, pd.DataFrame], delay: np.ndarray, spread: np.ndarray,
                 last: np.ndarray) -> list[dict[str, Any]]:
    order = list(placed["arrival_us"].columns)
    times = {k: frame.to_numpy(dtype=np.float64) for k, frame in placed.items()}
    picked = np.sort(np.argsort(-np.nan_to_num(spread), kind="stable")[:MAX_OCCURRENCES])
    out = []
    for i in picked.tolist():
        row = shown.iloc[i]
        out.append({
            **clean_row({"step": row["step"], "group": shown.index[i][0], "name": row["name"],
                         "index": int(row["index"]), "basis": row["basis"], "spread_us": spread[i]}),
            "last_ranks": [order[j] for j in np.flatnonzero(last[i])],
            "arrivals": [clean_row({"rank": r, **{k: t[i, j] for k, t in times.items()}, "delay_us": delay[i, j]})
                         for j, r in enumerate(order) if np.isfinite(delay[i, j])],
        })
    return out


def unaligned(calls: pd.DataFrame, order: list[int]) -> dict[str, Any]:
    """Per rank, calls matched with no other rank's; and per (step, collective) whose call count
    differs between ranks, each rank's count (definition 5)."""
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
