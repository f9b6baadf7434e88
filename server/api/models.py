"""Response models that several views' routes answer with (a call-stack frame, a step's range, a
finding); each view's own models stay in its module."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Frame(BaseModel):
    file: str | None
    line: int | None
    function: str
    # Where a relative `file` is on the server, found under a --source-root (None: not found, or absolute).
    path: str | None = None


class StepRange(BaseModel):
    step: str
    start_us: float
    end_us: float


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
    saving_us: float | None = Field(description="Step time per step that fixing it would save, estimated from the "
                                    "timeline (us); None where none is claimed")
    saving_ratio: float | None = Field(description="saving_us of the mean step (0..1); severity follows it")
    saving_note: str = Field(description="How the saving was estimated, or why none is claimed")
    included_in: str | None = Field(None, description="The finding whose saving includes this one's: not to be "
                                    "added to it")
