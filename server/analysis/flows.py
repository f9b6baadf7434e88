"""Flow arrows: pairs of timeline events that belong together.

- ac2g: a runtime or driver call (cudaLaunchKernel, cuLaunchKernel, cudaMemcpyAsync, ...) and
  the kernel, memcpy or memset it queued, told by their shared correlation id. Kineto writes
  these as flow events too; the correlation id is the same fact and is always there.
- fwdbwd: a forward operator and the backward operator autograd ran for it, from the trace's
  `fwdbwd` flow events: the start point sits at the forward operator's start, the finish
  point at the backward operator's start, both on the operator's own thread.

Pairs are indexed once per trace so that a window or a click only slices arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import DEVICE_KINDS, Kind
from ..trace.tables import TraceTables
from .kinds import of_kinds

CATEGORIES = ["ac2g", "fwdbwd"]
MAX_WINDOW_FLOWS = 500
# Past this many candidates a window is zoomed far out; counting them exactly is not worth it.
MAX_COUNTED = 200_000
# The trace's store keeps what build_flows returns: bump the "flows" item's version in server/items.py
# when it changes.


@dataclass(frozen=True)
class Flows:
    """Pairs sorted by where their drawing starts (`lo`, the earlier of the two starts);
    `reach` is the running maximum of their ends, so a window finds its pairs by bisection."""

    src: np.ndarray  # events rows: the launch call, the forward operator
    dst: np.ndarray  # the GPU work, the backward operator
    cat: np.ndarray  # index into CATEGORIES
    lo: np.ndarray
    reach: np.ndarray
    src_span: tuple[np.ndarray, np.ndarray]  # start, end of each source event
    dst_span: tuple[np.ndarray, np.ndarray]


def _distinct(ids: np.ndarray) -> bool:
    """Whether no id repeats. A profiler numbers calls as they start, so in order of start they mostly
    increase, which one pass shows (a hash of 1 M ids took 85 ms of the synthetic trace's overview)."""
    return bool((ids[1:] > ids[:-1]).all()) or len(np.unique(ids)) == len(ids)


def _launch_pairs(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    kind = events["kind"].to_numpy()
    correlation = events["correlation"].to_numpy()
    tied = correlation >= 0
    calls = np.flatnonzero(tied & of_kinds(kind, (Kind.RUNTIME, Kind.DRIVER)))
    work = np.flatnonzero(tied & of_kinds(kind, DEVICE_KINDS))
    keys = correlation[calls]
    if _distinct(keys):  # as a profiler writes them: one call per id, its work one or more
        pairs = pd.DataFrame({"src": calls, "key": keys}).merge(
            pd.DataFrame({"dst": work, "key": correlation[work]}), on="key")
        return pairs["src"].to_numpy(np.int64), pairs["dst"].to_numpy(np.int64)
    # Ids used again (traces joined end to end, a step's events copied): each piece of work goes with the
    # last call of its id that started at or before it. Every call with every piece of work of its id made
    # a test trace of 270,000 events (one step copied 91 times) 8.3 M pairs and a 4 s overview.
    ts = events["ts"].to_numpy()  # the events are in order of start
    pairs = pd.merge_asof(pd.DataFrame({"dst": work, "ts": ts[work], "key": correlation[work]}),
                          pd.DataFrame({"src": calls, "ts": ts[calls], "key": keys}),
                          on="ts", by="key", direction="backward", allow_exact_matches=True).dropna()
    return pairs["src"].to_numpy(np.int64), pairs["dst"].to_numpy(np.int64)


def _nanoseconds(ts: np.ndarray) -> np.ndarray:
    return np.round(ts * 1000.0).astype(np.int64)


def _texts(column: pd.Series, missing: str | None) -> tuple[np.ndarray, np.ndarray]:
    """A categorical column's texts (`str` of each category, then `missing` for the rows without a
    value) and each row's position among them."""
    texts = np.append(column.cat.categories.astype(str).to_numpy(dtype=object), np.array([missing], dtype=object))
    return texts, column.cat.codes.to_numpy()  # code -1: the last, `missing`


def _numbered(*columns: tuple[pd.Series, str | None]) -> list[np.ndarray]:
    """Per row of each (categorical column, text of a missing value), a number that is the same
    where the rows' texts are; None is no text: -1, which pandas' merge matches with -1 only."""
    parts = [_texts(column, missing) for column, missing in columns]
    numbers = pd.factorize(np.concatenate([texts for texts, _ in parts]))[0]
    bounds = np.cumsum([0] + [len(texts) for texts, _ in parts])
    return [numbers[lo:hi][codes] for (_, codes), lo, hi in zip(parts, bounds[:-1], bounds[1:])]


def _backward_pairs(events: pd.DataFrame, flows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    points = flows[(flows["cat"] == "fwdbwd").to_numpy()] if len(flows) else flows
    empty = np.empty(0, dtype=np.int64)
    if not len(points):
        return empty, empty
    # Operators and points meet on their threads' texts and ids on theirs, numbered (merging
    # numbers is several times faster than merging texts). An operator without a pid or tid has
    # numpy's text of NaN, 'nan'; a point without one has none, and meets no operator.
    pid, point_pid = _numbered((events["pid"], "nan"), (points["pid"], None))
    tid, point_tid = _numbered((events["tid"], "nan"), (points["tid"], None))
    width = max(tid.max(initial=0), point_tid.max(initial=0)) + 1
    point_thread = np.where((point_pid < 0) | (point_tid < 0), -1, point_pid * width + point_tid)
    ids, = _numbered((points["id"].cat.remove_unused_categories(), None))  # of all flows: ac2g too
    ph, ph_codes = _texts(points["ph"], None)
    ops = np.flatnonzero(events["kind"].to_numpy() == Kind.CPU_OP)
    op_keys = pd.DataFrame({"row": ops, "thread": pid[ops] * width + tid[ops],
                            "ns": _nanoseconds(events["ts"].to_numpy()[ops])})
    # Where several operators start at one instant on a thread, the outermost (first) owns the point.
    op_keys = op_keys.drop_duplicates(["thread", "ns"], keep="first")
    at = pd.DataFrame({"id": ids, "start": (ph == "s")[ph_codes], "finish": (ph == "f")[ph_codes],
                       "thread": point_thread, "ns": _nanoseconds(points["ts"].to_numpy())}
                      ).merge(op_keys, on=["thread", "ns"])
    pairs = at[at["start"]].merge(at[at["finish"]], on="id", suffixes=("_s", "_f"))
    return pairs["row_s"].to_numpy(np.int64), pairs["row_f"].to_numpy(np.int64)


def build_flows(tables: TraceTables, on_timeline: np.ndarray, backward: bool = True, launch: bool = True) -> Flows:
    """Every pair whose two events are both on the timeline (`on_timeline[row]`); launch pairs only
    when not `backward` (the same as when no operator is on the timeline, without matching them), and
    fwdbwd pairs only when not `launch`."""
    events = tables.events
    empty = np.empty(0, dtype=np.int64)
    launch = _launch_pairs(events) if launch else (empty, empty)
    backward = _backward_pairs(events, tables.flows) if backward else (empty, empty)
    src = np.concatenate([launch[0], backward[0]])
    dst = np.concatenate([launch[1], backward[1]])
    cat = np.concatenate([np.zeros(len(launch[0]), np.int64), np.ones(len(backward[0]), np.int64)])
    keep = on_timeline[src] & on_timeline[dst]
    src, dst, cat = src[keep], dst[keep], cat[keep]
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    lo = np.minimum(ts[src], ts[dst])
    order = np.argsort(lo, kind="stable")
    src, dst, cat, lo = src[order], dst[order], cat[order], lo[order]
    hi = np.maximum(end[src], end[dst])
    reach = np.maximum.accumulate(hi) if len(hi) else hi
    return Flows(src, dst, cat, lo, reach, (ts[src], end[src]), (ts[dst], end[dst]))


def types_of(flows: Flows) -> list[str]:
    """The flow types (CATEGORIES) that have pairs, in CATEGORIES' order."""
    return [CATEGORIES[c] for c in np.unique(flows.cat)]


def in_window(flows: Flows, start_us: float, end_us: float, types: list[str] | None = None
              ) -> tuple[np.ndarray | None, np.ndarray]:
    """Pairs of `types` (default: all) with either event overlapping the window: (how many, or
    None when too many to count; their positions, empty when more than MAX_WINDOW_FLOWS)."""
    first = int(np.searchsorted(flows.reach, start_us, side="left"))
    last = int(np.searchsorted(flows.lo, end_us, side="right"))
    if types is not None and not types:
        return 0, np.empty(0, dtype=np.int64)
    if last - first > MAX_COUNTED:
        return None, np.empty(0, dtype=np.int64)
    at = np.arange(first, max(first, last))
    (ss, se), (ds, de) = flows.src_span, flows.dst_span
    hit = ((ss[at] <= end_us) & (se[at] >= start_us)) | ((ds[at] <= end_us) & (de[at] >= start_us))
    if types is not None:
        hit &= np.isin(flows.cat[at], [CATEGORIES.index(t) for t in types])
    picked = at[hit]
    return len(picked), (picked if len(picked) <= MAX_WINDOW_FLOWS else np.empty(0, dtype=np.int64))


def of_event(flows: Flows, row: int) -> list[tuple[int, str]]:
    """The events tied to `row` and how: (events row, relation as seen from `row`)."""
    outgoing, incoming = flows.src == row, flows.dst == row
    return ([(int(d), ("launches", "backward")[c]) for d, c in zip(flows.dst[outgoing], flows.cat[outgoing])]
            + [(int(s), ("launched by", "forward")[c]) for s, c in zip(flows.src[incoming], flows.cat[incoming])])


def window_flows(tables: TraceTables, flows: Flows, lane_of: np.ndarray, row_of: np.ndarray,
                 start_us: float, end_us: float, types: list[str] | None = None) -> dict[str, Any]:
    """The window's pairs of `types` (default: all) as columns (each end's id, lane, row and
    start) with their total."""
    total, picked = in_window(flows, start_us, end_us, types)
    src, dst = flows.src[picked], flows.dst[picked]
    return {
        "total": total, "cat": [CATEGORIES[c] for c in flows.cat[picked]],
        "from_id": src.tolist(), "from_lane": lane_of[src].tolist(), "from_row": row_of[src].tolist(),
        "from_us": flows.src_span[0][picked].tolist(),
        "to_id": dst.tolist(), "to_lane": lane_of[dst].tolist(), "to_row": row_of[dst].tolist(),
        "to_us": flows.dst_span[0][picked].tolist(),
    }
