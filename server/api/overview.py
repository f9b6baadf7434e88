"""GET /api/overview: step-time breakdown, GPU summary, recommendations."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel

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


class Recommendation(BaseModel):
    id: str
    severity: Literal["high", "medium", "low"]
    title: str
    detail: str
    numbers: dict[str, Any]
    thresholds: dict[str, Any]
    evidence: list[dict[str, Any]]


class Overview(BaseModel):
    steps: list[Step]
    average: StepCosts
    gpus: list[Gpu]
    recommendations: list[Recommendation]
    warnings: list[str]


router = APIRouter(tags=["overview"])
VIEW = View("overview", "Overview", router, every_trace, about_of(overview_analysis, steps_analysis))


@router.get("/api/overview", response_model=Overview)
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
