"""GET /api/kernels: the kernel table, by name or by name and launching operator."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from ..analysis.kernels import kernel_table
from ..analysis.optree import tree_warnings
from ..trace.schema import Kind
from .deps import Selection, select
from .views import View, has_kind


class KernelRow(BaseModel):
    name: str
    calls: int
    total_us: float
    mean_us: float
    max_us: float
    min_us: float
    tensor_cores: bool
    tensor_cores_guess: bool
    blocks_per_sm: float | None
    achieved_occupancy_ratio: float | None
    op: str | None = None
    grid: list[int] | None = None
    block: list[int] | None = None
    registers_per_thread: int | None = None
    shared_memory_bytes: int | None = None
    op_tc_eligible: bool | None = None


class Kernels(BaseModel):
    group_by: Literal["name", "name_op"]
    op: str | None
    rows: list[KernelRow]
    warnings: list[str]


router = APIRouter(tags=["kernels"])
VIEW = View("kernels", router, has_kind(Kind.KERNEL),
            ("..analysis.kernels", "..analysis.optree", "..analysis.tensor_cores"))


@router.get("/api/kernels", response_model=Kernels, response_model_exclude_unset=True)
def get_kernels(sel: Selection = Depends(select),
                group_by: Literal["name", "name_op"] = Query("name", description="name, or name and launching operator"),
                op: str | None = Query(None, description="Only kernels launched by this operator or those it called")
                ) -> dict[str, Any]:
    """Every GPU kernel with calls, total/mean/max/min duration (us), tensor cores, blocks per SM, occupancy."""
    p = sel.provider

    def compute() -> dict[str, Any]:
        tree, events = p.op_tree(), p.tables().events
        return {"group_by": group_by, "op": op, "rows": kernel_table(events, tree, group_by, op),
                "warnings": tree_warnings(events, tree)}
    return p.memo(("kernels", group_by, op), compute)
