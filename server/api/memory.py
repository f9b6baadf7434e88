"""GET /api/memory/*: memory devices, the allocated/reserved curve, allocation events and
per-operator statistics of one trace (from its `[memory]` records)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from ..analysis import memory, memory_curve
from ..analysis.records import clean_row
from ..trace.tables import TraceTables
from .deps import Selection, select, time_query
from .errors import BadParameter, NotFound
from .models import StepRange
from .views import View

MAX_EVENT_ROWS = 20_000


class Device(BaseModel):
    device: str
    label: str
    records: int
    has_totals: bool
    has_addresses: bool


class Devices(BaseModel):
    devices: list[Device]
    default: str | None
    start_us: float | None
    end_us: float | None
    steps: list[StepRange]
    warnings: list[str]


class Point(BaseModel):
    bytes: int
    t_us: float


class AtStart(BaseModel):
    t_us: float
    allocated_bytes: int | None
    reserved_bytes: int | None


class Curve(BaseModel):
    device: str | None
    records: int
    points: int
    t_us: list[float]
    allocated_bytes: list[int | None]
    reserved_bytes: list[int | None]
    peak_allocated: Point | None
    peak_reserved: Point | None
    at_start: AtStart | None
    capacity_bytes: int | None
    reason: str | None
    warnings: list[str]


class EventRow(BaseModel):
    operator: str | None
    size_bytes: int
    alloc_us: float | None
    free_us: float | None
    lifetime_us: float | None
    addr: int
    op_id: int | None
    caller_id: int | None


class Events(BaseModel):
    device: str | None
    total: int
    rows: list[EventRow]
    reason: str | None
    warnings: list[str]


class StatRow(BaseModel):
    name: str
    calls: int
    size_increase_bytes: int
    self_size_increase_bytes: int
    allocation_count: int
    self_allocation_count: int
    allocation_size_bytes: int
    self_allocation_size_bytes: int


class Stats(BaseModel):
    device: str | None
    rows: list[StatRow]
    warnings: list[str]


router = APIRouter(tags=["memory"])


def has_memory_records(tables: TraceTables) -> bool:
    return len(tables.memory) > 0


VIEW = View("memory", router, has_memory_records, ("..analysis.memory_curve", "..analysis.memory"))

_DEVICE = Query(None, description="Device, as listed by /api/memory/devices (default: the first GPU)",
                examples=["GPU0"])
_START = time_query("Range start, absolute trace microseconds (default: open)")
_END = time_query("Range end, absolute trace microseconds (default: open)")


def _devices(sel: Selection) -> list[dict[str, Any]]:
    return sel.provider.memo(("memory_devices",), lambda: memory.devices(sel.tables))


def _device(sel: Selection, device: str | None) -> str | None:
    """The asked device, checked, or the default one; None when the trace has no memory records."""
    found = _devices(sel)
    if device is None:
        return memory.default_device(found)
    names = [d["device"] for d in found]
    if device not in names:
        have = ", ".join(names) if names else "none: it was not profiled with profile_memory=True"
        raise NotFound(f"this trace has no memory records for device {device!r} (it has: {have})")
    return device


def _range(start_us: float | None, end_us: float | None) -> None:
    if start_us is not None and end_us is not None and end_us < start_us:
        raise BadParameter(f"end_us must not be before start_us (got {start_us}..{end_us})")


def _placed(sel: Selection) -> memory.Attribution:
    return sel.provider.memo(("memory_attribution",), lambda: memory.attribution(sel.tables, sel.provider.op_tree()))


@router.get("/api/memory/devices", response_model=Devices)
def get_devices(sel: Selection = Depends(select)) -> dict[str, Any]:
    """The devices with memory records (and whether they carry totals and addresses), the default
    one, the records' time extent and the steps."""
    found = _devices(sel)
    ts = sel.tables.memory["ts"]
    steps = sel.provider.steps()
    return clean_row({
        "devices": found, "default": memory.default_device(found),
        "start_us": ts.min() if len(ts) else None, "end_us": ts.max() if len(ts) else None,
        "steps": [clean_row({"step": n, "start_us": s, "end_us": e})
                  for n, s, e in zip(steps.names, steps.starts, steps.ends)],
        "warnings": [] if found else ["This trace has no memory records: profile with profile_memory=True."],
    })


@router.get("/api/memory/curve", response_model=Curve)
def get_curve(sel: Selection = Depends(select), device: str | None = _DEVICE,
              start_us: float | None = _START, end_us: float | None = _END,
              width_px: int = Query(1000, ge=1, le=memory_curve.MAX_CURVE_PX, description="Width of the plot in pixels")
              ) -> dict[str, Any]:
    """Allocated and reserved bytes over time (a step plot, thinned per pixel keeping every peak)."""
    _range(start_us, end_us)
    name = _device(sel, device)
    if name is None:
        return {"device": None, "records": 0, "points": 0, "t_us": [], "allocated_bytes": [], "reserved_bytes": [],
                "peak_allocated": None, "peak_reserved": None, "at_start": None, "capacity_bytes": None,
                "reason": "this trace has no memory records (profile with profile_memory=True)", "warnings": []}
    found = sel.provider.memo(("memory_curve", name, start_us, end_us, width_px),
                              lambda: memory_curve.curve(sel.tables, name, start_us, end_us, width_px))
    return {**found, "warnings": []}


@router.get("/api/memory/events", response_model=Events)
def get_events(sel: Selection = Depends(select), device: str | None = _DEVICE,
               start_us: float | None = _START, end_us: float | None = _END,
               limit: int = Query(MAX_EVENT_ROWS, ge=1, le=MAX_EVENT_ROWS,
                                  description="At most this many rows, the earliest first")) -> dict[str, Any]:
    """Allocations paired with their frees (operator, size, times, lifetime), in a time range."""
    _range(start_us, end_us)
    name = _device(sel, device)
    if name is None:
        return {"device": None, "total": 0, "rows": [], "reason": "this trace has no memory records", "warnings": []}
    # Rows are made for the first `limit` only: all of the Llama trace's 160 k took 3.7 s.
    found = sel.provider.memo(("memory_events", name, start_us, end_us, limit),
                              lambda: memory.memory_events(sel.tables, sel.provider.op_tree(), name, start_us, end_us,
                                                           _placed(sel), limit))
    total = found["total"]
    warnings = [] if total <= limit else [
        f"Showing the first {limit:,} of {total:,} allocations: select a shorter range to see the rest."]
    return {**found, "warnings": warnings}


@router.get("/api/memory/stats", response_model=Stats)
def get_stats(sel: Selection = Depends(select), device: str | None = _DEVICE,
              start_us: float | None = _START, end_us: float | None = _END) -> dict[str, Any]:
    """Per operator: calls, size increase, allocation count and size, each also counting only the
    operator's own records (self)."""
    _range(start_us, end_us)
    name = _device(sel, device)
    if name is None:
        return {"device": None, "rows": [], "warnings": []}
    return sel.provider.memo(("memory_stats", name, start_us, end_us),
                             lambda: memory.memory_stats(sel.tables, sel.provider.op_tree(), name, start_us, end_us,
                                                         _placed(sel)))
