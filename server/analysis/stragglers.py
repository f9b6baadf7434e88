"""Collectives matched across ranks: data transfer versus waiting, and who arrives last.

1. Alignment: NCCL requires every rank of a process group to issue the group's collectives
   in the same order, so the k-th call of a collective (by name) within a step is the same
   collective on every rank. Calls are keyed by (step, name, k); a key found on two ranks or
   more is aligned. Where ranks made different numbers of calls of a collective in a step,
   the first calls are aligned and the rest are reported, never dropped silently. (The
   trace's process-group name and sequence number are not decoded by the parser, so all
   calls count as one group.)
2. Data transfer and waiting, as the reference plugin defined them: a collective finishes on
   every rank together, so its shortest GPU time among the ranks is the time spent moving
   data, and what a rank spent beyond that is time waiting for the others (synchronizing).
3. Arrival: when a rank's GPU started the collective's kernel (its CPU entered the call when
   a rank of the collective has no kernel), relative to the start of that rank's step, so
   hosts with unsynchronised clocks compare. A rank's delay is its arrival minus the
   earliest rank's. The rank(s) arriving last, by more than TIE_US, count one "last" each;
   the rank(s) last most often are named stragglers, with their median and mean delay.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .records import clean_row

# Arrivals closer than this are a tie: nobody is last (timestamps are rounded to ~1 us).
TIE_US = 1.0
# Occurrences listed one by one in the response (the aggregates use all of them).
MAX_OCCURRENCES = 1000
KEY = ["step_name", "name", "index"]


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


def _arrival_matrix(calls: pd.DataFrame) -> pd.DataFrame:
    """Per aligned call (rows) and rank (columns): its arrival on the GPU clock when every rank
    holding it ran a kernel, else on the CPU clock."""
    aligned = calls[calls["ranks_present"] >= 2]
    gpu = aligned.pivot_table(index=KEY, columns="rank", values="gpu_arrival_us", aggfunc="first", dropna=False)
    cpu = aligned.pivot_table(index=KEY, columns="rank", values="cpu_arrival_us", aggfunc="first", dropna=False)
    gpu = gpu.reindex(index=cpu.index, columns=cpu.columns)
    present = cpu.notna() | gpu.notna()
    on_gpu = (gpu.notna() | ~present).all(axis=1)
    arrival = pd.DataFrame(np.where(on_gpu.to_numpy()[:, None], gpu.to_numpy(), cpu.to_numpy()),
                           index=cpu.index, columns=cpu.columns)
    arrival.insert(0, "basis", np.where(on_gpu, "gpu", "cpu"))
    return arrival[arrival.drop(columns="basis").notna().sum(axis=1) >= 2]


def stragglers(calls: pd.DataFrame, ranks: list[dict[str, Any]], step_us: dict[int, float]) -> dict[str, Any]:
    """Who arrives last at the aligned collectives, by how much, and what could not be aligned.

    `calls` is `align_calls`' frame; `ranks` the identities ({"rank", "worker"}) in rank order;
    `step_us` each rank's mean step time."""
    order = [r["rank"] for r in ranks]
    worker = {r["rank"]: r["worker"] for r in ranks}
    if calls.empty:
        arrival = pd.DataFrame(columns=["basis", *order])
    else:
        arrival = _arrival_matrix(calls).reindex(columns=["basis", *order])
    times = arrival[order].to_numpy(dtype=np.float64)
    with np.errstate(all="ignore"):
        earliest = np.nanmin(times, axis=1) if len(times) else np.empty(0)
        latest = np.nanmax(times, axis=1) if len(times) else np.empty(0)
    spread = latest - earliest
    delay = times - earliest[:, None]
    counted = spread > TIE_US
    last = (times >= (latest - TIE_US)[:, None]) & counted[:, None]
    per_rank = [_rank_row(rank, worker[rank], delay[:, i], int(last[:, i].sum()), int(counted.sum()),
                          step_us.get(rank)) for i, rank in enumerate(order)]
    most = max((r["times_last"] for r in per_rank), default=0)
    named = [r for r in per_rank if most > 0 and r["times_last"] == most]
    return {
        "collectives": int(len(times)),
        "decided": int(counted.sum()),
        "basis": {b: int(n) for b, n in arrival["basis"].value_counts().items()},
        "ranks": per_rank,
        "stragglers": named,
        "occurrences": _occurrences(arrival, order, delay, spread, last),
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


def _occurrences(arrival: pd.DataFrame, order: list[int], delay: np.ndarray, spread: np.ndarray,
                 last: np.ndarray) -> list[dict[str, Any]]:
    out = []
    for i, (step, name, index) in enumerate(arrival.index[:MAX_OCCURRENCES]):
        times = arrival.iloc[i][order]
        out.append({
            **clean_row({"step": step, "name": name, "index": int(index), "basis": arrival["basis"].iloc[i],
                         "spread_us": spread[i]}),
            "last_ranks": [order[j] for j in np.flatnonzero(last[i])],
            "arrivals": [clean_row({"rank": r, "arrival_us": times[r], "delay_us": delay[i, j]})
                         for j, r in enumerate(order) if np.isfinite(delay[i, j])],
        })
    return out


def unaligned(calls: pd.DataFrame, order: list[int]) -> dict[str, Any]:
    """Per rank, calls aligned with no other rank; and per (step, collective) whose call count
    differs between ranks, each rank's count."""
    if calls.empty:
        return {"calls": [{"rank": r, "unaligned": 0} for r in order], "count_mismatches": []}
    alone = calls[calls["ranks_present"] < 2].groupby("rank").size()
    counts = calls.groupby(["step_name", "name", "rank"]).size().unstack("rank").reindex(columns=order)
    counts = counts.fillna(0).astype(np.int64)
    differ = counts[counts.nunique(axis=1) > 1]
    return {
        "calls": [{"rank": r, "unaligned": int(alone.get(r, 0))} for r in order],
        "count_mismatches": [
            {"step": step, "name": name, "calls": [{"rank": r, "calls": int(row[r])} for r in order]}
            for (step, name), row in differ.iterrows()],
    }
