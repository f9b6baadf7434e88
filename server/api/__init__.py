"""The view registry: the views profboard has, in the order of the left panel.

Each entry is the `VIEW` its slice defines next to its router in `server/api/<view>.py` (name,
title, router, `is_active`, "how computed" note; see views.py). Adding a view is its slice plus
one line here. A view whose `is_active` check fails is logged and hidden, never fatal.
"""

from __future__ import annotations

import logging

from ..logdir import Run
from ..trace.tables import TraceTables
from . import compile, distributed, kernels, memory, modules, operators, overview, recommendations, snapshot, trace
from .views import View

log = logging.getLogger("profboard")

VIEWS: tuple[View, ...] = (
    overview.VIEW,
    recommendations.VIEW,
    operators.VIEW,
    kernels.VIEW,
    compile.VIEW,
    trace.VIEW,
    memory.VIEW,
    snapshot.VIEW,
    modules.VIEW,
    distributed.VIEW,
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
