"""The view registry: which views exist, and which a run has.

Adding a view is one entry here plus its slice (analysis module, router, template, JS).
A view whose `is_active` check fails is logged and hidden, never fatal.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Callable

from fastapi import APIRouter

from ..analysis import compile as compile_analysis
from ..analysis import compile_ops as compile_ops_analysis
from ..analysis import distributed as distributed_analysis
from ..analysis import kernels as kernels_analysis
from ..analysis import launch as launch_analysis
from ..analysis import memory as memory_analysis
from ..analysis import memory_curve as memory_curve_analysis
from ..analysis import modules as modules_analysis
from ..analysis import operators as operators_analysis
from ..analysis import optree as optree_analysis
from ..analysis.rules import RULES
from ..analysis import overview as overview_analysis
from ..analysis import recommendations as recommendations_analysis
from ..analysis import steps as steps_analysis
from ..analysis import stragglers as stragglers_analysis
from ..analysis import tensor_cores as tensor_cores_analysis
from ..analysis import timeline as timeline_analysis
from .. import snapshot as snapshot_package
from ..logdir import Run
from ..snapshot import unpickle as snapshot_unpickle
from ..trace.schema import Kind
from ..trace.tables import TraceTables
from . import compile, distributed, kernels, memory, modules, operators, overview, recommendations, snapshot, trace

log = logging.getLogger("profboard")


@dataclass(frozen=True)
class View:
    name: str
    title: str
    router: APIRouter
    is_active: Callable[[TraceTables], bool]
    about: str
    # Set for views of a run's other files (memory snapshots): active by the run, not a trace.
    of_run: Callable[[Run], bool] | None = None
    # Views of every worker of a span side by side: the worker picker does not apply, and the
    # run needs two workers at least.
    all_workers: bool = False


def _about(*modules) -> str:
    return "\n\n".join((m.__doc__ or "").strip() for m in modules)


def _has(kind: Kind) -> Callable[[TraceTables], bool]:
    return lambda tables: bool((tables.events["kind"].to_numpy() == kind).any())


VIEWS: tuple[View, ...] = (
    View("overview", "Overview", overview.router, lambda tables: True, _about(overview_analysis, steps_analysis)),
    View("recommendations", "Recommendations", recommendations.router, lambda tables: True,
         _about(recommendations_analysis, *dict.fromkeys(sys.modules[rule.__module__] for rule in RULES))),
    View("operators", "Operator", operators.router, _has(Kind.CPU_OP), _about(operators_analysis, optree_analysis)),
    View("kernels", "Kernel", kernels.router, _has(Kind.KERNEL),
         _about(kernels_analysis, optree_analysis, tensor_cores_analysis)),
    View("compile", "torch.compile", compile.router, compile_analysis.has_compiled_code,
         _about(compile_analysis, compile_ops_analysis, launch_analysis)),
    View("trace", "Trace", trace.router, lambda tables: len(tables.events) > 0, _about(timeline_analysis)),
    View("memory", "Memory", memory.router, lambda tables: len(tables.memory) > 0, _about(memory_curve_analysis, memory_analysis)),
    View("snapshot", "Memory Snapshot", snapshot.router, lambda tables: False,
         _about(snapshot_package, snapshot_unpickle), of_run=lambda run: bool(run.snapshots)),
    View("modules", "Module", modules.router, _has(Kind.CPU_OP), _about(modules_analysis)),
    View("distributed", "Distributed", distributed.router, distributed_analysis.has_communication,
         _about(distributed_analysis, stragglers_analysis), all_workers=True),
)


def active_views(tables: TraceTables | None, run: Run | None = None) -> list[str]:
    """Names of the views that apply to a run and its loaded trace (none of the trace's while
    it is unknown)."""
    names = []
    for view in VIEWS:
        try:
            if view.of_run is not None:
                active = run is not None and view.of_run(run)
            elif view.all_workers and (run is None or len(run.workers) < 2):
                active = False
            else:
                active = tables is not None and view.is_active(tables)
            if active:
                names.append(view.name)
        except Exception:
            log.exception("view %s failed its activity check; hiding it", view.name)
    return names
