"""Python call stacks of operators.

Traces record them in one of two ways. PyTorch 1.x wrote a `Call stack` argument on each
operator (frames innermost first, separated by `;`). PyTorch 2.x with `with_stack=True`
writes the Python tracer's frames as `python_function` events instead; an operator's stack
is then the chain of frames open on its thread when it started. Only source frames
(`file.py(123): function`) are kept; built-in calls and `nn.Module:` markers are left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import Kind
from .optree import nesting, nesting_order, thread_key

_FRAME = re.compile(r"^(.+)\((\d+)\): (.+)$")


@dataclass(frozen=True)
class Stacks:
    of_row: np.ndarray  # per events row: stack id, -1 where none is known
    frames: list[tuple[str, ...]]  # stack id -> frame texts, innermost first


def parse_frame(text: str) -> dict[str, Any]:
    """`path/file.py(123): fn` as {file, line, function}; anything else as a bare function."""
    match = _FRAME.match(text)
    if not match:
        return {"file": None, "line": None, "function": text}
    return {"file": match.group(1), "line": int(match.group(2)), "function": match.group(3)}


# Files of PyTorch and its libraries: the frame a user recognises is the first outside them.
_PYTORCH_FILE = re.compile(r"(^|/)(torch|torchvision|torchaudio|torchtext|functorch|triton)/|^<|^threading\.py$")


def user_frame(frames: tuple[str, ...]) -> str | None:
    """The innermost frame outside PyTorch (the user's line), else the innermost one."""
    for text in frames:
        file = parse_frame(text)["file"]
        if file is not None and not _PYTORCH_FILE.search(file):
            return text
    return frames[0] if frames else None


def _is_source_frame(name: str) -> bool:
    return _FRAME.match(name) is not None


class _Interner:
    """Stack ids for frame tuples, shared by both sources."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, ...], int] = {}
        self.frames: list[tuple[str, ...]] = []

    def __call__(self, frames: tuple[str, ...]) -> int:
        if not frames:
            return -1
        found = self.ids.get(frames)
        if found is None:
            found = self.ids[frames] = len(self.frames)
            self.frames.append(frames)
        return found


def _from_arguments(events: pd.DataFrame, rows: np.ndarray, intern: _Interner) -> np.ndarray:
    column = events["call_stack"]
    per_category = np.array([intern(tuple(f.strip() for f in str(text).split(";") if f.strip()))
                             for text in column.cat.categories], dtype=np.int64)
    codes = column.cat.codes.to_numpy()[rows]
    if len(per_category) == 0:
        return np.full(len(rows), -1, dtype=np.int64)
    return np.where(codes >= 0, per_category[np.maximum(codes, 0)], -1)


def _from_python_frames(events: pd.DataFrame, rows: np.ndarray, intern: _Interner) -> np.ndarray:
    out = np.full(len(rows), -1, dtype=np.int64)
    kind = events["kind"].to_numpy()
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    frames = np.flatnonzero((kind == Kind.PYTHON_FUNCTION) & np.isfinite(end))
    if not len(frames) or not len(rows):
        return out
    threads = thread_key(events)
    frames = frames[nesting_order(threads[frames], ts[frames], end[frames])]
    frames = frames[_around(threads[frames], ts[frames], end[frames], threads[rows], ts[rows])]
    nested = nesting(threads[frames], ts[frames], end[frames])
    parent = nested.parent

    names = events["name"].cat.categories
    source = np.array([_is_source_frame(str(n)) for n in names] + [False], dtype=bool)  # code -1: none
    codes = events["name"].cat.codes.to_numpy()[frames]
    # Each frame's stack: its parent's, plus itself when it is a source frame. Stacks get numbers
    # level by level (one per parent's stack and name), then their ids from the interner in the
    # order of their first frames, the ids a walk over the frames in order would give them.
    stack_key = np.full(len(frames), -1, dtype=np.int64)
    by_depth = np.argsort(nested.depth, kind="stable")
    level_ends = np.cumsum(np.bincount(nested.depth, minlength=1))
    key_parent, key_code = [], []
    for at in np.split(by_depth, level_ends[:-1]):
        below = np.where(parent[at] >= 0, stack_key[np.maximum(parent[at], 0)], -1)
        own = source[codes[at]]
        pairs, numbered = np.unique((below[own] + 1) * (len(names) + 1) + codes[at][own], return_inverse=True)
        stack_key[at] = below
        stack_key[at[own]] = len(key_code) + numbered
        key_parent += (pairs // (len(names) + 1) - 1).tolist()
        key_code += (pairs % (len(names) + 1)).tolist()
    stack_id = np.full(len(key_code), -1, dtype=np.int64)
    used = stack_key >= 0
    keys, first = np.unique(stack_key[used], return_index=True)
    frame_names = [str(n) for n in names]
    for key in keys[np.argsort(first)].tolist():
        up = key_parent[key]
        stack_id[key] = intern((frame_names[key_code[key]], *(intern.frames[stack_id[up]] if up >= 0 else ())))
    stack_of_frame = np.where(used, stack_id[np.maximum(stack_key, 0)], -1)

    # Innermost frame open on the operator's thread when it started.
    frame_threads = threads[frames]
    frame_start = ts[frames]
    frame_end = end[frames]
    op_threads = threads[rows]
    for thread in np.unique(op_threads):
        lo, hi = np.searchsorted(frame_threads, [thread, thread + 1])
        if lo == hi:
            continue
        mine = np.flatnonzero(op_threads == thread)
        start = ts[rows[mine]]
        candidate = lo + np.searchsorted(frame_start[lo:hi], start, side="right") - 1
        candidate[candidate < lo] = -1
        while True:
            closed = (candidate >= 0) & (frame_end[np.maximum(candidate, 0)] <= start)
            if not closed.any():
                break
            candidate[closed] = parent[candidate[closed]]
        found = candidate >= 0
        out[mine[found]] = stack_of_frame[candidate[found]]
    return out


def _around(group: np.ndarray, start: np.ndarray, end: np.ndarray, at_group: np.ndarray,
            at_time: np.ndarray) -> np.ndarray:
    """Mask over frames (in nesting order): those that the stacks of operators starting at `at_time` (on
    their group, a thread) are found from. Per operator, the last frame started by then, where the
    search for the innermost open frame begins; then, over and over, every frame open when a kept one
    started, which holds its ancestors (optree.nesting makes a frame's parent one open where it starts).
    Nesting the kept frames gives each the parent it has among all frames, so the stacks are the same;
    a few operators (graph breaks, sync sites) need a few thousand of a trace's millions of frames."""
    kept = np.zeros(len(start), dtype=bool)
    for g in np.unique(at_group).tolist():
        lo, hi = np.searchsorted(group, [g, g + 1])
        last = lo + np.searchsorted(start[lo:hi], at_time[at_group == g], "right") - 1
        kept[last[last >= lo]] = True
    found = kept.copy()
    while found.any():
        points_group, points_time = group[found], start[found]
        found = np.zeros(len(start), dtype=bool)
        for g in np.unique(points_group).tolist():
            lo, hi = np.searchsorted(group, [g, g + 1])
            times = np.sort(points_time[points_group == g])
            hi = lo + np.searchsorted(start[lo:hi], times[-1], "right")  # none started later holds a point
            mine = lo + np.flatnonzero(~kept[lo:hi])
            # Open at some t of `times`: start <= t < end.
            found[mine] = np.searchsorted(times, start[mine], "left") < np.searchsorted(times, end[mine], "left")
        kept |= found
    return kept


def op_stacks(events: pd.DataFrame, rows: np.ndarray) -> Stacks:
    """Call stacks of the operators at event `rows` (the argument when recorded, else frames)."""
    intern = _Interner()
    by_argument = _from_arguments(events, rows, intern)
    missing = by_argument < 0
    if missing.any():
        by_argument[missing] = _from_python_frames(events, rows[missing], intern)
    of_row = np.full(len(events), -1, dtype=np.int64)
    of_row[rows] = by_argument
    return Stacks(of_row=of_row, frames=intern.frames)
