"""GET /api/diff: two selections (run, worker, span each) compared per training step.

The Diff view shows for every readable trace: its baseline is the run picked in the left panel,
the candidate any run, worker and span of the logdir (another span or worker of the same run too).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from ..analysis.diff import Grouping, Side, compare, side
from ..analysis.modules import module_view
from .deps import Selection, select_pair
from .views import View, every_trace


class Picked(BaseModel):
    run: str
    worker: str
    span: str


class StepCount(BaseModel):
    base: int
    new: int


class Steps(BaseModel):
    """The average step of each side and new - base, with the Overview's keys: total_us and each
    category's *_us (kernel, memcpy, memset, communication, runtime, dataloader, cpu_exec, other)."""

    base: dict[str, float]
    new: dict[str, float]
    delta: dict[str, float]


class GpuRatios(BaseModel):
    utilization_ratio: float | None
    sm_efficiency_ratio: float | None
    achieved_occupancy_ratio: float | None
    tensor_core_ratio: float | None


class Gpu(BaseModel):
    base: GpuRatios
    new: GpuRatios
    delta: GpuRatios


class Memory(BaseModel):
    base_peak_bytes: int | None
    new_peak_bytes: int | None
    delta_bytes: int | None


Status = Literal["added", "removed", "increased", "decreased", "unchanged"]


class KernelChange(BaseModel):
    name: str
    status: Status
    base_calls: float
    new_calls: float
    base_device_us: float
    new_device_us: float
    delta_device_us: float


class OperatorChange(KernelChange):
    """An operator (`input_shape` when grouped by name and input shapes) or a module (`name` is its path)."""

    input_shape: str | None = None
    base_host_us: float
    new_host_us: float
    delta_host_us: float


class Recommendations(BaseModel):
    resolved: list[str]
    new: list[str]


class Diff(BaseModel):
    base: Picked
    new: Picked
    step_delta_ratio: float | None
    verdict: Literal["regression", "improvement", "unchanged"]
    step_count: StepCount
    steps: Steps
    gpu: Gpu
    memory: Memory
    operators: list[OperatorChange]
    kernels: list[KernelChange]
    modules: list[OperatorChange]
    recommendations: Recommendations
    warnings: list[str]


router = APIRouter(tags=["diff"])
VIEW = View("diff", router, every_trace, ("..analysis.diff",))


def _side(sel: Selection, group_by: Grouping) -> Side:
    p = sel.provider

    def compute() -> Side:
        tables, tree = p.tables(), p.op_tree()
        # The Module view's answer, under its key: computed once for both views.
        modules = p.memo(("modules",), lambda: module_view(tables, tree, p.flows()))["modules"]
        return side(tables, p.overview(), tree, modules, group_by)
    return p.memo(("diff side", group_by), compute)


@router.get("/api/diff", response_model=Diff, response_model_exclude_unset=True)
def get_diff(pair: tuple[Selection, Selection] = Depends(select_pair),
             group_by: Literal["name", "name_shape"] = Query("name", description="operators by name, or name and input shapes"),
             limit: int | None = Query(None, ge=1, description="at most this many rows per table (default: all)")
             ) -> dict[str, Any]:
    """The candidate (`new_*`) against the baseline (`base_*`, else `run`/`worker`/`span`) per step: step_delta_ratio, verdict,
    average step breakdown (us) of both and its delta, GPU ratios, memory peak, operators, kernels
    and modules matched (status, calls and times per step, largest change first), and the
    recommendations resolved and new."""
    base, new = pair
    picked = {key: {"run": s.run, "worker": s.worker, "span": s.span} for key, s in (("base", base), ("new", new))}
    out = {**picked, **compare(_side(base, group_by), _side(new, group_by), limit)}
    if picked["base"] == picked["new"]:
        out["warnings"] = [*out["warnings"], "The candidate is the baseline itself: pick another with new_run, "
                                             "new_worker or new_span."]
    return out
