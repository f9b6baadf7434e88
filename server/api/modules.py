"""GET /api/modules (the nn.Module tree and its icicle) and GET /api/modules/optree (the main
thread's operator tree); GET /api/optree, its older path, redirects there."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from ..analysis import modules as modules_analysis
from ..analysis.modules import module_view, operator_tree
from ..trace.schema import Kind
from .deps import Memo, Selection, add_moved_route, get_memo, select
from .operators import op_tree
from .trace import flows_of
from .views import View, about_of, has_kind


class Modules(BaseModel):
    modules: list[dict[str, Any]]
    icicle: dict[str, Any]
    backward: dict[str, Any] | None
    warnings: list[str]


class OperatorTree(BaseModel):
    thread: dict[str, str] | None
    nodes: list[dict[str, Any]]
    truncated: bool
    warnings: list[str]


router = APIRouter(tags=["modules"])
VIEW = View("modules", "Module", router, has_kind(Kind.CPU_OP), about_of(modules_analysis), renamed_from=("module",))


@router.get("/api/modules", response_model=Modules)
def get_modules(sel: Selection = Depends(select), memo: Memo = Depends(get_memo)) -> dict[str, Any]:
    """nn.Module instances as a tree by call path (occurrences, operators, host/device total and
    self time in us, averages, backward time through fwdbwd flows), with icicle columns."""
    return memo.get(sel.tables, ("modules",),
                    lambda: module_view(sel.tables, op_tree(sel, memo), flows_of(sel, memo)))


@router.get("/api/modules/optree", response_model=OperatorTree)
def get_optree(sel: Selection = Depends(select), memo: Memo = Depends(get_memo)) -> dict[str, Any]:
    """The main thread's operators, annotations and modules as a tree, same-named siblings
    merged (calls, host/device total and self in us), capped with "… N more" nodes."""
    return memo.get(sel.tables, ("optree_view",), lambda: operator_tree(sel.tables, op_tree(sel, memo)))


add_moved_route(router, "/api/optree", "/api/modules/optree")
