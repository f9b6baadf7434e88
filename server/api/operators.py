"""GET /api/operators (the operator table) and GET /api/operators/stacks (its call stacks)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from ..analysis.operators import operator_table, stack_table
from ..analysis.optree import tree_warnings
from ..trace.schema import Kind
from .deps import Selection, select
from .models import Frame
from .views import View, has_kind


class OpNumbers(BaseModel):
    calls: int
    device_self_us: float
    device_total_us: float
    host_self_us: float
    host_total_us: float
    tc_self_ratio: float | None
    tc_total_ratio: float | None


class OperatorRow(OpNumbers):
    name: str
    input_shape: str | None = None
    tc_eligible: bool
    has_call_stack: bool


class Operators(BaseModel):
    group_by: Literal["name", "name_shape"]
    rows: list[OperatorRow]
    warnings: list[str]


class StackRow(OpNumbers):
    frames: list[Frame]


class Stacks(BaseModel):
    name: str
    input_shape: str | None
    rows: list[StackRow]
    warnings: list[str]


router = APIRouter(tags=["operators"])
VIEW = View("operators", router, has_kind(Kind.CPU_OP), ("..analysis.operators", "..analysis.optree"))


@router.get("/api/operators", response_model=Operators, response_model_exclude_unset=True)
def get_operators(sel: Selection = Depends(select),
                  group_by: Literal["name", "name_shape"] = Query("name", description="name, or name and input shapes")
                  ) -> dict[str, Any]:
    """Every operator with calls, host/device self and total time (us) and tensor-core shares."""
    p = sel.provider

    def compute() -> dict[str, Any]:
        instances, _ = p.op_instances()
        return {"group_by": group_by, "rows": operator_table(instances, group_by),
                "warnings": tree_warnings(p.tables().events, p.op_tree())}
    return p.memo(("operators", group_by), compute)


@router.get("/api/operators/stacks", response_model=Stacks)
def get_operator_stacks(request: Request, sel: Selection = Depends(select),
                        name: str = Query(..., description="Operator name, as in /api/operators",
                                          examples=["aten::mm"]),
                        input_shape: str | None = Query(None, description="Only calls with these input shapes")
                        ) -> dict[str, Any]:
    """The distinct Python call stacks of one operator, each with its own numbers; frames innermost first."""
    instances, stacks = sel.provider.op_instances()
    warnings = [] if (instances["name"] == name).any() else [f"This trace has no operator named {name!r}."]
    rows = sel.provider.memo(("stacks", name, input_shape), lambda: stack_table(instances, stacks, name, input_shape))
    sources = request.app.state.sources
    rows = [{**row, "frames": sources.with_paths(row["frames"])} for row in rows]
    return {"name": name, "input_shape": input_shape, "rows": rows, "warnings": warnings}
