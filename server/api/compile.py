"""GET /api/compile: torch.compile's regions and graph breaks, compiled autograd pieces, the
kernel mix, a first call's compile break-down, and launch overhead."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from ..analysis.compile import compiled_view, has_compiled_code
from .deps import Selection, select
from .views import View


class RegionStep(BaseModel):
    step: str
    start_us: float
    end_us: float
    total_us: float
    calls: int
    regions: int
    graph_breaks: int
    max_depth: int
    compiled_us: float
    outside_us: float
    compiled_ratio: float | None


class RegionCall(BaseModel):
    """One compiled call: a top-level region with the regions nested in it."""

    event_id: int
    region: str
    step: str | None
    start_us: float
    end_us: float
    regions: int
    graph_breaks: int
    depth: int


class RegionSummary(BaseModel):
    calls: int
    regions: int
    graph_breaks: int
    graph_breaks_per_call: int = Field(description="The median call's graph breaks")
    max_graph_breaks_per_call: int
    max_depth: int


class BreakLocation(BaseModel):
    """Where calls broke: the resume region, the region it broke out of and the user's frame."""

    region: str
    parent_region: str
    frame: str | None
    frames: list[str]
    count: int
    event_id: int
    label: str
    start_us: float
    end_us: float


class Regions(BaseModel):
    steps: list[RegionStep]
    calls: list[RegionCall]
    summary: RegionSummary
    locations: list[BreakLocation]


class PieceStep(BaseModel):
    step: str
    forward: int
    backward: int
    paired: int
    unpaired_forward: int
    unpaired_backward: int
    forward_us: float
    backward_us: float


class PiecePair(BaseModel):
    forward_event_id: int
    backward_event_id: int


class UnpairedPiece(BaseModel):
    event_id: int
    name: str
    start_us: float
    end_us: float


class Pieces(BaseModel):
    """CompiledFunction (forward) and CompiledFunctionBackward pieces, paired through fwdbwd flows."""

    steps: list[PieceStep]
    forward: int
    backward: int
    paired: int
    pairs: list[PiecePair]
    unpaired: list[UnpairedPiece]


class KernelCount(BaseModel):
    kernels: int
    total_us: float


class KernelFamily(BaseModel):
    family: str
    kernels: int
    total_us: float
    time_ratio: float | None


class LaunchCall(BaseModel):
    name: str
    api: Literal["driver", "runtime", "graph"]
    calls: int
    total_us: float


class KernelMix(BaseModel):
    triton: KernelCount
    other: KernelCount
    triton_time_ratio: float | None
    families: list[KernelFamily]
    launches: list[LaunchCall]


class CompileRoot(BaseModel):
    name: str
    pass_: str = Field(alias="pass", description="forward, backward or first_run")
    event_id: int
    start_us: float
    end_us: float
    dur_us: float


class CompileRange(BaseModel):
    name: str
    phase: str
    calls: int
    self_us: float


class CompilePhase(BaseModel):
    phase: str
    label: str
    total_us: float
    forward_us: float
    backward_us: float
    first_run_us: float


class CompileBreakdown(BaseModel):
    """A first call's compile time (exclusive, us) by pass and by phase, its roots and costliest ranges."""

    total_us: float
    forward_us: float
    backward_us: float
    first_run_us: float
    phases: list[CompilePhase]
    roots: list[CompileRoot]
    top: list[CompileRange]


class LaunchStep(BaseModel):
    step: str
    start_us: float
    end_us: float
    total_us: float
    gpu_busy_us: float
    gpu_idle_us: float
    launching_us: float
    idle_launching_us: float
    idle_launching_ratio: float | None
    launches: int
    kernels: int
    short_kernels: int
    short_kernel_us: float


class LaunchSummary(BaseModel):
    step_us: float | None
    idle_launching_us: float | None
    gpu_busy_ratio: float | None
    idle_launching_ratio: float | None
    launches_per_step: float | None
    kernels_per_step: float | None
    kernels: int
    short_kernels: int
    short_kernel_us: float
    short_kernel_ratio: float | None
    kernel_to_launch_ratio: float | None
    median_kernel_us: float | None
    median_launch_us: float | None


class ShortKernel(BaseModel):
    """A kernel shorter than the call that launched it."""

    event_id: int
    launch_event_id: int
    name: str
    launch_name: str
    kernel_us: float
    launch_us: float
    start_us: float
    end_us: float


class LaunchOverhead(BaseModel):
    steps: list[LaunchStep]
    summary: LaunchSummary
    worst: list[ShortKernel]


class AtenRow(BaseModel):
    name: str
    calls: int
    host_us: float
    device_us: float


class AtenInGraphs(BaseModel):
    """aten operators compiled graphs ran (extern kernels, fallbacks)."""

    graph_calls: int
    triton_calls: int
    rows: list[AtenRow]


class Compiled(BaseModel):
    regions: Regions
    pieces: Pieces
    kernels: KernelMix
    compile: CompileBreakdown
    launch: LaunchOverhead
    aten: AtenInGraphs
    warnings: list[str]


router = APIRouter(tags=["compile"])
VIEW = View("compile", router, has_compiled_code,
            ("..analysis.compile", "..analysis.compile_ops", "..analysis.launch"))


@router.get("/api/compile", response_model=Compiled)
def get_compile(sel: Selection = Depends(select)) -> dict[str, Any]:
    """Compiled regions per step (calls, graph breaks and where, nesting, time inside compiled
    code), CompiledFunction/Backward pieces and their pairing, Triton versus other kernels and
    launch APIs, the compile break-down by phase (Dynamo, AOT autograd, Inductor, Triton), and
    launch overhead per step (GPU idle while the CPU launches, kernels shorter than their launch),
    and the aten operators compiled graphs ran (extern kernels and fallbacks)."""
    p = sel.provider
    answer = p.compiled()
    if answer is None:  # no compiled code: the view is not listed, and its answer not stored
        return p.memo(("compile",), lambda: compiled_view(p.tables(), p.steps(), p.op_tree()))
    return answer
