"""Trace view level of detail: which events a window draws as boxes, which it merges into blocks,
and blocks merged once per zoom level, so that a zoomed-out window reads blocks, not every event.

The rule, for one row of a lane and a window drawn `p` microseconds per pixel:
1. An event at least `MIN_BOX_PX` pixels long is a box (timeline.window raises the threshold
   while a lane would have more than its MAX_BOXES_PER_LANE boxes).
2. The other events of the row in the window form runs, in row order: a run ends where a box
   comes between two events, or where more than a pixel separates one event's end from the next
   one's start. Each run is a merged block: the first start, the latest end, how many events,
   their summed durations (busy time) and the kind with the most busy time.
3. `build_blocks` applies rule 2 once per trace at widths w = 1, 4, 16, ... us (a factor of
   `LEVEL_FACTOR`, up to the trace's length), to the events shorter than MIN_BOX_PX * w: the
   blocks of level w, each level built from the one below. A level is kept when its blocks and
   the events it leaves out ("wide", the longer ones) are at most `MAX_LEVEL_SHARE` of the
   events; below the finest kept level a window holds few events and reads them.
4. A window with p >= w reads the coarsest such level: its wide events in the window one by one
   (every event that can be a box at p is among them) and its blocks in the window, a row's first
   and last cut to the row's events in the window (count, busy time and latest end recounted over
   those), and merges them again by rule 2. A block's own gaps are at most w <= p and it holds no
   event that can be a box, so runs end exactly where they end over the events: same boxes, same
   blocks, same counts and busy time. One thing may differ: a run of several blocks takes the kind
   with the most busy time counting each block wholly as its own kind (exact where a row holds one
   kind, as GPU streams do).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from ..trace.tables import TraceTables

if TYPE_CHECKING:
    from .timeline import Layout

MIN_BOX_PX = 1.5
LEVEL_FACTOR = 4.0
MAX_LEVEL_SHARE = 0.25
# The trace's store keeps what build_blocks returns: bump the "blocks" item's version in server/items.py
# when it changes.


@dataclass(frozen=True)
class Runs:
    """Merged runs of one row or more, sorted by position (layout order); a run's events are the
    positions first..stop-1."""

    first: np.ndarray
    stop: np.ndarray
    start_us: np.ndarray
    end_us: np.ndarray  # the latest end among its events
    busy_us: np.ndarray  # their summed recorded durations
    kind: np.ndarray  # the kind with the most busy time

    def take(self, index: np.ndarray | slice) -> Runs:
        return Runs(*(getattr(self, f.name)[index] for f in fields(self)))


@dataclass(frozen=True)
class Blocks:
    """Every level's blocks, for the whole trace (rule 3). Level k merges across `width_us[k]`;
    its blocks are [bounds[k], bounds[k+1]) of the block arrays and its wide events the positions
    wide[wide_bounds[k]:wide_bounds[k+1]], both sorted by position; a block never spans two rows.
    Plain arrays, to be stored."""

    width_us: np.ndarray
    bounds: np.ndarray
    first: np.ndarray
    stop: np.ndarray
    start_us: np.ndarray
    end_us: np.ndarray
    busy_us: np.ndarray
    kind: np.ndarray
    wide_bounds: np.ndarray
    wide: np.ndarray

    def runs(self, level: int) -> Runs:
        at = slice(int(self.bounds[level]), int(self.bounds[level + 1]))
        return Runs(*(getattr(self, f.name)[at] for f in fields(Runs)))


def _events(layout: Layout, kinds: np.ndarray, positions: np.ndarray) -> Runs:
    """One run per event at `positions`; `kinds` is per events row."""
    return Runs(positions, positions + 1, layout.start[positions], layout.end[positions], layout.dur[positions],
                kinds[layout.order[positions]])


def _concat(a: Runs, b: Runs) -> Runs:
    """Both runs (each sorted by position, never sharing one), sorted by position."""
    at_b = np.searchsorted(a.first, b.first) + np.arange(len(b.first))
    from_b = np.zeros(len(a.first) + len(b.first), dtype=bool)
    from_b[at_b] = True
    at_a = np.flatnonzero(~from_b)
    def both(name: str) -> np.ndarray:
        out = np.empty(len(from_b), dtype=getattr(a, name).dtype)
        out[at_a], out[at_b] = getattr(a, name), getattr(b, name)
        return out
    return Runs(*(both(f.name) for f in fields(a)))


def _starts(runs: Runs, gap_us: float, rows: np.ndarray) -> np.ndarray:
    """Where a new run begins (rule 2): another row (`rows`, per run), a position between skipped,
    or a gap longer than `gap_us`."""
    new = np.ones(len(runs.first), dtype=bool)
    new[1:] = (rows[1:] != rows[:-1]) | (runs.first[1:] != runs.stop[:-1]) | \
        (runs.start_us[1:] - runs.end_us[:-1] > gap_us)
    return new


def _merge(runs: Runs, new: np.ndarray) -> Runs:
    """Runs that begin where `new` holds, each of the runs up to the next."""
    if not len(runs.first):
        return runs
    heads = np.flatnonzero(new)
    tails = np.append(heads[1:], len(new)) - 1
    return Runs(runs.first[heads], runs.stop[tails], runs.start_us[heads], np.maximum.reduceat(runs.end_us, heads),
                np.add.reduceat(runs.busy_us, heads), _main_kind(runs.kind, runs.busy_us, heads, tails))


def _main_kind(kind: np.ndarray, busy: np.ndarray, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
    """Per run (items heads..tails), the kind with the most busy time; the first item's where
    none has any; ties to the lowest kind."""
    out = kind[heads]
    lengths = tails - heads + 1
    several = lengths > 1
    if not several.any():
        return out
    member = np.repeat(several, lengths)  # the items of runs of more than one
    run = np.repeat(np.arange(int(several.sum())), lengths[several])
    width = int(kind.max()) + 1
    by_kind = np.zeros((int(several.sum()), width))
    summed = np.bincount(run * width + kind[member], weights=busy[member])  # minlength with weights is 70x slower
    by_kind.flat[:len(summed)] = summed
    out[several] = np.where(by_kind.max(axis=1) > 0, np.argmax(by_kind, axis=1), out[several])
    return out


def merge_runs(layout: Layout, kinds: np.ndarray, narrow: np.ndarray, blocks: Runs | None, gap_us: float) -> Runs:
    """Rule 2 over the narrow events at `narrow` (positions, sorted) and `blocks` of one lane."""
    items = _events(layout, kinds, narrow)
    if blocks is not None:
        items = _concat(items, blocks)
    return _merge(items, _starts(items, gap_us, layout.row_of[layout.order[items.first]]))


def build_blocks(tables: TraceTables, layout: Layout) -> Blocks:
    """Every level's blocks and wide events (rule 3), from the layout and the events' kinds."""
    n = len(layout.order)
    kinds = tables.events["kind"].to_numpy()
    row_start = np.zeros(n, dtype=bool)
    row_start[[a for a, _ in layout.segments.values()]] = True
    row = np.cumsum(row_start)  # per position, which row of the whole timeline
    span = layout.extent[1] - layout.extent[0]
    no_event = np.empty(0, dtype=np.int64)
    blocks, wide = _events(layout, kinds, no_event), np.arange(n)
    # An empty level first: the joined arrays keep their dtypes and the bounds start at 0.
    widths, levels, wides = [], [blocks], [no_event]
    width = 1.0
    while n and width <= span:
        short = layout.dur[wide] < MIN_BOX_PX * width
        items = _concat(blocks, _events(layout, kinds, wide[short]))
        wide = wide[~short]
        blocks = _merge(items, _starts(items, width, row[items.first]))
        if len(blocks.first) + len(wide) <= MAX_LEVEL_SHARE * n:
            widths.append(width)
            levels.append(blocks)
            wides.append(wide)
        width *= LEVEL_FACTOR
    def bounds(parts: list[np.ndarray]) -> np.ndarray:
        return np.cumsum([len(part) for part in parts], dtype=np.int64)
    return Blocks(width_us=np.array(widths, dtype=np.float64), bounds=bounds([runs.first for runs in levels]),
                  **{f.name: np.concatenate([getattr(runs, f.name) for runs in levels]) for f in fields(Runs)},
                  wide_bounds=bounds(wides), wide=np.concatenate(wides))


def level_for(blocks: Blocks | None, us_per_px: float) -> int:
    """The coarsest level whose width is at most a pixel, -1 for none (read the events)."""
    if blocks is None:
        return -1
    return int(np.searchsorted(blocks.width_us, us_per_px, side="right")) - 1


def _row_span(layout: Layout, a: int, b: int, lo_us: float, hi_us: float) -> tuple[int, int, np.ndarray]:
    """The events of the row [a, b) (layout order) overlapping [lo_us, hi_us]: positions
    first..last-1, and before them the `late` ones, whose end was clipped to their parent but
    still reaches into the window."""
    first = a + int(np.searchsorted(layout.reach[a:b], lo_us, side="left"))
    last = max(first, a + int(np.searchsorted(layout.start[a:b], hi_us, side="right")))
    before = layout.overhang[np.searchsorted(layout.overhang, a):np.searchsorted(layout.overhang, first)]
    return first, last, before[layout.end[before] >= lo_us]


def lane_parts(layout: Layout, blocks: Blocks | None, level: int, rows: list[tuple[int, int]], lo_us: float,
               hi_us: float) -> tuple[np.ndarray, Runs | None]:
    """What a window reads of a lane whose rows are `rows` ([a, b) in layout order, in order), by
    rule 4: the positions of the events it reads one by one, and the level's blocks in the window,
    cut to it (None when it reads every event)."""
    spans = [_row_span(layout, a, b, lo_us, hi_us) for a, b in rows]
    if level < 0 or blocks is None:
        return np.concatenate([part for first, last, late in spans for part in (late, np.arange(first, last))]), None
    firsts = np.array([first for first, _, _ in spans], dtype=np.int64)
    lasts = np.array([last for _, last, _ in spans], dtype=np.int64)
    wide = blocks.wide[blocks.wide_bounds[level]:blocks.wide_bounds[level + 1]]
    w0, w1 = np.searchsorted(wide, firsts), np.searchsorted(wide, lasts)
    singles = np.concatenate([part for (_, _, late), i, j in zip(spans, w0, w1) for part in (late, wide[i:j])])
    runs = blocks.runs(level)
    b0, b1 = np.searchsorted(runs.stop, firsts, side="right"), np.searchsorted(runs.first, lasts, side="left")
    picked = np.concatenate([np.arange(i, j) for i, j in zip(b0, b1)])
    return singles, _cut(layout, runs.take(picked), np.repeat(firsts, b1 - b0), np.repeat(lasts, b1 - b0))


def _cut(layout: Layout, runs: Runs, first: np.ndarray, last: np.ndarray) -> Runs:
    """`runs` with the events before position `first` and from `last` on (per run) taken out
    (only a row's first and last run can hold any), and without a run that holds none of the
    others: one around `first` when first == last (the row's only events in the window outlast
    their parent)."""
    lo, hi = np.maximum(runs.first, first), np.minimum(runs.stop, last)
    if not (lo < hi).all():
        keep = lo < hi
        runs, lo, hi = runs.take(keep), lo[keep], hi[keep]
    cut = np.flatnonzero((lo != runs.first) | (hi != runs.stop))
    if not len(cut):
        return runs
    start, end, busy = runs.start_us.copy(), runs.end_us.copy(), runs.busy_us.copy()
    for i in cut:
        start[i] = layout.start[lo[i]]
        end[i] = layout.end[lo[i]:hi[i]].max()
        busy[i] = layout.dur[lo[i]:hi[i]].sum()
    return Runs(lo, hi, start, end, busy, runs.kind)
