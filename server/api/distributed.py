"""GET /api/distributed: how a run's ranks compute, communicate and wait for each other."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from ..analysis import distributed as distributed_analysis
from ..analysis import stragglers as stragglers_analysis
from ..analysis.distributed import WorkerSummary, combine, has_communication, summarize_worker
from .deps import Memo, SpanSelection, get_memo, select_span
from .views import View, about_of


class Distributed(BaseModel):
    span: str
    ranks: list[dict[str, Any]]
    topology: list[dict[str, Any]]
    groups: list[dict[str, Any]]
    overlap: list[dict[str, Any]]
    wait: list[dict[str, Any]]
    comm_ops: list[dict[str, Any]]
    stragglers: dict[str, Any]
    comparison: list[dict[str, Any]]
    warnings: list[str]


router = APIRouter(tags=["distributed"])
VIEW = View("distributed", "Distributed", router, has_communication, about_of(distributed_analysis, stragglers_analysis),
            all_workers=True)


def distributed_of(picked: SpanSelection, memo: Memo) -> dict[str, Any]:
    """The Distributed view of one span of a run's loaded workers; each worker's summary is
    memoised with its trace, the combination with the set of loaded files."""
    def summary(worker: str) -> WorkerSummary:
        tables = picked.ready[worker].tables
        assert tables is not None
        return memo.get(tables, ("distributed_summary", worker), lambda: summarize_worker(worker, tables))

    def compute() -> dict[str, Any]:
        combined = combine([summary(w) for w in picked.ready])
        return {"span": picked.span, **combined, "warnings": picked.warnings + combined["warnings"]}
    anchor = next(iter(picked.ready.values())).tables
    assert anchor is not None
    return memo.get(anchor, ("distributed", picked.key), compute)


@router.get("/api/distributed", response_model=Distributed)
def get_distributed(picked: SpanSelection = Depends(select_span), memo: Memo = Depends(get_memo)) -> dict[str, Any]:
    """Every worker's span `span` side by side: identity (rank, world size, backend, and what
    was assumed), topology (nodes, processes, GPUs), computation/communication overlap per step,
    data transfer versus waiting per step, communication ops per rank, stragglers (who arrives
    last at the collectives and by how much) and each rank's step breakdown."""
    return distributed_of(picked, memo)
