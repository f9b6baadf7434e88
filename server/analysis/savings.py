"""Savings: the step time that fixing a finding would save, estimated from the timeline.

Every finding carries `saving_us` (mean step time per step that the fix would save),
`saving_ratio` (of the mean step) and `saving_note` (how it was estimated; each rule's note
says more). A saving is never more than the mean step. Where no saving can be read from the
timeline, `saving_us` is None and the note says why.

Severity follows saving_ratio: high from 10% of the mean step (HIGH_SAVING_RATIO), medium from
2% (MEDIUM_SAVING_RATIO), else low; a finding that claims no saving keeps its rule's severity. Findings are ordered by
saving, largest first (those without one count as 0; ties most severe first, then in rule order).

1. The GPU: the one busiest over the steps (it sets the step time). Its idle gaps and their
   causes are the Overview's GPU idle time by cause (idle.py, the GPU view: no kernel of any
   stream running).
2. Idle a blocking host call causes (a sync, a copy that waits for the GPU): the calls are
   merged into spans. A span that begins while the GPU runs work the host queued ahead drains
   that queue; from then on the GPU waits for each launch (host-wait gaps) until the host is
   ahead again: the first gap after the span that is not a host wait (the work that ended it was
   queued before it began). The host-wait gaps of that run are the idle the span caused, the
   host's wait in the call is not. A span that begins while the GPU is idle already (the host
   sets the step) drained nothing and causes none; a span inside a run already counted adds
   nothing. Where the host stays behind for the rest of the step, the run is an upper estimate.
3. Idle under host ranges (the DataLoader): the GPU's idle time, any cause, inside them.

Overlaps: a finding whose saving another finding's covers names it in `included_in`; the two
are not to be added up. h2d_copy_in_step's is in host_device_sync's (whose spans include the
in-step copies' calls); host_device_sync's, dataloader_bound's and launch_bound's (each one cause
of GPU idle) in low_gpu_utilization's (the GPU's idle waiting for the host or other work); a
straggler's (the other ranks' waiting) in high_communication's (their exposed communication).
Where the covering finding did not fire, a finding stands alone (h2d_copy_in_step then falls
to low_gpu_utilization's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import Kind
from . import ranges
from .idle import HOST_WAIT, Gaps, launch_times, idle_gaps
from .steps import Steps

HIGH_SAVING_RATIO = 0.10
MEDIUM_SAVING_RATIO = 0.02
BANDS = {"high_saving_ratio": HIGH_SAVING_RATIO, "medium_saving_ratio": MEDIUM_SAVING_RATIO}
_SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2}

# finding id -> the ids whose saving covers its own, first present wins (see `mark_included`).
INCLUDED_IN: dict[str, tuple[str, ...]] = {
    # host_device_sync's spans include the in-step copies' calls (syncs.py).
    "h2d_copy_in_step": ("host_device_sync", "low_gpu_utilization"),
    # GPU idle of one cause is part of the GPU's idle (utilization.py).
    "host_device_sync": ("low_gpu_utilization",),
    "dataloader_bound": ("low_gpu_utilization",),
    "launch_bound": ("low_gpu_utilization",),
    # The other ranks' waiting is part of their exposed communication.
    "straggler": ("high_communication",),
}


@dataclass(frozen=True)
class Saving:
    """A finding's saving: per step in us (None: none claimed), its share of the mean step, how
    it was estimated; `severity` only where none is claimed (the rule's own)."""

    us: float | None
    ratio: float | None
    note: str
    severity: str | None = None

    def keys(self) -> dict[str, Any]:
        return {"saving_us": self.us, "saving_ratio": self.ratio, "saving_note": self.note}

    @property
    def level(self) -> str:
        if self.us is None:
            assert self.severity is not None
            return self.severity
        return severity(self.ratio or 0.0)


def saving(us: float, step_us: float, note: str) -> Saving:
    """A saving of `us` per step, capped at the mean step `step_us`."""
    capped = float(min(max(us, 0.0), step_us)) if step_us > 0 else 0.0
    return Saving(round(capped, 3), round(capped / step_us, 6) if step_us > 0 else 0.0, note)


def no_saving(note: str, severity: str) -> Saving:
    """No saving claimed (`note` says why); the finding keeps the rule's `severity`."""
    return Saving(None, None, note, severity)


def severity(ratio: float) -> str:
    return "high" if ratio >= HIGH_SAVING_RATIO else "medium" if ratio >= MEDIUM_SAVING_RATIO else "low"


def main_gpu(gpus: list[dict[str, Any]]) -> int | None:
    """The GPU busiest over the steps (note 1), None when none ran kernels."""
    busy = [g for g in gpus if g.get("utilization_ratio") is not None]
    return max(busy, key=lambda g: g["utilization_ratio"])["device"] if busy else None


def gpu_gaps(events: pd.DataFrame, steps: Steps) -> Gaps:
    """The idle gaps in every kernel over the steps' span, with their causes (idle.py's GPU view):
    the GPU savings are read on when no GPU has a utilization (idle.kernel_gaps has each GPU's)."""
    kernels = np.flatnonzero(events["kind"].to_numpy() == Kind.KERNEL)
    ts = events["ts"].to_numpy()[kernels]
    return idle_gaps(ts, ts + events["dur"].to_numpy()[kernels], launch_times(events, kernels), steps.span)


def _clipped(rangeset: ranges.RangeSet, steps: Steps) -> ranges.RangeSet:
    lo, hi = steps.span
    starts, ends = np.maximum(rangeset[0], lo), np.minimum(rangeset[1], hi)
    return ranges.union(starts, ends)


def overlap_us(a: ranges.RangeSet, b: ranges.RangeSet) -> float:
    """Length of the intersection of two range sets."""
    both = ranges.union(np.r_[a[0], b[0]], np.r_[a[1], b[1]])
    return ranges.total(a) + ranges.total(b) - ranges.total(both)


def idle_caused(gaps: Gaps, starts: np.ndarray, ends: np.ndarray, steps: Steps) -> float:
    """Total GPU idle that blocking host calls [starts, ends) cause, within the steps (note 2)."""
    spans_start, spans_end = _clipped(ranges.union(starts, ends), steps)
    host = gaps.cause == HOST_WAIT
    run_us = np.r_[0.0, np.cumsum(np.where(host, gaps.ends - gaps.starts, 0.0))]
    queued = np.flatnonzero(~host)  # gaps that end with work queued before them: the host was ahead
    total, counted_until = 0.0, -np.inf
    for s, e in zip(spans_start, spans_end):
        first = int(np.searchsorted(gaps.ends, s, side="right"))  # the first gap ending after s
        if s < counted_until or (first < len(gaps.starts) and gaps.starts[first] <= s):
            continue  # inside a run already counted, or the GPU was idle already: nothing to drain
        at = int(np.searchsorted(gaps.starts[queued], e, side="left"))
        stop = int(queued[at]) if at < len(queued) else len(gaps.starts)
        total += float(run_us[stop] - run_us[first])
        counted_until = float(gaps.ends[stop - 1]) if stop > first else e
    return total


def idle_under(gaps: Gaps, rangeset: ranges.RangeSet, steps: Steps) -> float:
    """Total GPU idle (any cause) inside the host ranges `rangeset`, within the steps (note 3)."""
    return overlap_us((gaps.starts, gaps.ends), _clipped(rangeset, steps))


def mark_included(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings with `included_in` set where INCLUDED_IN names a finding present; the input is
    not changed. A finding per GPU (low_gpu_utilization) covers others only on the GPU savings
    are read on: the one with the largest saving."""
    present: dict[str, dict[str, Any]] = {}
    for f in found:
        if f["id"] not in present or (f.get("saving_us") or 0.0) > (present[f["id"]].get("saving_us") or 0.0):
            present[f["id"]] = f
    out = []
    for f in found:
        cover = next((c for c in INCLUDED_IN.get(f["id"], ()) if c in present), None)
        out.append({**f, "included_in": cover} if cover else {k: v for k, v in f.items() if k != "included_in"})
    return out


def by_saving(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Largest saving first (none counts as 0); ties as before savings: most severe first, then
    rule order (the sort is stable)."""
    return sorted(found, key=lambda f: (-(f.get("saving_us") or 0.0), _SEVERITY_RANK[f["severity"]]))

