"""`straggler`: one rank reaches the collectives late, and the others wait for it.

Needs the run's other workers (the Distributed view's straggler analysis; see Stragglers):
a run of one worker never gets this finding.
1. A straggler is named: the Distributed view names the rank(s) whose lateness is material
   (Stragglers, definition 4: judged by how long they hold the others up, not by how often
   they are last), among MIN_DECIDED or more collectives with a decided order.
2. It costs something: the other ranks' median waiting time per step (synchronizing time in
   their collectives) is at least WAIT_SHARE of their median step time.
Saving: that waiting per step (what balanced ranks would stop waiting), of the others' median
step; on a worker with `high_communication`, it is part of that exposed communication.
The finding says which rank is late whichever worker it is read on; read on a straggler, it
quotes that rank's own numbers. Evidence: this worker's own calls of the collectives with the
widest spread of arrivals.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..recommendations import Finding, finding
from ..savings import BANDS, saving
from ..stragglers import DELAY_SHARE, HELD_SHARE

MIN_DECIDED = 3
WAIT_SHARE = 0.05
MAX_EVIDENCE = 3


def _evidence(occurrences: list[dict[str, Any]], rank: int | None) -> list[dict[str, Any]]:
    """This rank's calls of the widest-spread collectives, on its own clock, with the spread across ranks and
    this rank's own delay (named so: beside the spread, a bare "delay 0 us" read as the straggler's)."""
    out = []
    for occ in sorted(occurrences, key=lambda o: -(o.get("spread_us") or 0.0)):
        mine = next((a for a in occ["arrivals"] if a["rank"] == rank and a.get("start_us") is not None), None)
        if mine is None:
            continue
        late = ", ".join(str(r) for r in occ["last_ranks"]) or "none"
        out.append({"kind": "collective", "step": occ["step"],
                    "label": f"step {occ['step']}: {occ['name']} #{occ['index'] + 1}, last rank {late}",
                    "start_us": float(mine["start_us"]), "end_us": float(mine["end_us"]),
                    "spread_us": occ.get("spread_us"), "this_rank_delay_us": mine.get("delay_us")})
        if len(out) == MAX_EVIDENCE:
            break
    return out


def straggler(findings: list[Finding], view: dict[str, Any], worker: str | None) -> list[Finding]:
    """`findings` and this rule's, read on `worker` (a rule across ranks)."""
    return findings + _straggler(view, worker)


def _straggler(view: dict[str, Any], worker: str | None) -> list[Finding]:
    found = view["stragglers"]
    named = found["stragglers"]
    if not named or found["decided"] < MIN_DECIDED:
        return []
    late = {r["rank"] for r in named}
    wait = {w["rank"]: (w["average"].get("wait_us") or 0.0) for w in view["wait"]}
    others = [r for r in found["ranks"] if r["rank"] not in late and r.get("mean_step_us")]
    if not others:
        return []
    others_wait = float(np.median([wait.get(r["rank"], 0.0) for r in others]))
    others_step = float(np.median([r["mean_step_us"] for r in others]))
    share = others_wait / others_step
    if share < WAIT_SHARE:
        return []

    me = next((r["rank"] for r in view["ranks"] if r["worker"] == worker), None)
    # Read on a straggler, its own numbers; elsewhere, the straggler's that holds the others up longest.
    first = next((r for r in named if r["rank"] == me), named[0])
    who = " and ".join(f"rank {r['rank']} ({r['worker']})" for r in named)
    delay = (f"a median {first['median_delay_us'] / 1000:,.1f} ms after the first rank, holding the others up "
             f"{first['held_per_step_us'] / 1000:,.1f} ms a step")
    if me in late:
        title = (f"This rank is {'the' if len(named) == 1 else 'a'} straggler: last into {first['times_last']} of {found['decided']} collectives, "
                 f"{delay}; the others wait {others_wait / 1000:,.1f} ms a step ({share:.0%})")
    else:
        verb = "reaches" if len(named) == 1 else "reach"
        title = (f"{who[0].upper()}{who[1:]} {verb} the collectives late ({first['times_last']} of "
                 f"{found['decided']}, {delay}): the other ranks wait {others_wait / 1000:,.1f} ms a step ({share:.0%})")
    detail = (
        "Every rank waits inside a collective until the last one arrives, so one slow rank slows the whole job. "
        f"Compare {who}'s step breakdown with the others in the Distributed view: more time in data loading, "
        "host-side work or extra kernels before the collective points at uneven work (unequal batches or "
        "sequence lengths, a rank that also logs or checkpoints, fewer DataLoader workers); the same work taking "
        "longer points at the machine (a slower or throttled GPU, a busy host, a shared node).")
    return [finding(
        "straggler", saving(others_wait, others_step, "the other ranks' waiting for the late rank(s)"), title, detail,
        numbers={"straggler_ranks": sorted(late), "times_last": first["times_last"], "decided": found["decided"],
                 "last_ratio": first["last_ratio"], "median_delay_us": first["median_delay_us"],
                 "held_per_step_us": first["held_per_step_us"], "quoted_rank": first["rank"],
                 "others_wait_us": round(others_wait, 3), "others_step_us": round(others_step, 3),
                 "wait_share_ratio": round(share, 6), "this_rank": me},
        thresholds={"decided": MIN_DECIDED, "wait_share_ratio": WAIT_SHARE, **BANDS,
                    "delay_share_ratio": DELAY_SHARE, "held_share_ratio": HELD_SHARE},
        evidence=_evidence(found["occurrences"], me))]
