"""GET /api/overview: step-time breakdown, GPU summary, recommendations."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from ..analysis import overview as overview_analysis
from ..analysis import steps as steps_analysis
from ..analysis.overview import overview
from .deps import Memo, Selection, get_memo, select, span_of_workers
from .distributed import distributed_of
from .operators import op_tree
from .views import View, about_of, every_trace


class StepCosts(BaseModel):
    total_us: float
    kernel_us: float
    memcpy_us: float
    memset_us: float
    communication_us: float
    runtime_us: float
    dataloader_us: float
    cpu_exec_us: float
    other_us: float


class Step(StepCosts):
    step: str
    start_us: float
    end_us: float


class Gpu(BaseModel):
    device: int
    name: str | None
    memory_bytes: int | None
    compute_capability: str | None
    utilization_ratio: float | None
    sm_efficiency_ratio: float | None
    achieved_occupancy_ratio: float | None
    tensor_core_ratio: float | None


# A finding's named numbers: each rule has its own (the view's note lists them).
Measure = bool | int | float | str | list[int] | list[float] | list[str] | None


class Evidence(BaseModel):
    """Where a finding shows: a step, an operator or kernel call, a GPU, a collective, a graph
    break, a memory peak. `kind` and `label` always; the place (`start_us`/`end_us` on the trace
    clock, `event_id`, `step`, `device`) and the item's own numbers as the kind has them."""

    model_config = ConfigDict(extra="allow")  # a rule may add numbers of its own

    kind: str = Field(description="step, operator, runtime, kernel, gpu, collective, graph_break, memory_peak, range")
    label: str
    step: str | None = None
    start_us: float | None = None
    end_us: float | None = None
    event_id: int | None = Field(None, description="The culprit event, as in /api/trace/event")
    device: int | str | None = Field(None, description="GPU index (gpu), or memory device such as GPU0 (memory_peak)")
    op: str | None = None
    via: str | None = Field(None, description="The operator through which a sync happened (e.g. aten::item)")
    calls: int | list[str] | None = Field(None, description="Calls of the operator (tensor_cores_unused), or the "
                                          "runtime calls that synchronised (host_device_sync)")
    frame: str | None = None
    frames: list[str] | None = None
    count: int | None = None
    blocked_us: float | None = None
    unused_us: float | None = None
    input_types: list[str] | None = None
    tensor_cores_elsewhere: bool | None = None
    region: str | None = None
    parent_region: str | None = None
    launch_event_id: int | None = None
    kernel_us: float | None = None
    launch_us: float | None = None
    spread_us: float | None = None
    delay_us: float | None = None
    bytes: int | None = None
    utilization_ratio: float | None = None
    communication_us: float | None = None
    dataloader_us: float | None = None
    idle_launching_ratio: float | None = None


class Recommendation(BaseModel):
    id: str
    severity: Literal["high", "medium", "low"]
    title: str
    detail: str
    numbers: dict[str, Measure] = Field(description="The measured values")
    thresholds: dict[str, Measure] = Field(description="The bars they were judged by")
    evidence: list[Evidence]


class Overview(BaseModel):
    steps: list[Step]
    average: StepCosts
    gpus: list[Gpu]
    recommendations: list[Recommendation]
    warnings: list[str]


router = APIRouter(tags=["overview"])
VIEW = View("overview", "Overview", router, every_trace, about_of(overview_analysis, steps_analysis))


@router.get("/api/overview", response_model=Overview, response_model_exclude_unset=True)
def get_overview(sel: Selection = Depends(select), memo: Memo = Depends(get_memo)) -> dict[str, Any]:
    """Per-step time breakdown (us) with its average, per-GPU summary, recommendations and warnings."""
    return overview_of(sel, memo)


def overview_of(sel: Selection, memo: Memo) -> dict[str, Any]:
    """The overview, whose rules across ranks see the run's other workers of this span once
    they are all loaded (a worker loaded later gives a new answer)."""
    peers = span_of_workers(sel.run_state, sel.span)
    shared = peers.loading is None and len(peers.ready) >= 2 and sel.worker in peers.ready
    run_view = (lambda: distributed_of(peers, memo)) if shared else None
    return memo.get(sel.tables, ("overview", peers.key if shared else None),
                    lambda: overview(sel.tables, lambda: op_tree(sel, memo), run_view, sel.worker))
