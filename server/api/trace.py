"""GET /api/trace/*: the timeline's lanes, windows at any zoom, event details, search, counters,
and the original file."""

from __future__ import annotations

import io
import os
from contextlib import ExitStack
from typing import Any, BinaryIO, Iterator
from urllib.parse import quote

import numpy as np
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from ..analysis import clocks, critical_path, flows, timeline
from ..analysis.callstacks import parse_frame
from ..analysis.names import BadPattern
from ..analysis.records import clean_row
from ..files import open_regular
from ..trace.schema import Kind
from ..trace.tables import TraceTables
from ..provider import TraceProvider, matched_calls
from .deps import Selection, SpanSelection, select, span_of_workers, time_query
from .errors import BadParameter, NotFound, StillLoading, TraceUnreadable
from .models import Frame, StepRange
from .views import View


class Lane(BaseModel):
    id: int
    process: str
    name: str
    kind: str
    rows: int
    events: int
    stack_rows: int = Field(description="How many of the top rows hold Python frames (with_stack traces; else 0)")


class RulerStep(StepRange):
    host_start_us: float = Field(description="Start of the step's ProfilerStep#N on the host (the step's start "
                                 "where there is none)")
    host_end_us: float = Field(description="End of the step's ProfilerStep#N on the host; from there to end_us "
                               "runs GPU work the step launched")
    lane: int | None = Field(description="The lane showing its ProfilerStep#N (the main thread's); null without one")


class Lanes(BaseModel):
    start_us: float
    end_us: float
    lanes: list[Lane]
    steps: list[RulerStep]
    kinds: list[str]
    flow_types: list[str] = Field(description="The flow arrows' types this trace has (ac2g: launch to GPU work, "
                                  "fwdbwd: forward to backward operator), for /api/trace/window's `flows`")
    warnings: list[str]


class Boxes(BaseModel):
    id: list[int]
    start_us: list[float]
    dur_us: list[float]
    row: list[int]
    name: list[int]
    kind: list[int]


class Merged(BaseModel):
    start_us: list[float]
    end_us: list[float]
    row: list[int]
    count: list[int]
    busy_us: list[float]
    kind: list[int]


class WindowFlows(BaseModel):
    """Flow arrows with an end in the window: none listed (only `total`) past 500, and `total`
    is null when the window holds too many to count."""

    total: int | None
    cat: list[str]
    from_id: list[int]
    from_lane: list[int]
    from_row: list[int]
    from_us: list[float]
    to_id: list[int]
    to_lane: list[int]
    to_row: list[int]
    to_us: list[float]


class LaneWindow(BaseModel):
    id: int
    boxes: Boxes
    merged: Merged


class Window(BaseModel):
    start_us: float
    end_us: float
    width_px: int
    names: list[str]
    lanes: list[LaneWindow]
    flows: WindowFlows
    warnings: list[str]


class Link(BaseModel):
    relation: str
    id: int
    name: str
    start_us: float
    dur_us: float
    lane: int
    row: int


class Event(BaseModel):
    id: int
    name: str
    cat: str
    kind: str
    lane: int
    row: int
    start_us: float
    dur_us: float
    step: str | None
    fields: dict[str, int | float | str] = Field(description="The event's recorded args (external_id, correlation, "
                                                 "device, stream, grid, block, input_dims, ...), absent ones left out")
    frames: list[Frame]
    links: list[Link]
    warnings: list[str]


class Match(BaseModel):
    id: int
    name: str
    lane: int
    start_us: float
    dur_us: float


class Search(BaseModel):
    q: str
    total: int
    matches: list[Match]
    warnings: list[str]


class CollectiveCall(BaseModel):
    """The collective on one shown worker: the event shown for it (None when the worker has none)."""

    worker: str
    id: int | None
    lane: int | None
    row: int | None
    start_us: float | None = Field(description="On the worker's own clock")
    dur_us: float | None


class Collective(BaseModel):
    name: str
    group: str
    matched: bool = Field(description="Whether another shown worker's call was matched with the picked one")
    calls: list[CollectiveCall] = Field(description="One per shown worker, in the order asked")
    warnings: list[str]


class PathSegment(BaseModel):
    kind: str = Field(description="host (an operator, or host time between them: id null), launch (the launch call "
                      "until its GPU work starts), gpu (a kernel, memcpy or memset), gpu_gap (between GPU work), "
                      "sync (the waited GPU work's end until the synchronising call returns)")
    bound: str = Field(description=f"What the time is counted as: one of {', '.join(critical_path.BOUNDS)}")
    start_us: float
    end_us: float
    id: int | None = Field(description="The event on the path (the call, for launch and sync)")
    lane: int | None
    row: int | None
    to_id: int | None = Field(None, description="launch and sync: the GPU work launched or waited for")
    sync_event_id: int | None = Field(None, description="sync: the CUDA sync event recorded for the call, if any")


class CriticalPath(BaseModel):
    step: str
    start_us: float
    end_us: float
    total_us: float
    steps: list[str] = Field(description="The trace's steps, to pick another")
    segments: list[PathSegment] = Field(description="In time order; they tile the step")
    breakdown: dict[str, float] = Field(description="Time per bound (`cpu_us`, `data_loading_us`, "
                                        "`launch_overhead_us`, `gpu_compute_us`, `communication_us`, "
                                        "`kernel_overhead_us`, `sync_us`); they sum to total_us")
    approximated: list[str] = Field(description="What the path had to guess (no CUDA sync events, ...); empty: none")
    warnings: list[str]


class Series(BaseModel):
    id: str
    name: str
    unit: str
    t_us: list[float]
    value: list[float | None]


class Counters(BaseModel):
    series: list[Series]
    warnings: list[str]


router = APIRouter(tags=["trace"])


def has_events(tables: TraceTables) -> bool:
    return len(tables.events) > 0


VIEW = View("trace", router, has_events, ("..analysis.timeline", "..analysis.clocks"))


def _range(layout: timeline.Layout, start_us: float | None, end_us: float | None) -> tuple[float, float]:
    lo, hi = layout.extent
    start = lo if start_us is None else start_us
    end = hi if end_us is None else end_us
    if not (np.isfinite(start) and np.isfinite(end)) or end <= start:
        raise BadParameter(f"end_us must be after start_us (got {start}..{end})")
    return start, end


_START = time_query("Window start, absolute trace microseconds (default: the trace's start)")
_END = time_query("Window end, absolute trace microseconds (default: the trace's end)")
_WIDTH = Query(1000, ge=1, le=20000, description="Width of the drawing in pixels")


@router.get("/api/trace/lanes", response_model=Lanes)
def get_lanes(sel: Selection = Depends(select)) -> dict[str, Any]:
    """The timeline's lanes (process, thread or stream, rows, event count), extent, steps and flow types."""
    p = sel.provider
    layout = p.layout()
    return {
        "start_us": layout.extent[0], "end_us": layout.extent[1], "lanes": layout.lanes,
        "steps": p.memo(("ruler_steps",), lambda: timeline.ruler_steps(sel.tables.events, layout, p.steps())),
        "kinds": timeline.KINDS, "flow_types": p.memo(("flow_types",), lambda: flows.types_of(p.flows())),
        "warnings": list(sel.tables.warnings),
    }


@router.get("/api/trace/window", response_model=Window)
def get_window(sel: Selection = Depends(select),
               start_us: float | None = _START, end_us: float | None = _END, width_px: int = _WIDTH,
               lanes: str | None = Query(None, description="Comma-separated lane ids (default: all)"),
               flow_types: str | None = Query(None, alias="flows", max_length=200, description="Comma-separated "
                                              f"flow types to list, of {flows.CATEGORIES}, or none (default: all)")
               ) -> dict[str, Any]:
    """Per lane, the events wide enough to see at this resolution, and merged blocks for the rest;
    the flow arrows of the asked types (launch to GPU work, forward to backward operator) with an
    end in the window."""
    p = sel.provider
    layout = p.layout()
    start, end = _range(layout, start_us, end_us)
    wanted = None
    if lanes:
        try:
            wanted = [int(part) for part in lanes.split(",") if part.strip()]
        except ValueError:
            raise BadParameter(f"lanes: expected comma-separated lane ids, got {lanes!r}") from None
    types = None if flow_types is None else [t.strip() for t in flow_types.split(",") if t.strip() not in ("", "none")]
    unknown = [t for t in types or [] if t not in flows.CATEGORIES]
    if unknown:
        raise BadParameter(f"flows: unknown flow type {unknown[0]!r} (known: {', '.join(flows.CATEGORIES)})")
    arrows = flows.window_flows(sel.tables, p.flows(), layout.lane_of, layout.row_of, start, end, types)
    answer = timeline.window(sel.tables, layout, start, end, width_px, wanted, p.blocks())
    return {**answer, "flows": arrows, "warnings": []}


@router.get("/api/trace/event", response_model=Event)
def get_event(request: Request, sel: Selection = Depends(select),
              id: int = Query(..., description="Event id, as in window boxes and search matches", examples=[0])
              ) -> dict[str, Any]:
    """One event: its fields, step, call stack and the events it is tied to."""
    p = sel.provider
    layout = p.layout()
    events = sel.tables.events
    if not (0 <= id < len(events)) or layout.lane_of[id] < 0:
        raise NotFound(f"this trace has no timeline event {id}")
    tree, steps = p.op_tree(), p.steps()
    ts = float(events["ts"].iat[id])
    inside = np.flatnonzero((steps.starts <= ts) & (ts < steps.ends))
    frames: list[dict[str, Any]] = []
    if events["kind"].iat[id] == Kind.CPU_OP:  # only operators have call stacks
        _, stacks = p.op_instances()
        if stacks.of_row[id] >= 0:
            frames = request.app.state.sources.with_paths([parse_frame(f) for f in stacks.frames[stacks.of_row[id]]])
    return clean_row({
        "id": id, "name": str(events["name"].iat[id]), "cat": str(events["cat"].iat[id]),
        "kind": timeline.KINDS[int(events["kind"].iat[id])], "lane": int(layout.lane_of[id]),
        "row": int(layout.row_of[id]), "start_us": ts, "dur_us": float(events["dur"].iat[id]),
        "step": steps.names[inside[0]] if len(inside) else None,
        "fields": timeline.event_fields(sel.tables, id),
        "frames": frames,
        "links": timeline.event_links(sel.tables, layout, tree, p.flows(), id),
        "warnings": [],
    })


@router.get("/api/trace/search", response_model=Search)
def get_search(sel: Selection = Depends(select),
               q: str = Query(..., min_length=1, max_length=1000,
                              description="Text the name contains (case-insensitive)", examples=["ProfilerStep"]),
               regex: bool = Query(False, description="Treat q as an RE2 regular expression (no backreferences "
                                   "or lookaround; linear time, so no pattern can stall the server)")
               ) -> dict[str, Any]:
    """Timeline events whose name matches, by start time (the first 1000, and the total)."""
    layout = sel.provider.layout()
    try:
        found = sel.provider.memo(("search", q, regex), lambda: timeline.search(sel.tables, layout, q, regex))
    except BadPattern as exc:
        raise BadParameter(f"q: not a valid RE2 regular expression ({exc})") from None
    return {**found, "warnings": []}


MAX_SHOWN_WORKERS = 64  # web/static/js/lib/rankview.js's MAX_RANKS


@router.get("/api/trace/collective", response_model=Collective)
def get_collective(sel: Selection = Depends(select),
                   id: int = Query(..., description="A collective's event on `worker`: a communication kernel, "
                                   "its nccl:* / gloo:* / record_param_comms host op or its GPU nccl:* annotation",
                                   examples=[0]),
                   workers: str = Query("", max_length=20000, description="Comma-separated workers shown "
                                        "together (the picked `worker` is added when missing; default: it alone)")
                   ) -> dict[str, Any]:
    """The same collective on every shown worker, matched as the Distributed view matches calls
    (by call order per process group), and the event that shows it there (the same side as
    the picked one: a kernel for a kernel or GPU annotation, else the host op)."""
    events = sel.tables.events
    if not (0 <= id < len(events)):
        raise NotFound(f"this trace has no timeline event {id}")
    name = str(events["name"].iat[id])
    kind = events["kind"].iat[id]
    on_gpu = kind in (Kind.KERNEL, Kind.GPU_USER_ANNOTATION)
    if not clocks.is_collective_event(name, kind == Kind.KERNEL):
        raise NotFound(f"event {id} ({name}) is no collective: pick a communication kernel or its host op")
    shown = list(dict.fromkeys([sel.worker, *(w.strip() for w in workers.split(",") if w.strip())]))
    if len(shown) > MAX_SHOWN_WORKERS:
        raise BadParameter(f"workers: at most {MAX_SHOWN_WORKERS} workers are shown together (got {len(shown)})")
    unknown = [w for w in shown if w not in sel.run_state.run.workers]
    if unknown:
        raise NotFound(f"run {sel.run!r} has no worker {unknown[0]!r}")
    peers = span_of_workers(sel.run_state, sel.span)
    if peers.loading is not None:
        raise StillLoading(peers.loading)
    ready = {w: peers.ready[w] for w in shown if w in peers.ready}
    with ExitStack() as pinned:
        for provider in ready.values():
            pinned.enter_context(provider.use())
        picked = SpanSelection(sel.run, sel.span, ready, {w: peers.files[w] for w in ready}, [])
        aligned = matched_calls(ready, picked.key)
        order = list(ready)
        own = sel.provider.summary().calls
        row = clocks.call_of_event(own, float(events["ts"].iat[id]), float(events["dur"].iat[id]), on_gpu)
        if row is None:
            raise NotFound(f"event {id} ({name}) belongs to no collective call of worker {sel.worker!r}")
        rows = clocks.same_collective(aligned, order.index(sel.worker), row)
        calls = [_shown_call(w, ready.get(w), rows.get(order.index(w)) if w in ready else None, on_gpu)
                 for w in shown]
    return {"name": str(own["name"].iat[row]), "group": str(own["group"].iat[row]), "matched": len(rows) > 1,
            "calls": calls, "warnings": [w for w in peers.warnings if any(f"{n!r}" in w for n in shown)]}


def _shown_call(worker: str, provider: TraceProvider | None, row: int | None, on_gpu: bool) -> dict[str, Any]:
    """A shown worker's event for its call `row` (None: not loaded, or no matched call)."""
    event = None
    if provider is not None and row is not None:
        event = clocks.event_of_call(provider.tables(), provider.summary().calls.iloc[row], on_gpu)
    if event is None:
        return {"worker": worker, "id": None, "lane": None, "row": None, "start_us": None, "dur_us": None}
    events, layout = provider.tables().events, provider.layout()
    return {"worker": worker, "id": event, "lane": int(layout.lane_of[event]), "row": int(layout.row_of[event]),
            "start_us": float(events["ts"].iat[event]), "dur_us": float(events["dur"].iat[event])}


@router.get("/api/trace/critical_path", response_model=CriticalPath)
def get_critical_path(sel: Selection = Depends(select),
                      step: str | None = Query(None, max_length=200, examples=["2"], description="A step's "
                                               "name, as in /api/trace/lanes' steps (default: the first)")
                      ) -> dict[str, Any]:
    """The chain of host work, launches, GPU work and syncs that sets a step's time, with that time
    by what bound it (CPU, data loading, launch overhead, GPU compute, communication, kernel-to-kernel
    overhead, sync)."""
    p = sel.provider
    steps = p.steps()
    name = steps.names[0] if step is None else step
    if name not in steps.names:
        raise NotFound(f"this trace has no step {name!r} (steps: {', '.join(steps.names)})")
    layout = p.layout()

    def compute() -> dict[str, Any]:
        events = sel.tables.events
        graph = p.memo(("critical_path_graph",), lambda: critical_path.build_graph(events))
        return critical_path.step_critical_path(events, graph, steps, steps.names.index(name))

    path = p.memo(("critical_path", name), compute)
    segments = [{**{k: v for k, v in s.items() if k != "event_id"}, "id": s["event_id"],
                 **_place(layout, s["event_id"])} for s in path["segments"]]
    return {**path, "segments": segments, "steps": steps.names, "warnings": []}


def _place(layout: timeline.Layout, row: int | None) -> dict[str, int | None]:
    """An event's lane and row on the timeline (None: no event, or one the timeline does not show)."""
    if row is None or layout.lane_of[row] < 0:
        return {"lane": None, "row": None}
    return {"lane": int(layout.lane_of[row]), "row": int(layout.row_of[row])}


@router.get("/api/trace/counters", response_model=Counters)
def get_counters(sel: Selection = Depends(select),
                 start_us: float | None = _START, end_us: float | None = _END, width_px: int = _WIDTH
                 ) -> dict[str, Any]:
    """Counter tracks over the window, one value per pixel: GPU utilization, SM efficiency, memory, trace counters."""
    start, end = _range(sel.provider.layout(), start_us, end_us)
    return {"series": timeline.counters(sel.tables, start, end, width_px), "warnings": []}


@router.get("/api/trace/raw", response_class=StreamingResponse,
            responses={200: {"description": "The trace file as recorded (JSON, or gzip for .json.gz)",
                             "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
def get_raw(sel: Selection = Depends(select)) -> StreamingResponse:
    """The original trace file, as a download."""
    loaded = sel.state.file
    # Opened before answering: a file removed or rewritten since it was loaded gets an error,
    # not a 200 that ends after zero bytes.
    try:
        fh = open_regular(loaded.path)
    except FileNotFoundError:
        raise NotFound("the trace file is gone: it was removed or renamed since it was loaded") from None
    except OSError as exc:
        raise TraceUnreadable(f"the trace file cannot be read now ({exc.strerror or exc})") from None
    size = _size_of(fh)
    if size is not None and size != loaded.size:
        fh.close()
        raise StillLoading("the trace file changed since it was loaded; it is read again within a few seconds")
    name = os.path.basename(loaded.path.rstrip("/")) or "trace.json"
    # surrogateescape: a name whose bytes are not UTF-8 goes out as those bytes, percent-encoded
    headers = {"Content-Disposition": f"attachment; filename*=UTF-8''{quote(name, errors='surrogateescape')}"}
    if size is not None:
        headers["Content-Length"] = str(size)

    def chunks() -> Iterator[bytes]:
        with fh:
            while block := fh.read(1 << 20):
                yield block
    return StreamingResponse(chunks(), media_type="application/octet-stream", headers=headers)


def _size_of(fh: BinaryIO) -> int | None:
    try:
        return os.fstat(fh.fileno()).st_size
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return getattr(fh, "size", None)  # fsspec files know their object's size
