"""Per-rank measures of the Distributed view over every rank, the worst ranks by one of them, and
the ranks the run lacks, so that a run of a thousand ranks reads as a distribution and a few rows.

1. Measures, per rank and averaged over its steps (us): `step_us` (step time), `computation_us`
   (computation kernels, overlapped with communication or not), `communication_us` (communication,
   overlapped or not), `wait_us` (the part of it spent waiting for other ranks) and `wait_ratio`
   (wait / communication), and `delay_us`, the rank's median arrival delay at the collectives.
2. Worst ranks: the `top` ranks with the largest value of the sort's measure (step time, waiting
   or delay); a rank without the measure comes after every rank with it; ties go to the lower rank.
3. Missing ranks: the ranks 0..world_size-1 no worker of the run holds (world size: the largest
   any worker gives).
"""

from __future__ import annotations

from typing import Any, Literal

Sort = Literal["step", "wait", "delay"]
# The measure each sort ranks by, largest first.
SORT_MEASURE: dict[str, str] = {"step": "step_us", "wait": "wait_us", "delay": "delay_us"}


def _sum(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return float(sum(present)) if present else None


def rank_measures(overlap: list[dict[str, Any]], wait: list[dict[str, Any]],
                  delays: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per rank (definition 1), in the order of `overlap` (the view's per-rank overlap
    rows); `wait` and `delays` (stragglers' per-rank rows) are matched by rank."""
    wait_of = {r["rank"]: r["average"] for r in wait}
    delay_of = {r["rank"]: r.get("median_delay_us") for r in delays}
    rows = []
    for entry in overlap:
        rank, avg = entry["rank"], entry["average"]
        waits = wait_of.get(rank, {})
        comm, waited = waits.get("communication_us"), waits.get("wait_us")
        rows.append({
            "rank": rank, "worker": entry["worker"], "step_us": avg.get("total_us"),
            "computation_us": _sum(avg.get("computation_us"), avg.get("overlapping_us")),
            "communication_us": comm, "wait_us": waited,
            "wait_ratio": waited / comm if comm and waited is not None else None,
            "delay_us": delay_of.get(rank)})
    return rows


def worst_ranks(measures: list[dict[str, Any]], sort: Sort, top: int) -> list[int]:
    """The ranks of the `top` rows with the largest `SORT_MEASURE[sort]`, worst first (definition 2)."""
    key = SORT_MEASURE[sort]
    ordered = sorted(measures, key=lambda r: (r[key] is None, -(r[key] or 0.0), r["rank"]))
    return [r["rank"] for r in ordered[:top]]


def missing_ranks(identities: list[dict[str, Any]]) -> list[int]:
    """Ranks below the run's world size that no worker holds (definition 3)."""
    world = max((i["world_size"] for i in identities if i["world_size"] is not None), default=0)
    held = {i["rank"] for i in identities}
    return [r for r in range(world) if r not in held]


def rank_runs(ranks: list[int]) -> str:
    """Ranks as runs of consecutive numbers: [0, 1, 2, 3, 5, 7, 8] -> "0–3, 5, 7, 8"."""
    ordered = sorted(set(ranks))
    runs = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(f"{ordered[i]}–{ordered[j]}" if j - i >= 2 else ", ".join(map(str, ordered[i:j + 1])))
        i = j + 1
    return ", ".join(runs)


def missing_warning(missing: list[int], world: int) -> str:
    """The warning naming the ranks a run lacks."""
    noun = "rank" if len(missing) == 1 else "ranks"
    verb = "has" if len(missing) == 1 else "have"
    return f"{noun} {rank_runs(missing)} of world size {world} {verb} no trace in this span: left out"
