"""GET /api/overview: step-time breakdown, GPU summary, recommendations."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from ..analysis import overview as overview_analysis
from ..analysis import steps as steps_analysis
from .deps import Selection, overview_of, select
from .models import Recommendation
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


class Overview(BaseModel):
    steps: list[Step]
    average: StepCosts
    gpus: list[Gpu]
    recommendations: list[Recommendation]
    warnings: list[str]


router = APIRouter(tags=["overview"])
VIEW = View("overview", "Overview", router, every_trace, about_of(overview_analysis, steps_analysis))


@router.get("/api/overview", response_model=Overview, response_model_exclude_unset=True)
def get_overview(sel: Selection = Depends(select)) -> dict[str, Any]:
    """Per-step time breakdown (us) with its average, per-GPU summary, recommendations and warnings."""
    return overview_of(sel)
