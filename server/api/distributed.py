"""GET /api/distributed: how a run's ranks compute, communicate and wait for each other."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from ..analysis.distributed import has_communication
from ..analysis.rankdist import SORT_MEASURE, Sort, worst_ranks
from .deps import SpanSelection, distributed_of, select_span
from .views import View


class RankIdentity(BaseModel):
    """Who a worker is; `assumed` says what distributedInfo did not give."""

    worker: str
    rank: int
    world_size: int
    backend: str | None
    assumed: list[str]


class RankGpu(BaseModel):
    device: int
    name: str | None
    memory_bytes: int | None
    compute_capability: str | None


class RankProcess(BaseModel):
    rank: int
    worker: str
    process: str | None
    gpus: list[RankGpu]
    assumed: list[str]


class TopologyNode(BaseModel):
    node: str
    processes: list[RankProcess]


class ProcessGroup(BaseModel):
    name: str
    description: str | None
    size: int | None
    ranks: list[int] | None


class OverlapTimes(BaseModel):
    total_us: float | None
    computation_us: float | None
    overlapping_us: float | None
    communication_us: float | None
    other_us: float | None


class OverlapStep(OverlapTimes):
    step: str
    start_us: float
    end_us: float


class RankOverlap(BaseModel):
    rank: int
    worker: str
    steps: list[OverlapStep]
    average: OverlapTimes


class WaitTimes(BaseModel):
    communication_us: float | None
    transfer_us: float | None
    wait_us: float | None
    unattributed_us: float | None


class WaitStep(WaitTimes):
    step: str


class RankWait(BaseModel):
    rank: int
    worker: str
    steps: list[WaitStep]
    average: WaitTimes


class CommOp(BaseModel):
    name: str
    calls: int
    total_bytes: int | None
    avg_bytes: int | None
    total_latency_us: float | None
    avg_latency_us: float | None
    total_transfer_us: float | None
    avg_transfer_us: float | None
    transfer_calls: int


class RankCommOps(BaseModel):
    rank: int
    worker: str
    rows: list[CommOp]


class StragglerRank(BaseModel):
    rank: int
    worker: str
    collectives: int
    times_last: int
    last_ratio: float | None
    median_delay_us: float | None
    mean_delay_us: float | None
    max_delay_us: float | None
    held_per_step_us: float | None = Field(description="Median over steps of the time this rank, last into "
                                           "collectives, held the others up (its delay beyond the next latest rank's)")
    mean_step_us: float | None


class Arrival(BaseModel):
    """One rank at one collective: arrival from its step's start, its call on its own clock."""

    rank: int
    arrival_us: float | None
    start_us: float | None
    end_us: float | None
    delay_us: float | None


class Occurrence(BaseModel):
    step: str
    group: str
    name: str
    index: int
    basis: Literal["gpu", "cpu"]
    spread_us: float | None
    last_ranks: list[int]
    arrivals: list[Arrival]


class UnalignedCalls(BaseModel):
    rank: int
    unaligned: int


class RankCalls(BaseModel):
    rank: int
    calls: int


class CountMismatch(BaseModel):
    step: str
    group: str
    name: str
    calls: list[RankCalls]


class Unaligned(BaseModel):
    calls: list[UnalignedCalls]
    count_mismatches: list[CountMismatch]


class Stragglers(BaseModel):
    collectives: int
    decided: int
    basis: dict[Literal["gpu", "cpu"], int] = Field(description="Compared collectives timed by their kernels "
                                                    "(gpu) or by host time (cpu)")
    ranks: list[StragglerRank]
    stragglers: list[StragglerRank]
    occurrences: list[Occurrence]
    unaligned: Unaligned


class CollectiveRow(BaseModel):
    """Matched collectives of one type, message size and group size (collectives' definitions 1-4)."""

    type: str = Field(description="all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, "
                      "send_recv, barrier or other")
    names: list[str] = Field(description="The calls' own names")
    size_bytes: int | None = Field(description="nccl-tests' message size (all_gather: input bytes x group size)")
    group_size: int
    count: int
    transfer_us: float = Field(description="Summed over the collectives: the shortest duration among the ranks")
    median_transfer_us: float
    wait_us: float = Field(description="Summed over the collectives: the longest duration minus the shortest")
    median_wait_us: float
    algbw_gbps: float | None = Field(description="size x count / transfer_us")
    busbw_gbps: float | None = Field(description="algbw x NCCL's factor for the type and group size")


class DelayColumn(BaseModel):
    group: str
    match: int
    name: str
    spread_us: float


class DelayMap(BaseModel):
    """Rank x collective arrival delays (collectives' definition 5)."""

    rows: list[list[int]] = Field(description="Per row, its first and last rank (consecutive ranks fold into "
                                  "one row, their largest delay, beyond max_rows ranks)")
    columns: list[DelayColumn] = Field(description="The widest-spread symmetric collectives, in call order")
    delay_us: list[list[float | None]] = Field(description="rows x columns")
    max_rows: int
    max_columns: int


class RankClock(BaseModel):
    """One rank's clock against the reference rank's (clocks' definitions 1-3)."""

    rank: int
    offset_us: float | None = Field(description="How far this rank's timestamps are ahead of the reference "
                                    "rank's: t - offset_us is on the reference's clock (None: no shared collective)")
    used: int = Field(description="Matched collectives the offset was read from")
    spread_us: float | None = Field(description="Median absolute deviation of those readings from the offset")


class Clock(BaseModel):
    reference: int | None = Field(description="The rank whose clock is the common one (the lowest)")
    ranks: list[RankClock]
    straggler: int | None = Field(description="The first named straggler, else the rank with the largest "
                                  "median arrival delay (None with fewer than two ranks compared)")
    fastest: int | None = Field(description="Another rank with the smallest median arrival delay (it arrives first)")


class StepBreakdown(BaseModel):
    total_us: float | None
    kernel_us: float | None
    memcpy_us: float | None
    memset_us: float | None
    communication_us: float | None
    runtime_us: float | None
    dataloader_us: float | None
    cpu_exec_us: float | None
    other_us: float | None


class RankComparison(BaseModel):
    rank: int
    worker: str
    steps: int
    average: StepBreakdown


class RankMeasures(BaseModel):
    """One rank's measures, averaged over its steps (rankdist's definition 1)."""

    rank: int
    worker: str
    step_us: float | None
    computation_us: float | None = Field(description="Computation kernels per step, overlapped or not")
    communication_us: float | None = Field(description="Communication per step, overlapped or not")
    wait_us: float | None = Field(description="Communication time per step spent waiting for other ranks")
    wait_ratio: float | None = Field(description="wait_us / communication_us")
    delay_us: float | None = Field(description="Median arrival delay at the collectives")


class WorstRanks(BaseModel):
    sort: Sort
    measure: str = Field(description="The distribution's key the ranks are ordered by, largest first")
    top: int
    ranks: list[int] = Field(description="At most `top` ranks, worst first")


class Distributed(BaseModel):
    span: str
    ranks: list[RankIdentity]
    missing_ranks: list[int] = Field(description="Ranks below the world size that no worker of the run holds "
                                     "(also named in `warnings`)")
    topology: list[TopologyNode]
    groups: list[ProcessGroup]
    overlap: list[RankOverlap]
    wait: list[RankWait]
    comm_ops: list[RankCommOps]
    stragglers: Stragglers
    collectives: list[CollectiveRow] = Field(description="The collective report: per type and message size")
    delay_map: DelayMap
    clock: Clock = Field(description="Each rank's clock offset, for drawing ranks on one timeline, and the two "
                         "ranks the Trace view shows by default")
    comparison: list[RankComparison]
    distribution: list[RankMeasures] = Field(description="Every rank's measures, in rank order, for a "
                                             "histogram or heat strip over all ranks")
    worst: WorstRanks = Field(description="The `top` worst ranks by `sort`: step time, waiting in "
                              "communication or arrival delay")
    warnings: list[str]


router = APIRouter(tags=["distributed"])
VIEW = View("distributed", router, has_communication, ("..analysis.distributed", "..analysis.stragglers",
                                                              "..analysis.collectives", "..analysis.clocks",
                                                              "..analysis.rankdist"))


@router.get("/api/distributed", response_model=Distributed)
def get_distributed(picked: SpanSelection = Depends(select_span),
                    top: int = Query(16, ge=1, le=1_000_000, description="How many worst ranks `worst` lists"),
                    sort: Sort = Query("step", description="What makes a rank worst: its step time (step), its "
                                       "waiting in communication (wait) or its arrival delay (delay)")
                    ) -> dict[str, Any]:
    """Every worker's span `span` side by side: identity (rank, world size, backend, and what
    was assumed), topology (nodes, processes, GPUs), computation/communication overlap per step,
    data transfer versus waiting per step, communication ops per rank, stragglers (who arrives
    last at the collectives and by how much), the collective report with bandwidths and the
    rank x collective delay map, each rank's clock offset (`clock`), each rank's step breakdown, every rank's measures
    (`distribution`), the `top` worst ranks by `sort` and the ranks the run lacks."""
    view = distributed_of(picked)
    assert view is not None  # every summary is computed when missing
    worst = {"sort": sort, "measure": SORT_MEASURE[sort], "top": top,
             "ranks": worst_ranks(view["distribution"], sort, top)}
    return {**view, "worst": worst}
