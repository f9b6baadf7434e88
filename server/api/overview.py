"""GET /api/overview: step-time breakdown, GPU summary, recommendations."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from ..analysis.overview import overview
from .deps import Memo, Selection, get_memo, select
from .operators import op_tree


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


@router.get("/api/overview", response_model=Overview)
def get_overview(sel: Selection = Depends(select), memo: Memo = Depends(get_memo)) -> dict[str, Any]:
    """Per-step time breakdown (us) with its average, per-GPU summary, recommendations and warnings."""
    return overview_of(sel, memo)


def overview_of(sel: Selection, memo: Memo) -> dict[str, Any]:
    return memo.get(sel.tables, ("overview",), lambda: overview(sel.tables, lambda: op_tree(sel, memo)))
