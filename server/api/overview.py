"""GET /api/overview: step-time breakdown, GPU summary, recommendations."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from .deps import Selection, overview_of, select
from .models import Recommendation
from .views import View, every_trace


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


class IdleCauses(BaseModel):
    idle_us: float
    host_wait_us: float
    kernel_wait_us: float
    other_us: float


class GpuIdle(IdleCauses):
    device: int
    span_us: float


class StreamIdle(IdleCauses):
    device: int
    stream: int | None  # None: the GPU as a whole (no kernel of any stream running)


class StepIdle(StreamIdle):
    step: str


class Idle(BaseModel):
    kernel_wait_threshold_us: float
    devices: list[GpuIdle]
    steps: list[StepIdle]
    average: list[StreamIdle]


class Overview(BaseModel):
    steps: list[Step]
    average: StepCosts
    gpus: list[Gpu]
    idle: Idle
    recommendations: list[Recommendation]
    warnings: list[str]


router = APIRouter(tags=["overview"])
VIEW = View("overview", router, every_trace, ("..analysis.overview", "..analysis.steps", "..analysis.idle"))


@router.get("/api/overview", response_model=Overview, response_model_exclude_unset=True)
def get_overview(sel: Selection = Depends(select)) -> dict[str, Any]:
    """Per-step time breakdown (us) with its average, per-GPU summary, GPU idle time by cause (us),
    recommendations and warnings."""
    return overview_of(sel)
