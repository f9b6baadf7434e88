"""Trace view: every event on a timeline, one lane per thread or GPU stream, at any zoom.

- Lanes: one per (process, thread) on the host and per (device, stream) on the GPU, ordered as
  the trace's own sort indexes ask. Within a lane, events nest by time (a child starts inside
  its parent); each nesting level is a row, and events that overlap on a GPU stream go to
  extra rows, so none is hidden under another. A thread's Python frames take the top rows,
  its operators, annotations and runtime calls the rows below them (a lane's `stack_rows` says
  how many rows its frames take, so that the page can fold them).
- Level of detail: for a window and a width in pixels, events at least 1.5 pixels wide come
  back as boxes; runs of narrower ones on a row come back as merged blocks with their count and
  busy time. Boxes and merged blocks together account for every event in the window. Zoomed
  out, a window reads blocks merged once per trace at widths of 4^k us rather than every event
  (analysis/lod.py): the same boxes and blocks, except that a block joined from several takes
  the kind with the most busy time among the joined blocks' own kinds.
- Counters: GPU utilization (share of time with a kernel running) and Est. SM efficiency
  (blocks per SM, capped at 1, summed over concurrent kernels) per device, averaged per pixel;
  memory allocated / reserved per device (the highest value in each pixel); and the trace's
  own `ph: "C"` counters (the highest value in each pixel).
- Steps on the ruler: each step of the steps analysis (analysis/steps.py) with the range of its
  own ProfilerStep#N on the host, so that the ruler names the step the CPU lanes show there; the
  step's device tail (GPU work it launched that ends later) is drawn apart, unnamed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import DEVICE_KINDS, Kind
from ..trace.tables import TraceTables
from . import flows, lod, ranges
from .kinds import of_kinds
from .names import regex_mask
from .optree import OpTree, nesting, nesting_order, thread_key
from .records import clean_row
from .steps import STEP_PREFIX, Steps, host_steps

# The trace's store keeps what build_layout returns: bump the "layout" item's version in server/items.py
# when it changes.
MAX_BOXES_PER_LANE = 4000
MAX_SEARCH_MATCHES = 1000
KINDS = [k.name.lower() for k in Kind]
_GPU_SIDE = (*DEVICE_KINDS, Kind.GPU_USER_ANNOTATION)


@dataclass(frozen=True)
class Layout:
    """Events placed on lanes and rows. `order` lists event rows sorted by lane, row and start;
    `segments[(lane, row)]` is the slice of `order` on that row."""

    lanes: list[dict[str, Any]]
    order: np.ndarray
    start: np.ndarray  # per position in `order`
    end: np.ndarray  # real end
    dur: np.ndarray  # as recorded (end - start loses nanoseconds at trace timestamps)
    reach: np.ndarray  # end clipped to the parent: non-decreasing along a row
    overhang: np.ndarray  # positions whose end was clipped (reach < end), sorted
    segments: dict[tuple[int, int], tuple[int, int]]
    lane_of: np.ndarray  # per events row, -1 for events not on the timeline
    row_of: np.ndarray
    extent: tuple[float, float]


def _label(table: dict[str, Any], key: str) -> dict[str, Any]:
    entry = table.get(key)
    return entry if isinstance(entry, dict) else {}


def _lane_labels(events: pd.DataFrame, rows: np.ndarray, metadata: dict[str, Any], gpu: bool) -> dict[str, Any]:
    pid, tid = str(events["pid"].iat[rows[0]]), str(events["tid"].iat[rows[0]])
    process = _label(metadata.get("processes") or {}, pid)
    thread = _label(metadata.get("threads") or {}, f"{pid}/{tid}")
    if gpu:
        process_label = process.get("labels") or (f"GPU {pid}" if pid.isdigit() else pid)
        name = (thread.get("name") or "").strip() or (f"stream {tid}" if tid.isdigit() else tid)
    else:
        process_label = f"{process.get('name') or 'process'} (pid {pid})" if pid.lstrip("-").isdigit() else pid
        name = (thread.get("name") or "").strip() or f"thread {tid}"
    def order(entry: dict[str, Any], fallback: str) -> tuple[int, float, str]:
        index = entry.get("sort_index")
        if isinstance(index, (int, float)):
            return (0, float(index), fallback)
        return (1, float(fallback) if fallback.lstrip("-").isdigit() else 0.0, fallback)
    return {"process": str(process_label), "name": str(name), "kind": "gpu" if gpu else "cpu",
            "_order": (1 if gpu else 0, order(process, pid), order(thread, tid))}


def build_layout(tables: TraceTables) -> Layout:
    """Lanes, rows and the per-row index of every complete event with a time and duration."""
    events = tables.events
    kind = events["kind"].to_numpy()
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    timed = np.flatnonzero(np.isfinite(ts) & np.isfinite(dur) & (dur >= 0))
    all_threads = thread_key(events)
    # Python tracer frames nest among themselves and are drawn above the operators, annotations
    # and runtime calls of their thread: record_function ranges overlap the frames that enter
    # and leave them, so nesting both together would stack boxes on one row.
    all_family = (kind != Kind.PYTHON_FUNCTION).astype(np.int64)
    all_groups = all_threads * 2 + all_family
    order = timed[nesting_order(all_groups[timed], ts[timed], ts[timed] + dur[timed])]
    threads, family = all_threads[order], all_family[order]
    start = ts[order]
    end = start + dur[order]
    nested = nesting(all_groups[order], start, end)
    depth, reach = nested.depth, nested.end  # reach: the clipped end events nest by
    _, thread_index = np.unique(threads, return_inverse=True)
    frame_rows = np.zeros(int(thread_index.max()) + 1 if len(threads) else 0, dtype=np.int64)
    frames = family == 0
    np.maximum.at(frame_rows, thread_index[frames], depth[frames] + 1)
    depth = depth + np.where(frames, 0, frame_rows[thread_index]) if len(threads) else depth

    bounds = np.flatnonzero(np.diff(threads)) + 1
    groups = np.split(np.arange(len(order)), bounds) if len(order) else []
    lanes = []
    for positions in groups:
        rows = order[positions]
        gpu = bool(of_kinds(kind[rows], _GPU_SIDE).mean() > 0.5)
        lanes.append((_lane_labels(events, rows, tables.metadata, gpu), positions))
    lanes.sort(key=lambda item: item[0]["_order"])

    lane_sorted = np.empty(len(order), dtype=np.int64)
    for lane_id, (_, positions) in enumerate(lanes):
        lane_sorted[positions] = lane_id
    # By lane, row and start: a row holds one thread's events of one family, already by start,
    # so a stable sort by (lane, row) is enough (a radix sort, on keys this small).
    keys = lane_sorted * (int(depth.max()) + 2 if len(depth) else 1) + depth
    final = np.argsort(keys.astype(np.min_scalar_type(keys.max(initial=0))), kind="stable")
    order, start, end, reach = order[final], start[final], end[final], reach[final]
    recorded = dur[order]
    lane_sorted, depth, keys = lane_sorted[final], depth[final], keys[final]
    cuts = np.flatnonzero(np.diff(keys)) + 1
    firsts = np.concatenate([[0], cuts]) if len(keys) else np.empty(0, dtype=np.int64)
    lasts = np.concatenate([cuts, [len(keys)]]) if len(keys) else np.empty(0, dtype=np.int64)
    segments = {(int(lane_sorted[a]), int(depth[a])): (int(a), int(b)) for a, b in zip(firsts, lasts)}

    lane_of = np.full(len(events), -1, dtype=np.int64)
    row_of = np.full(len(events), -1, dtype=np.int64)
    lane_of[order], row_of[order] = lane_sorted, depth
    deepest = {lane: row for lane, row in segments}  # segments come by lane, then row
    out_lanes = []
    for lane_id, (label, positions) in enumerate(lanes):
        label = {k: v for k, v in label.items() if k != "_order"}
        out_lanes.append({"id": lane_id, **label, "rows": deepest[lane_id] + 1, "events": int(len(positions)),
                          "stack_rows": int(frame_rows[thread_index[positions[0]]])})
    extent = (float(start.min()), float(end.max())) if len(start) else (0.0, 0.0)
    overhang = np.flatnonzero(reach < end)
    return Layout(out_lanes, order, start, end, recorded, reach, overhang, segments, lane_of, row_of, extent)


def ruler_steps(events: pd.DataFrame, layout: Layout, found: Steps) -> list[dict[str, Any]]:
    """The steps of the steps analysis, each with the range of its own ProfilerStep#N on the host
    and the lane that shows it (its own range and no lane where it has none: a trace without
    ProfilerStep is one step)."""
    host = host_steps(events).drop_duplicates("name")
    own = dict(zip(host["name"], zip(host["ts"], host["end"])))
    # The lane of each: the timeline event of that name that starts at its start.
    ts = events["ts"].to_numpy()
    at = np.flatnonzero(np.isin(ts, host["ts"].to_numpy()) & (layout.lane_of >= 0))
    lane_of = {(str(events["name"].iat[r]), float(ts[r])): int(layout.lane_of[r]) for r in at}
    out = []
    for name, start, end in zip(found.names, found.starts, found.ends):
        host_start, host_end = own.get(name, (start, end))
        lane = lane_of.get((STEP_PREFIX + name, float(host_start)))
        out.append(clean_row({"step": name, "start_us": start, "end_us": end,
                              "host_start_us": host_start, "host_end_us": host_end, "lane": lane}))
    return out


def window(tables: TraceTables, layout: Layout, start_us: float, end_us: float, width_px: int,
           lanes: list[int] | None = None, blocks: lod.Blocks | None = None) -> dict[str, Any]:
    """Boxes and merged blocks per lane for the window [start_us, end_us] drawn `width_px` wide,
    zoomed out read from `blocks` (lod.build_blocks) where given, else from the events."""
    events = tables.events
    name_codes = events["name"].cat.codes.to_numpy()
    kind = events["kind"].to_numpy()
    us_per_px = max(end_us - start_us, 1e-9) / width_px
    level = lod.level_for(blocks, us_per_px)
    wanted = range(len(layout.lanes)) if lanes is None else [i for i in lanes if 0 <= i < len(layout.lanes)]
    used_names: dict[int, int] = {}
    out = []
    for lane in wanted:
        rows = [layout.segments[(lane, row)] for row in range(layout.lanes[lane]["rows"])
                if (lane, row) in layout.segments]
        singles, lane_blocks = lod.lane_parts(layout, blocks, level, rows, start_us, end_us)
        durations = layout.dur[singles]
        threshold = lod.MIN_BOX_PX
        while int((durations >= threshold * us_per_px).sum()) > MAX_BOXES_PER_LANE:
            threshold *= 2
        is_box = durations >= threshold * us_per_px
        shown = singles[is_box]
        ids = layout.order[shown]
        runs = lod.merge_runs(layout, kind, singles[~is_box], lane_blocks, us_per_px)
        boxes = {"id": ids.tolist(), "start_us": layout.start[shown].tolist(), "dur_us": durations[is_box].tolist(),
                 "row": layout.row_of[ids].tolist(),
                 "name": [used_names.setdefault(int(c), len(used_names)) for c in name_codes[ids]],
                 "kind": kind[ids].tolist()}
        merged = {"start_us": runs.start_us.tolist(), "end_us": runs.end_us.tolist(),
                  "row": layout.row_of[layout.order[runs.first]].tolist(), "count": (runs.stop - runs.first).tolist(),
                  "busy_us": runs.busy_us.tolist(), "kind": runs.kind.tolist()}
        out.append({"id": lane, "boxes": boxes, "merged": merged})
    categories = events["name"].cat.categories
    names = [""] * len(used_names)
    for code, index in used_names.items():
        names[index] = str(categories[code]) if code >= 0 else ""
    return {"start_us": start_us, "end_us": end_us, "width_px": width_px, "names": names, "lanes": out}


def search(tables: TraceTables, layout: Layout, query: str, regex: bool = False) -> dict[str, Any]:
    """Events on the timeline whose name contains `query` (case-insensitive; or matches it as an
    RE2 regular expression), by start time. Raises names.BadPattern for a bad pattern."""
    names = tables.events["name"]
    categories = [str(c) for c in names.cat.categories]
    if regex:
        hit = regex_mask(categories, query)
    else:
        folded = query.casefold()
        hit = np.array([folded in c.casefold() for c in categories], dtype=bool)
    hit_codes = np.append(hit, False)
    codes = names.cat.codes.to_numpy()
    rows = np.flatnonzero(hit_codes[np.where(codes >= 0, codes, len(hit_codes) - 1)] & (layout.lane_of >= 0))
    rows = rows[np.argsort(tables.events["ts"].to_numpy()[rows], kind="stable")]
    shown = rows[:MAX_SEARCH_MATCHES]
    ts = tables.events["ts"].to_numpy()
    dur = tables.events["dur"].to_numpy()
    matches = [clean_row({"id": int(r), "name": str(names.iat[r]), "lane": int(layout.lane_of[r]),
                          "start_us": ts[r], "dur_us": dur[r]}) for r in shown]
    return {"q": query, "total": int(len(rows)), "matches": matches}


def counters(tables: TraceTables, start_us: float, end_us: float, width_px: int) -> list[dict[str, Any]]:
    """Counter series over the window, one value per pixel (see the note above)."""
    buckets = int(max(1, min(width_px, 2000)))
    edges = np.linspace(start_us, end_us, buckets + 1)
    t = edges[:-1].tolist()
    series = []
    events = tables.events
    kernels = events[events["kind"].to_numpy() == Kind.KERNEL]
    if len(kernels):
        device = kernels["device"].to_numpy()
        ks = kernels["ts"].to_numpy()
        ke = ks + kernels["dur"].to_numpy()
        blocks = kernels["blocks_per_sm"].to_numpy()
        for dev in sorted(set(device.tolist())):
            on = device == dev
            busy_s, busy_e = ranges.union(ks[on], ke[on])
            util = ranges.bucket_means(busy_s, busy_e, np.ones(len(busy_s)), edges)
            series.append(_series(f"gpu{dev}_utilization", f"GPU {dev} utilization", "ratio", t, util))
            has = on & np.isfinite(blocks) & (blocks > 0)
            if has.any():
                seg_s, seg_e, level = ranges.sweep_sum(ks[has], ke[has], blocks[has])
                eff = ranges.bucket_means(seg_s, seg_e, np.clip(level, 0.0, 1.0), edges)
                series.append(_series(f"gpu{dev}_sm_efficiency", f"GPU {dev} Est. SM efficiency", "ratio", t, eff))
    memory = tables.memory
    if len(memory):
        for (device_type, device_id), group in memory.groupby(["device_type", "device_id"], sort=True):
            where = "CPU" if device_type == 0 else f"GPU {device_id}"
            ident = "cpu" if device_type == 0 else f"gpu{device_id}"
            for column, label in (("total_allocated", "allocated"), ("total_reserved", "reserved")):
                values = group[column].to_numpy()
                if np.isfinite(values).any():
                    series.append(_series(f"{ident}_memory_{label}", f"{where} memory {label}", "bytes", t,
                                          _bucket_max(group["ts"].to_numpy(), values, edges)))
    trace_counters = tables.counters
    if len(trace_counters):
        for (name, key), group in trace_counters.groupby(["name", "series"], sort=True, observed=True):
            label = str(name) if str(key) in ("", str(name)) else f"{name} {key}"
            series.append(_series(f"counter:{label}", label, "value", t,
                                  _bucket_max(group["ts"].to_numpy(), group["value"].to_numpy(), edges)))
    return series


def _bucket_max(ts: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per bucket, the highest sample in it, else the last sample before it (a step plot)."""
    order = np.argsort(ts, kind="stable")
    ts, values = ts[order], values[order]
    out = np.full(len(edges) - 1, np.nan)
    bucket = np.searchsorted(edges, ts, side="right") - 1
    inside = (bucket >= 0) & (bucket < len(out)) & np.isfinite(values)
    if inside.any():
        np.fmax.at(out, bucket[inside], values[inside])
    before = np.searchsorted(ts, edges[:-1], side="left") - 1
    carried = np.where(before >= 0, values[np.maximum(before, 0)], np.nan)
    return np.where(np.isnan(out), carried, out)


def _series(ident: str, name: str, unit: str, t: list[float], values: np.ndarray) -> dict[str, Any]:
    return {"id": ident, "name": name, "unit": unit, "t_us": t,
            "value": [None if not np.isfinite(v) else round(float(v), 6) for v in values]}


_DETAIL_COLUMNS = ("external_id", "correlation", "device", "stream", "grid", "block", "registers_per_thread",
                   "shared_memory", "blocks_per_sm", "warps_per_sm", "occupancy", "bytes", "input_dims",
                   "input_type", "sequence_number", "fwd_thread_id", "python_id", "python_parent_id",
                   "python_module_id")


def _brief(tables: TraceTables, layout: Layout, row: int, relation: str) -> dict[str, Any]:
    events = tables.events
    return clean_row({"relation": relation, "id": int(row), "name": str(events["name"].iat[row]),
                      "start_us": events["ts"].iat[row], "dur_us": events["dur"].iat[row],
                      "lane": int(layout.lane_of[row]), "row": int(layout.row_of[row])})


def event_links(tables: TraceTables, layout: Layout, tree: OpTree, pairs: flows.Flows, row: int
                ) -> list[dict[str, Any]]:
    """Events tied to `row`: launch call and GPU work (ac2g pairs), operator and parent (operator
    tree), kernels an operator launched, forward/backward operator (fwdbwd pairs)."""
    kind = tables.events["kind"].to_numpy()
    tied = flows.of_event(pairs, row)
    links = [_brief(tables, layout, r, relation) for r, relation in tied if relation in ("launches", "launched by")]
    node = tree.launcher[row]
    if node >= 0:
        links.append(_brief(tables, layout, tree.rows[node], "operator"))
    own = np.flatnonzero(tree.rows == row)
    if len(own) and tree.parent[own[0]] >= 0:
        links.append(_brief(tables, layout, tree.rows[tree.parent[own[0]]], "parent"))
    if len(own):
        launched = np.flatnonzero((tree.launcher == own[0]) & of_kinds(kind, DEVICE_KINDS))
        links += [_brief(tables, layout, r, "launches") for r in launched[:50]]
    links += [_brief(tables, layout, r, relation) for r, relation in tied if relation in ("forward", "backward")]
    return [link for link in links if link["lane"] >= 0]


def event_fields(tables: TraceTables, row: int) -> dict[str, Any]:
    """The recorded fields of one event, absent ones left out."""
    events = tables.events
    fields = {}
    for column in _DETAIL_COLUMNS:
        value = events[column].iat[row]
        if value is None or (isinstance(value, float) and not np.isfinite(value)):
            continue
        if isinstance(value, (int, np.integer)) and value == -1:
            continue
        if isinstance(value, str) and not value:
            continue
        fields[column] = value
    return clean_row(fields)
