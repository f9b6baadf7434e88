"""A report of the matched collectives per type and message size, with NCCL's bandwidths, and a
rank x collective delay map, from stragglers.align_calls' frame (every rank's calls, matched).

1. Types: a call's name (`nccl:all_reduce`, `nccl:_all_gather_base`, `gloo:all_reduce`,
   `nccl:reduce_scatter_tensor_coalesced`, a kernel's `nccl:send_recv`, ...) is reduced to one
   of TYPES by the first pattern that fits; names no pattern fits keep type "other".
2. One collective is one matched call, (group, match), that at least two ranks timed. Its
   transfer time is the shortest duration among its ranks (stragglers' definition 2: every rank
   leaves together, so the shortest is moving data); its wait is the longest minus the shortest
   (the skew: what the earliest rank spent waiting for the last).
3. Message size follows nccl-tests' convention (its PERFORMANCE.md): the size is that of the
   whole buffer the operation produces or consumes, the largest one. Our calls carry the bytes
   of the `nccl:*` op's input tensors, which is that size for all-reduce, reduce-scatter (its
   input is the full buffer; each rank gets 1/n of it), broadcast, reduce, all-to-all (what one
   rank sends) and send/recv; for all-gather the input is one rank's share, so the size is
   input x n (checked on the real 2-rank FSDP runs: record_param_comms' "Out msg nelems" is
   twice "In msg nelems" for `_allgather_base` and half for `_reduce_scatter_base`).
   Rows group collectives by exact size: a job repeats the same few buffer sizes, so rows stay
   few without buckets.
4. Bandwidths, as nccl-tests defines them: algorithm bandwidth = size / time; bus bandwidth
   scales it by the share of the data each rank must send or receive on its busiest link for
   that pattern, so that it compares with the hardware's link speed whatever the rank count n:
   all-reduce 2(n-1)/n (a reduce-scatter followed by an all-gather), all-gather, reduce-scatter
   and all-to-all (n-1)/n (each rank misses 1/n of the result locally), broadcast, reduce and
   send/recv 1 (the data crosses a link once). A barrier moves nothing: no bandwidth. n is the
   process group's size as the trace's distributedInfo lists it, else the ranks that recorded
   the collective. Times are the summed kernel times (a gloo call's host time); bytes per us
   is 1e-3 GB/s.
5. Delay map: per rank and collective, the rank's arrival delay (stragglers' definition 3: the
   longest duration among the ranks minus its own), for the symmetric collectives only
   (stragglers.is_symmetric). Columns are the MAX_COLUMNS collectives of the widest spread, in
   call order; with more than MAX_ROWS ranks, consecutive ranks fold into one row holding the
   largest delay among them (a late rank stays visible at 1,000 ranks).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

from .records import clean_row
from .stragglers import KEY, is_symmetric

TYPES: list[tuple[str, re.Pattern[str]]] = [(t, re.compile(p, re.IGNORECASE)) for t, p in [
    ("reduce_scatter", r"reduce_?scatter"),
    ("all_reduce", r"all_?reduce"),
    ("all_gather", r"all_?gather"),
    ("all_to_all", r"all_?to_?all"),
    ("broadcast", r"broadcast"),
    ("barrier", r"barrier"),
    ("send_recv", r"send|recv"),
    ("reduce", r"reduce"),
]]
# Bus bandwidth factor per type, of the group size n (definition 4); None: no bandwidth.
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}
# The delay map's caps (definition 5): collectives shown, and rows of ranks.
MAX_COLUMNS = 64
MAX_ROWS = 256


def collective_type(name: str) -> str:
    """Definition 1: `nccl:_all_gather_base` -> `all_gather`."""
    return next((t for t, pattern in TYPES if pattern.search(name)), "other")


def _collectives(calls: pd.DataFrame, group_sizes: dict[str, int]) -> pd.DataFrame:
    """One row per matched collective (definition 2): group, match, name, type, n, size_bytes,
    transfer_us, wait_us."""
    timed = calls[(calls["match"] >= 0) & (calls["ranks_present"] >= 2) & np.isfinite(calls["busy_us"])]
    grouped = timed.groupby(KEY, sort=False)
    out = grouped.agg(name=("name", "first"), bytes=("bytes", "first"), ranks=("rank", "nunique"),
                      shortest=("busy_us", "min"), longest=("busy_us", "max")).reset_index()
    out["type"] = out["name"].map(collective_type)
    out["n"] = [group_sizes.get(g) or r for g, r in zip(out["group"], out["ranks"])]
    gathered = (out["type"] == "all_gather").to_numpy()
    out["size_bytes"] = np.where(gathered, out["bytes"] * out["n"], out["bytes"])
    out["transfer_us"] = out["shortest"]
    out["wait_us"] = out["longest"] - out["shortest"]
    return out


def collective_report(calls: pd.DataFrame, group_sizes: dict[str, int]) -> list[dict[str, Any]]:
    """Per collective type, message size and group size (definitions 1-4): count, total and
    median transfer and wait, algbw_gbps and busbw_gbps (from the total time and bytes)."""
    if calls.empty:
        return []
    found = _collectives(calls, group_sizes)
    rows = []
    keys = ["type", "size_bytes", "n"]
    for (kind, size, n), part in found.groupby(keys, sort=True, dropna=False):
        transfer = float(part["transfer_us"].sum())
        moved = float(size) * len(part) if np.isfinite(size) else math.nan
        algbw = moved / transfer * 1e-3 if transfer > 0 and kind in BUS_FACTOR else math.nan
        busbw = algbw * BUS_FACTOR[kind](int(n)) if kind in BUS_FACTOR else math.nan
        rows.append(clean_row({
            "type": kind, "names": sorted(set(part["name"])), "size_bytes": int(size) if np.isfinite(size) else None,
            "group_size": int(n), "count": len(part),
            "transfer_us": transfer, "median_transfer_us": float(part["transfer_us"].median()),
            "wait_us": float(part["wait_us"].sum()), "median_wait_us": float(part["wait_us"].median()),
            "algbw_gbps": algbw, "busbw_gbps": busbw}))
    return sorted(rows, key=lambda r: -r["transfer_us"])


def delay_map(calls: pd.DataFrame, ranks: list[int]) -> dict[str, Any]:
    """Definition 5: `rows` (each the first and last rank it holds), `columns` (the collectives:
    group, match, name, spread_us) and `delay_us` (rows x columns, None where a rank lacks it)."""
    empty = {"rows": [], "columns": [], "delay_us": [], "max_rows": MAX_ROWS, "max_columns": MAX_COLUMNS}
    if calls.empty or not ranks:
        return empty
    symmetric = calls["name"].map(is_symmetric).astype(bool)
    timed = calls[(calls["match"] >= 0) & (calls["ranks_present"] >= 2) & np.isfinite(calls["busy_us"]) & symmetric]
    if timed.empty:
        return empty
    timed = timed.assign(delay_us=timed.groupby(KEY)["busy_us"].transform("max") - timed["busy_us"])
    spread = timed.groupby(KEY, sort=True).agg(name=("name", "first"), spread_us=("delay_us", "max"))
    shown = spread.nlargest(MAX_COLUMNS, "spread_us", keep="first").sort_index()
    picked = timed[pd.MultiIndex.from_frame(timed[KEY]).isin(shown.index)]
    wide = picked.pivot_table(index="rank", columns=KEY, values="delay_us", aggfunc="first")
    wide = wide.reindex(index=ranks, columns=shown.index).to_numpy(dtype=np.float64)
    fold = max(1, math.ceil(len(ranks) / MAX_ROWS))
    rows, values = [], []
    for at in range(0, len(ranks), fold):
        worst = np.fmax.reduce(wide[at:at + fold], axis=0)    # NaN only where no rank of the row has it
        rows.append([ranks[at], ranks[min(at + fold, len(ranks)) - 1]])
        values.append([round(float(v), 1) if np.isfinite(v) else None for v in worst])
    columns = [{"group": g, "match": int(m), "name": r["name"], "spread_us": round(float(r["spread_us"]), 1)}
               for (g, m), r in shown.iterrows()]
    return {**empty, "rows": rows, "columns": columns, "delay_us": values}
