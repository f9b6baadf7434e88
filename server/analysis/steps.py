"""Training steps of one trace: where each `ProfilerStep#N` begins and ends.

1. Host steps are the `ProfilerStep#N` ranges recorded on the CPU (cat `cpu_op`,
   `user_annotation`, or legacy `Operator`). PyTorch 2.x also writes a GPU-side copy of each
   (cat `gpu_user_annotation`); those are not steps (the reference plugin counted every step
   twice because of them).
2. With no ProfilerStep at all, the whole trace is one step "0": from the first to the last
   host operator or annotation (or any event, when there are none).
3. Device extension, as the reference plugin does it: a CUDA runtime or driver call that lies
   inside a host step owns the kernels, copies and sets it launched (matched by correlation
   id). A step ends when its host range or its last launched device activity ends, whichever
   is later; it starts no earlier than the previous step's end. The first step starts no
   earlier than the end of unowned device work that finished before its own first activity.
4. Tail trimming, as the reference does it: trailing steps that launched no device work are
   dropped, and so is the last one that did if it launched under 80% of the device events of
   the step before (the profiler stopped before its kernels were recorded).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace.schema import DEVICE_KINDS, LAUNCH_KINDS, Kind
from . import ranges
from .kinds import of_kinds
from .names import name_mask

STEP_PREFIX = "ProfilerStep#"
# The trace's store keeps the steps detect_steps returns: bump the "steps" item's version in
# server/items.py when they change.
_HOST_STEP_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
# Host kinds whose extent defines the single step of a trace without ProfilerStep.
_HOST_EXTENT_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)


@dataclass
class Steps:
    names: list[str]
    starts: np.ndarray
    ends: np.ndarray
    warnings: list[str] = field(default_factory=list)

    @property
    def span(self) -> tuple[float, float]:
        """From the first step's start to the last step's end (us)."""
        return float(self.starts[0]), float(self.ends[-1])


def host_steps(events: pd.DataFrame) -> pd.DataFrame:
    """The host-side ProfilerStep events, sorted by start; columns name, ts, end."""
    kind = events["kind"].to_numpy()
    mask = of_kinds(kind, _HOST_STEP_KINDS) & name_mask(events["name"], lambda n: n.startswith(STEP_PREFIX))
    found = events.loc[mask, ["name", "ts", "dur"]]
    return pd.DataFrame({
        "name": found["name"].astype(str).str.slice(len(STEP_PREFIX)).to_numpy(),
        "ts": found["ts"].to_numpy(),
        "end": (found["ts"] + found["dur"]).to_numpy(),
    }).sort_values("ts", kind="stable", ignore_index=True)


def detect_steps(events: pd.DataFrame) -> Steps:
    """Steps of a trace with the device-side extension and tail trimming described above."""
    found = host_steps(events)
    warnings: list[str] = []
    if len(found):
        names = list(found["name"])
        starts = found["ts"].to_numpy().copy()
        ends = found["end"].to_numpy().copy()
    else:
        names, starts, ends = ["0"], *_whole_trace(events)
        warnings.append("no ProfilerStep events: the whole trace is shown as one step")
    device_range, device_count, prev_end = _device_work_per_step(events, starts, ends)
    if prev_end is None:
        return Steps(names, starts, ends, warnings)
    for i in range(len(starts)):
        start = max(prev_end, starts[i])
        end = ends[i]
        if device_count[i] == 0:
            end = max(end, start)
        else:
            end = max(end, device_range[i, 1], start)
        starts[i], ends[i] = start, end
        prev_end = end
    keep = _steps_to_keep(device_count)
    if keep < len(names):
        dropped = ", ".join(names[keep:])
        warnings.append(
            f"left out trailing step(s) {dropped}: they launched no GPU work, or much less than the step "
            "before, so the profiler probably stopped before their kernels ran")
        names, starts, ends = names[:keep], starts[:keep], ends[:keep]
    return Steps(names, starts, ends, warnings)


def _whole_trace(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    kind = events["kind"].to_numpy()
    host = events[of_kinds(kind, _HOST_EXTENT_KINDS)]
    scope = host if len(host) else events[kind != Kind.TRACE]
    if len(scope) == 0:
        scope = events
    if len(scope) == 0:
        return np.array([0.0]), np.array([0.0])
    ts = scope["ts"].to_numpy()
    return np.array([ts.min()]), np.array([(ts + scope["dur"].to_numpy()).max()])


def _device_work_per_step(events: pd.DataFrame, starts: np.ndarray, ends: np.ndarray):
    """Per step: (first start, last end) of device work it launched, and how many events.

    Also returns where the first step may start at the earliest (None when no device work is
    owned by any step, which disables the device extension).
    """
    n = len(starts)
    device_range = np.full((n, 2), np.nan)
    device_count = np.zeros(n, dtype=np.int64)
    kind = events["kind"].to_numpy()
    corr = events["correlation"].to_numpy()
    launch = of_kinds(kind, LAUNCH_KINDS) & (corr != -1)
    device = of_kinds(kind, DEVICE_KINDS)
    if not launch.any() or not device.any():
        return device_range, device_count, None
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    # A launch belongs to the step that contains it entirely.
    l_ts, l_end, l_corr = ts[launch], end[launch], corr[launch]
    step_idx = np.searchsorted(starts, l_ts, side="right") - 1
    inside = step_idx >= 0
    inside[inside] = l_end[inside] <= ends[step_idx[inside]]
    owner_by_corr = pd.Series(np.where(inside, step_idx, -1), index=l_corr)
    owner_by_corr = owner_by_corr[~owner_by_corr.index.duplicated(keep="last")]
    d_ts, d_end, d_corr = ts[device], end[device], corr[device]
    owner = owner_by_corr.reindex(d_corr).fillna(-1).to_numpy().astype(np.int64)
    matched = owner >= 0
    if not matched.any():
        return device_range, device_count, None
    frame = pd.DataFrame({"step": owner[matched], "ts": d_ts[matched], "end": d_end[matched]})
    grouped = frame.groupby("step")
    idx = grouped.size().index.to_numpy()
    device_count[idx] = grouped.size().to_numpy()
    device_range[idx, 0] = grouped["ts"].min().to_numpy()
    device_range[idx, 1] = grouped["end"].max().to_numpy()
    prev_end = float(starts[0])
    if device_count[0] > 0:
        early = d_end[~matched] < device_range[0, 0]
        if early.any():
            prev_end = max(prev_end, float(d_end[~matched][early].max()))
    return device_range, device_count, prev_end


def _steps_to_keep(device_count: np.ndarray) -> int:
    n = len(device_count)
    if n <= 1:
        return n
    with_work = np.flatnonzero(device_count > 0)
    if len(with_work) == 0:
        return n
    last = int(with_work[-1])
    keep = last + 1
    if last > 0 and device_count[last - 1] * 0.8 > device_count[last]:
        keep = last
    return keep


def step_of(steps: Steps, ts: np.ndarray) -> np.ndarray:
    """Index of the step holding each time (start inclusive, end exclusive), -1 outside all."""
    return ranges.which((steps.starts, steps.ends), ts)
