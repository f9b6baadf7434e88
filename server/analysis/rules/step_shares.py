"""Rules on the step-time breakdown: a category taking too large a share of the average step.

- `dataloader_bound`: DataLoader over 5% of the average step (the reference's bar). Saving: the
  GPU's idle time under the DataLoader's `__next__` ranges (savings.py note 3): while it loads,
  a GPU still busy with queued work loses nothing.
- `high_communication`: communication not hidden behind compute over 10% of the step. Saving:
  that exposed part (the step breakdown's Communication: time with a communication kernel or
  host collective running and no compute kernel, copy or set).
  When the run's other workers are loaded and at least WAITING_SHARE of this worker's
  communication time is waiting for other ranks (synchronizing, see the Distributed view),
  the advice is to balance the ranks first: overlapping waiting with compute does not help
  (`waiting_in_communication`, a rule across ranks).
Evidence: the three steps where the category took longest.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...trace.schema import HOST_OP_KINDS
from .. import ranges
from ..categories import is_dataloader_name
from ..kinds import of_kinds
from ..names import name_mask
from ..recommendations import Context, Finding, finding, step_evidence
from ..savings import BANDS, Saving, idle_under, saving

DATALOADER_SHARE = 0.05
COMMUNICATION_SHARE = 0.10
WAITING_SHARE = 0.5


def _share_rule(ctx: Context, id: str, column: str, threshold: float, saved: Callable[[float], Saving],
                title: str, detail: str) -> list[Finding]:
    """Fires when `column` takes over `threshold` of the mean step; `saved` gives the saving from
    the column's mean per step."""
    total = ctx.step_time_us
    if total <= 0:
        return []
    mean = float(ctx.breakdown[column].mean())
    share = mean / total
    if share <= threshold:
        return []
    worst = ctx.breakdown[column].to_numpy().argsort()[::-1][:3]
    return [finding(id, saved(mean), title.format(share=share), detail,
                    numbers={"share_ratio": round(share, 6), column: round(mean, 3), "step_us": round(total, 3)},
                    thresholds={"share_ratio": threshold, **BANDS},
                    evidence=[step_evidence(ctx, int(i), **{column: float(ctx.breakdown[column].iloc[i])})
                              for i in worst])]


def _idle_under_dataloader(ctx: Context) -> Saving:
    events = ctx.tables.events
    rows = np.flatnonzero(of_kinds(events["kind"].to_numpy(), HOST_OP_KINDS)
                          & name_mask(events["name"], is_dataloader_name))
    ts = events["ts"].to_numpy()[rows]
    idle = idle_under(ctx.gaps, ranges.union(ts, ts + events["dur"].to_numpy()[rows]), ctx.steps)
    return saving(idle / max(len(ctx.steps.names), 1), ctx.step_time_us,
                  "GPU idle while the DataLoader loads (its __next__ ranges)")


def dataloader_bound(ctx: Context) -> list[Finding]:
    return _share_rule(
        ctx, "dataloader_bound", "dataloader_us", DATALOADER_SHARE, lambda _: _idle_under_dataloader(ctx),
        "{share:.1%} of the step time is spent waiting for input data",
        "The training loop waits on the DataLoader. Raise `num_workers`, set `pin_memory=True` "
        "and `persistent_workers=True`, or move decoding and augmentation off the critical path.")


def high_communication(ctx: Context) -> list[Finding]:
    return _share_rule(
        ctx, "high_communication", "communication_us", COMMUNICATION_SHARE,
        lambda exposed: saving(exposed, ctx.step_time_us, "communication not overlapped with compute (exposed)"),
        "{share:.1%} of the step time is communication not overlapped with compute",
        "Overlap more communication with computation (DDP bucket sizes, FSDP prefetch), "
        "compress gradients, accumulate gradients over several steps, or raise the batch size.")


def waiting_in_communication(found: list[Finding], view: dict[str, Any], worker: str | None) -> list[Finding]:
    """high_communication read with the run's other ranks: when most of this worker's communication
    is waiting for them, the finding says to balance the ranks first."""
    mine = next((w for w in view.get("wait", []) if w["worker"] == worker), None)
    at = next((i for i, f in enumerate(found) if f["id"] == "high_communication"), None)
    if at is None or mine is None:
        return found
    wait, comm = mine["average"].get("wait_us") or 0.0, mine["average"].get("communication_us") or 0.0
    if comm <= 0 or wait / comm < WAITING_SHARE:
        return found
    finding = {**found[at], "numbers": dict(found[at]["numbers"]), "thresholds": dict(found[at]["thresholds"])}
    finding["numbers"].update(wait_us=round(wait, 3), waiting_ratio=round(wait / comm, 6))
    finding["thresholds"]["waiting_ratio"] = WAITING_SHARE
    finding["detail"] = (
        f"Most of it is waiting: {wait / 1000:,.1f} ms a step ({wait / comm:.0%} of this worker's communication) "
        "is spent in collectives waiting for other ranks to arrive, not moving data, so overlapping it with compute "
        "would not help. Balance the ranks first (see the straggler finding and the Distributed view); then "
        "overlap what remains (DDP bucket sizes, FSDP prefetch).")
    return [*found[:at], finding, *found[at + 1:]]
