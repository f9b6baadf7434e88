"""GET /api/modules (the nn.Module tree and its icicle) and GET /api/modules/optree (the main
thread's operator tree); GET /api/optree, its older path, redirects there."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from ..analysis.modules import module_view, operator_tree
from ..trace.schema import Kind
from .deps import Selection, add_moved_route, select
from .views import View, has_kind


class ModuleRow(BaseModel):
    """One nn.Module instance, by call path: its calls, operators and times (us), with its
    children's ("total") and without them ("self"); backward times through fwdbwd flows."""

    id: int
    parent_id: int | None
    name: str
    occurrences: int
    self_operators: int
    operators: int
    host_total_us: float
    host_self_us: float
    device_total_us: float
    device_self_us: float
    backward_host_total_us: float
    backward_host_self_us: float
    backward_device_total_us: float
    backward_device_self_us: float
    compiled_regions: int
    avg_host_total_us: float
    avg_device_total_us: float


class Icicle(BaseModel):
    """Plotly icicle columns, one entry per module in `modules` order; values are self times."""

    branchvalues: Literal["remainder"]
    ids: list[str]
    labels: list[str]
    parents: list[str]
    host_us: list[float]
    device_us: list[float]
    backward_device_us: list[float]


class BackwardAttribution(BaseModel):
    """How much backward time the fwdbwd flows tied to a module."""

    ranges: int
    ranges_attributed: int
    host_us: float
    host_attributed_us: float
    device_us: float
    device_attributed_us: float
    fwdbwd_flows: int


class Modules(BaseModel):
    modules: list[ModuleRow]
    icicle: Icicle
    backward: BackwardAttribution | None
    warnings: list[str]


class TreeThread(BaseModel):
    pid: str
    tid: str


class TreeNode(BaseModel):
    """An operator, annotation or module of the main thread, same-named siblings merged."""

    id: int
    parent_id: int | None
    name: str
    calls: int
    host_total_us: float
    host_self_us: float
    device_total_us: float
    device_self_us: float
    children: list[int]


class OperatorTree(BaseModel):
    thread: TreeThread | None
    nodes: list[TreeNode]
    truncated: bool
    warnings: list[str]


router = APIRouter(tags=["modules"])
VIEW = View("modules", router, has_kind(Kind.CPU_OP), ("..analysis.modules",))


@router.get("/api/modules", response_model=Modules)
def get_modules(sel: Selection = Depends(select)) -> dict[str, Any]:
    """nn.Module instances as a tree by call path (occurrences, operators, host/device total and
    self time in us, averages, backward time through fwdbwd flows), with icicle columns."""
    p = sel.provider
    return p.memo(("modules",), lambda: module_view(p.tables(), p.op_tree(), p.flows()))


@router.get("/api/modules/optree", response_model=OperatorTree)
def get_optree(sel: Selection = Depends(select)) -> dict[str, Any]:
    """The main thread's operators, annotations and modules as a tree, same-named siblings
    merged (calls, host/device total and self in us), capped with "… N more" nodes."""
    p = sel.provider
    return p.memo(("optree_view",), lambda: operator_tree(p.tables(), p.op_tree()))


add_moved_route(router, "/api/optree", "/api/modules/optree")
