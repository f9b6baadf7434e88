"""GET /api/compile: torch.compile's regions and graph breaks, compiled autograd pieces, the
kernel mix, a first call's compile break-down, and launch overhead."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from ..analysis import compile as compile_analysis
from ..analysis import compile_ops as compile_ops_analysis
from ..analysis import launch as launch_analysis
from ..analysis.compile import compiled_view, has_compiled_code
from ..analysis.compile_ops import aten_in_graphs
from ..analysis.launch import launch_overhead
from .deps import Memo, Selection, get_memo, select
from .operators import op_tree
from .trace import flows_of, steps_of
from .views import View, about_of


class Compiled(BaseModel):
    regions: dict[str, Any]
    pieces: dict[str, Any]
    kernels: dict[str, Any]
    compile: dict[str, Any]
    launch: dict[str, Any]
    aten: dict[str, Any]
    warnings: list[str]


router = APIRouter(tags=["compile"])
VIEW = View("compile", "torch.compile", router, has_compiled_code,
            about_of(compile_analysis, compile_ops_analysis, launch_analysis))


@router.get("/api/compile", response_model=Compiled)
def get_compile(sel: Selection = Depends(select), memo: Memo = Depends(get_memo)) -> dict[str, Any]:
    """Compiled regions per step (calls, graph breaks and where, nesting, time inside compiled
    code), CompiledFunction/Backward pieces and their pairing, Triton versus other kernels and
    launch APIs, the compile break-down by phase (Dynamo, AOT autograd, Inductor, Triton), and
    launch overhead per step (GPU idle while the CPU launches, kernels shorter than their launch),
    and the aten operators compiled graphs ran (extern kernels and fallbacks)."""
    def compute() -> dict[str, Any]:
        flows, steps = flows_of(sel, memo), steps_of(sel, memo)
        return {**compiled_view(sel.tables, flows, steps), "launch": launch_overhead(sel.tables, steps, flows),
                "aten": aten_in_graphs(sel.tables, op_tree(sel, memo))}
    return memo.get(sel.tables, ("compile",), compute)
