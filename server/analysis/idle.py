"""GPU idle time by cause: why the GPU waited, per step, per GPU and per stream.

The rules are Holistic Trace Analysis' (HTA, `get_idle_time_breakdown`). An idle gap is time
between two pieces of GPU work; the work that ends it decides its cause:
1. Host wait: the host call that queued that work (cudaLaunchKernel, cudaMemcpyAsync,
   cudaGraphLaunch, ..., matched by correlation id) began after the gap began: the GPU had
   nothing queued and waited for the host to launch.
2. Kernel wait: otherwise, a gap shorter than 30 us: the overhead of running back-to-back work
   that was already queued. HTA documents its threshold (`consecutive_kernel_delay=30`) as 30
   ns but compares it with the trace's timestamps, which are microseconds; we use what it
   computes, 30 us.
3. Other: every other gap: the work was queued long before but waited, e.g. for an event of
   another stream (a communication kernel, a copy) or a synchronisation.
Work without a host call (no correlation) is never a host wait.

Per stream (HTA's view): the stream's kernels, memcpys and memsets; gaps lie between its first
and last piece of work, as in HTA. Per GPU (the Overview's view): gaps in the union of the GPU's
kernels over all streams, as in its GPU utilization, so for the same span host wait + kernel
wait + other = the time the Overview counts as idle (span x (1 - utilization)). Where several
kernels start as a gap ends, the gap is a host wait only if none of them was launched before
it began. A GPU view covers the whole span: the gap from its start to the first kernel is
classified like any other; the time after the last kernel is a host wait (nothing more was
launched).

Each gap is split among the steps it crosses; the average is the mean over steps.

Where we differ from HTA, and why:
- HTA drops the last ProfilerStep and GPU work it cannot tie to a host call inside the other
  steps; we keep all steps the Overview shows (Steps note) and all GPU work, which occupies its
  stream all the same.
- HTA rounds fractional timestamps to whole microseconds (start up, end down); we keep them:
  rounding puts up to 1 us of kernel wait between kernels that touch.
- HTA's gap is measured from the previous piece of work's end; where work on one stream
  overlaps (a recording artefact of under a microsecond), we measure from the latest end, so a
  gap is never negative.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import DEVICE_KINDS, LAUNCH_KINDS, Kind
from . import ranges
from .devices import device_of_kernels
from .kinds import of_kinds
from .lookup import positions_in_sorted
from .records import clean_row
from .steps import Steps

CAUSES = ("host_wait", "kernel_wait", "other")
HOST_WAIT, KERNEL_WAIT, OTHER = range(3)
# HTA's consecutive_kernel_delay, in the trace's unit (see note 2).
KERNEL_WAIT_US = 30.0


@dataclass(frozen=True)
class Gaps:
    """Idle intervals, sorted and disjoint, each with its cause (an index into CAUSES)."""

    starts: np.ndarray
    ends: np.ndarray
    cause: np.ndarray


_NO_GAPS = Gaps(np.empty(0), np.empty(0), np.empty(0, dtype=np.int64))


def _reindexed(values: pd.Series, wanted: np.ndarray) -> np.ndarray:
    """values.reindex(wanted) as floats (NaN where absent), for a groupby's answer (a sorted index of
    distinct keys)."""
    if not len(values):
        return np.full(len(wanted), np.nan)
    at = positions_in_sorted(values.index.to_numpy(), wanted)
    return np.where(at >= 0, values.to_numpy(dtype=np.float64)[at], np.nan)


def idle_gaps(ts: np.ndarray, end: np.ndarray, launch_ts: np.ndarray, bounds: tuple[float, float] | None = None) -> Gaps:
    """The gaps in the union of GPU work [ts, end) and their causes (notes 1-3); `launch_ts` is
    when each piece of work's host call began (NaN: none). With `bounds` (lo, hi), also the gap
    from lo to the first piece of work and from the last to hi (the GPU view)."""
    busy_start, busy_end = ranges.union(ts, end)
    # The host call that ends each gap: the earliest among the work starting where it ends.
    launched = pd.Series(launch_ts).groupby(np.asarray(ts, dtype=np.float64)).min()
    gap_start, gap_end = busy_end[:-1], busy_start[1:]
    next_launch = _reindexed(launched, gap_end)
    if bounds is not None:
        lo, hi = bounds
        if not len(busy_start):
            return Gaps(np.array([lo]), np.array([hi]), np.array([HOST_WAIT])) if hi > lo else _NO_GAPS
        gap_start = np.concatenate([[lo], gap_start, busy_end[-1:]])
        gap_end = np.concatenate([busy_start[:1], gap_end, [hi]])
        # Nothing ends the last gap: work to end it was launched later, if ever (a host wait).
        next_launch = np.concatenate([_reindexed(launched, busy_start[:1]), next_launch, [np.inf]])
    with np.errstate(invalid="ignore"):
        host = next_launch > gap_start
    cause = np.where(host, HOST_WAIT, np.where(gap_end - gap_start < KERNEL_WAIT_US, KERNEL_WAIT, OTHER))
    keep = gap_end > gap_start
    return Gaps(gap_start[keep], gap_end[keep], cause[keep])


def idle_by_cause(gaps: Gaps, windows: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Per window (starts, ends), the gaps' time inside it by cause: shape (windows, len(CAUSES)), us."""
    layers = [(gaps.starts[gaps.cause == c], gaps.ends[gaps.cause == c]) for c in range(len(CAUSES))]
    return ranges.assign_by_priority(layers, windows)[:, :len(CAUSES)]


def launch_times(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """When the host call that queued each GPU work row began (the earliest of the runtime and
    driver calls with its correlation id), NaN when none."""
    kind = events["kind"].to_numpy()
    corr = events["correlation"].to_numpy()
    calls = np.flatnonzero(of_kinds(kind, LAUNCH_KINDS) & (corr >= 0))
    began = pd.Series(events["ts"].to_numpy()[calls]).groupby(corr[calls]).min()
    mine = corr[rows]
    return np.where(mine >= 0, _reindexed(began, mine), np.nan)


def _row(values: np.ndarray, **key: Any) -> dict[str, Any]:
    return clean_row({**key, "idle_us": float(values.sum()), **{f"{c}_us": float(v) for c, v in zip(CAUSES, values)}})


def kernel_gaps(events: pd.DataFrame, steps: Steps) -> dict[int, Gaps]:
    """Per GPU that ran kernels, in device order: the gaps in its kernels over the steps' span
    (first start to last end), with their causes (the GPU view)."""
    kernels = np.flatnonzero(events["kind"].to_numpy() == Kind.KERNEL)
    ts = events["ts"].to_numpy()[kernels]
    end = ts + events["dur"].to_numpy()[kernels]
    launch_ts = launch_times(events, kernels)
    device = device_of_kernels(events, kernels)
    out = {}
    for dev in sorted(set(device.tolist())):
        mine = device == dev
        out[int(dev)] = idle_gaps(ts[mine], end[mine], launch_ts[mine], steps.span)
    return out


def gpu_idle(events: pd.DataFrame, steps: Steps, gaps: dict[int, Gaps] | None = None) -> dict[str, Any]:
    """GPU idle time by cause in us: `devices`, each GPU over all steps (first start to last end,
    the Overview's span); `steps`, per step one row per GPU (`stream` None) and per stream;
    `average`, those rows' means over steps. `gaps`: the GPUs' (kernel_gaps'), when the caller has them."""
    kind = events["kind"].to_numpy()
    work = np.flatnonzero(of_kinds(kind, DEVICE_KINDS))
    ts = events["ts"].to_numpy()[work]
    end = ts + events["dur"].to_numpy()[work]
    launch_ts = launch_times(events, work)
    device = device_of_kernels(events, work)
    stream = events["stream"].to_numpy()[work]
    lo, hi = steps.span
    windows = (steps.starts, steps.ends)
    devices, per_step = [], []  # per_step: (key, values per step)
    for dev, dev_gaps in (kernel_gaps(events, steps) if gaps is None else gaps).items():
        devices.append(_row(idle_by_cause(dev_gaps, (np.array([lo]), np.array([hi])))[0], device=dev, span_us=hi - lo))
        per_step.append(({"device": dev, "stream": None}, idle_by_cause(dev_gaps, windows)))
    pairs = pd.DataFrame({"device": device, "stream": stream})[stream >= 0].drop_duplicates().sort_values(
        ["device", "stream"])
    for dev, st in pairs.itertuples(index=False):
        mine = (device == dev) & (stream == st)
        gaps = idle_gaps(ts[mine], end[mine], launch_ts[mine])
        per_step.append(({"device": int(dev), "stream": int(st)}, idle_by_cause(gaps, windows)))
    return {
        "kernel_wait_threshold_us": KERNEL_WAIT_US,
        "devices": devices,
        "steps": [_row(values[i], step=name, **key) for i, name in enumerate(steps.names) for key, values in per_step],
        "average": [_row(values.mean(axis=0), **key) for key, values in per_step],
    }
