"""GET /api/snapshot*: a run's CUDA allocator snapshots (`*.pickle` next to its traces): totals,
the active memory timeline, the allocator's segments at a point of the history, and the top
allocation sites. Their older paths, /api/memory/snapshot*, redirect here."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from ..logdir import SnapshotFile
from ..snapshot import SnapshotError
from ..snapshot.cache import SnapshotCache
from ..snapshot.worker import Loaded
from ..trace.tables import TraceTables
from .deps import add_moved_route, get_store
from .errors import BadParameter, NotFound, SnapshotRefused
from .views import View


class SnapshotInfo(BaseModel):
    name: str
    size_bytes: int


class Oom(BaseModel):
    device: int
    index: int = Field(description="Trace entry index of the OOM event")
    time_us: float | None
    size_bytes: int | None = Field(description="The allocation that failed")
    device_free_bytes: int | None = Field(description="What CUDA still had free")


class Ooms(BaseModel):
    count: int
    events: list[Oom]


class DeviceSummary(BaseModel):
    """One device's totals over its final segments, and its recorded history."""

    device: int
    segments: int
    segment_types: dict[str, int] = Field(description="Segments per allocator pool, e.g. large, small")
    reserved_bytes: int
    allocated_bytes: int
    pending_free_bytes: int
    active_bytes: int
    inactive_bytes: int
    requested_bytes: int
    largest_inactive_block_bytes: int
    fragmentation_ratio: float | None
    trace_entries: int
    actions: dict[str, int] = Field(description="History entries per action (alloc, free_requested, ...)")
    first_time_us: float | None
    last_time_us: float | None


AllocatorSetting = str | int | float | bool | None


class Summary(BaseModel):
    run: str
    file: str
    files: list[SnapshotInfo]
    devices: list[int]
    segments: int
    reserved_bytes: int
    allocated_bytes: int
    active_bytes: int
    inactive_bytes: int
    pending_free_bytes: int
    requested_bytes: int
    largest_inactive_block_bytes: int
    fragmentation_ratio: float | None
    trace_entries: int
    history: bool
    ooms: Ooms
    per_device: list[DeviceSummary]
    allocator_settings: dict[str, AllocatorSetting] = Field(
        description="The allocator's settings as the snapshot records them (PYTORCH_CUDA_ALLOC_CONF and its parts)")
    warnings: list[str]


class SnapshotFrame(BaseModel):
    file: str | None
    line: int | None
    function: str


class Site(BaseModel):
    """An allocation site: the first frame in user code, else the aten operator, else none."""

    site: str
    file: str | None
    line: int | None
    function: str | None
    op: str | None
    frames: list[SnapshotFrame]


class Band(BaseModel):
    """One allocation drawn as its own band; `first`/`last` are positions in `x` where it is live."""

    allocation: int
    address: int
    size_bytes: int
    block_bytes: int
    stream: int
    first: int
    last: int
    start_index: int
    end_index: int | None
    start_time_us: float | None
    end_time_us: float | None
    alloc_recorded: bool
    site: int = Field(description="Index into `sites`")


class Peak(BaseModel):
    index: int
    bytes: int
    time_us: float | None


class Timeline(BaseModel):
    device: int
    entries: int
    x_axis: str
    x: list[int]
    time_us: list[float | None]
    total_bytes: list[int]
    other_bytes: list[int]
    bands: list[Band]
    sites: list[Site]
    peak: Peak | None
    allocations: int
    other_allocations: int
    warnings: list[str]


class Entry(BaseModel):
    """The history entry the state is shown after."""

    index: int
    action: str
    address: int
    size_bytes: int
    stream: int
    time_us: float | None
    device_free_bytes: int | None
    site: int = Field(description="Index into `sites`")


class StateTotals(BaseModel):
    segments: int
    reserved_bytes: int
    allocated_bytes: int
    pending_free_bytes: int
    inactive_bytes: int
    requested_bytes: int
    active_bytes: int
    largest_inactive_bytes: int
    fragmentation_ratio: float | None


class Block(BaseModel):
    """A block of a segment; active blocks also have `requested_bytes`, `alloc_recorded` and `site`."""

    address: int
    size_bytes: int
    state: Literal["active_allocated", "active_pending_free", "inactive"]
    requested_bytes: int | None = None
    alloc_recorded: bool | None = None
    site: int | None = Field(None, description="Index into `sites`")


class Segment(BaseModel):
    address: int
    total_bytes: int
    stream: int
    segment_type: str | None
    is_expandable: bool
    allocated_bytes: int
    pending_free_bytes: int
    inactive_bytes: int
    requested_bytes: int
    largest_inactive_bytes: int
    fragmentation_ratio: float | None
    blocks: list[Block] | None = Field(description="null for smaller segments past the block budget")


class StateOom(BaseModel):
    index: int
    time_us: float | None
    size_bytes: int
    device_free_bytes: int | None
    before: bool = Field(description="Whether it happened at or before this point")


class State(BaseModel):
    device: int
    index: int
    entries: int
    entry: Entry | None
    time_us: float | None
    totals: StateTotals
    segments: list[Segment]
    sites: list[Site]
    ooms: list[StateOom]
    approximate: bool
    warnings: list[str]


class SiteRow(Site):
    calls: int
    total_bytes: int
    max_bytes: int
    live_bytes: int
    peak_bytes: int


class Sites(BaseModel):
    devices: list[int]
    by: Literal["total_bytes", "peak_bytes", "live_bytes", "calls"]
    rows: list[SiteRow]
    allocations: int
    total_bytes: int
    warnings: list[str]


@dataclass
class Picked:
    run: str
    file: SnapshotFile
    files: list[SnapshotFile]
    cache: SnapshotCache

    def call(self, method: Callable[..., Any], *args: Any) -> Any:
        """`method` of the loaded snapshot (worker.Loaded), run where it lives; a refusal is a 422."""
        try:
            return self.cache.call(self.file.path, self.file.size, self.file.mtime, method, *args)
        except SnapshotError as exc:
            raise SnapshotRefused(f"{self.file.name}: {exc}") from None

    def device(self, device: int | None) -> int:
        """The asked device, checked, or the first with segments or history."""
        have = self.devices()
        if device is None:
            return have[0] if have else 0
        if device not in have:
            raise NotFound(f"snapshot {self.file.name!r} has nothing for device {device} "
                           f"(it has: {', '.join(map(str, have)) or 'no devices'})")
        return device

    def devices(self) -> list[int]:
        return self.call(Loaded.devices)


def select_snapshot(request: Request,
                    run: str = Query(..., description="Run name, as listed by /api/runs"),
                    file: str | None = Query(None, description="Snapshot file name, as listed by /api/runs "
                                             "(default: the run's first)")) -> Picked:
    """Dependency: the run's snapshot, loaded (through the restricted unpickler, in a process of its own)."""
    state = get_store(request).run(run)
    if state is None:
        raise NotFound(f"unknown run {run!r}")
    files = list(state.run.snapshots)
    if not files:
        raise NotFound(f"run {run!r} has no memory snapshots (*.pickle files next to its traces)")
    chosen = files[0] if file is None else state.run.snapshot(file)
    if chosen is None:
        raise NotFound(f"run {run!r} has no snapshot {file!r} (it has: {', '.join(f.name for f in files)})")
    return Picked(run, chosen, files, _cache(request))


_CACHE_LOCK = threading.Lock()


def _cache(request: Request) -> SnapshotCache:
    """The app's loaded snapshots, made on the first request for one (not with the app: the snapshot
    modules would be imported before the server's start needs them)."""
    state = request.app.state
    with _CACHE_LOCK:
        if getattr(state, "snapshots", None) is None:
            state.snapshots = SnapshotCache(state.settings.max_snapshot_bytes,
                                            cpu_seconds=state.settings.snapshot_cpu_seconds)
        return state.snapshots


router = APIRouter(tags=["snapshot"])


def no_trace(tables: TraceTables) -> bool:
    return False  # a view of the run's snapshot files, never of a trace


# A view of the run's snapshot files: the registry's entry says so (of_run).
VIEW = View("snapshot", router, no_trace, ("..snapshot", "..snapshot.unpickle"))

_DEVICE = Query(None, ge=0, description="CUDA device index (default: the first in the snapshot)")


@router.get("/api/snapshot", response_model=Summary)
def get_snapshot(picked: Picked = Depends(select_snapshot)) -> dict[str, Any]:
    """Totals over the snapshot and per device: reserved, allocated, inactive (fragmentation),
    awaiting free, history length and OOM events; and the run's snapshot files."""
    return {"run": picked.run, "file": picked.file.name,
            "files": [{"name": f.name, "size_bytes": f.size} for f in picked.files], **picked.call(Loaded.summary)}


@router.get("/api/snapshot/timeline", response_model=Timeline)
def get_snapshot_timeline(picked: Picked = Depends(select_snapshot), device: int | None = _DEVICE,
                 max_allocations: int = Query(150, ge=1, le=1000, description="Allocations drawn as their own band"),
                 max_points: int = Query(1500, ge=10, le=10000, description="Points along the history")
                 ) -> dict[str, Any]:
    """Live allocations over the recorded history (x: trace entry index), the largest as bands,
    the rest summed as `other_bytes`; each band's size, times and allocation site."""
    return picked.call(Loaded.timeline, picked.device(device), max_allocations, max_points)


@router.get("/api/snapshot/state", response_model=State, response_model_exclude_unset=True)
def get_snapshot_state(picked: Picked = Depends(select_snapshot), device: int | None = _DEVICE,
              at: int | None = Query(None, ge=-1, description="Trace entry index (-1: before the history; "
                                     "default: the snapshot's own final state)")) -> dict[str, Any]:
    """The allocator's segments and their blocks (allocated, inactive, awaiting free) after entry `at`."""
    dev = picked.device(device)
    entries = picked.call(Loaded.entries, dev)
    if at is not None and at >= entries:
        raise BadParameter(f"at: the history of device {dev} has {entries} entries (0..{entries - 1})")
    found = picked.call(Loaded.state, dev, at)
    return {k: v for k, v in found.items() if k != "at"}


@router.get("/api/snapshot/sites", response_model=Sites)
def get_snapshot_sites(picked: Picked = Depends(select_snapshot), device: int | None = _DEVICE,
              n: int = Query(20, ge=1, le=500, description="How many sites"),
              by: Literal["total_bytes", "peak_bytes", "live_bytes", "calls"] = Query(
                  "total_bytes", description="Order: bytes over all allocations, at the peak, still live, or calls")
              ) -> dict[str, Any]:
    """The top allocation sites (first frame in user code, else the operator) with their stacks."""
    return picked.call(Loaded.sites, None if device is None else picked.device(device), n, by)


for _part in ("", "/timeline", "/state", "/sites"):
    add_moved_route(router, f"/api/memory/snapshot{_part}", f"/api/snapshot{_part}")
