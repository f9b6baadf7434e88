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


# Version of trace_views' answer, which the trace's store keeps (server/derived.py): bump when a
# view is added or its is_active check changes.
VIEWS_VERSION = 1


def trace_views(tables: TraceTables) -> list[str]:
    """Names of the views a trace has by itself (its `is_active` checks; computed at load)."""
    names = []
    for view in VIEWS:
        if view.of_run is not None:
            continue
        try:
            if view.is_active(tables):
                names.append(view.name)
        except Exception:
            log.exception("view %s failed its activity check; hiding it", view.name)
    return names


def active_views(views: list[str] | None, run: Run | None = None) -> list[str]:
    """Names of the views that apply to a run and to its loaded trace, which has `views`
    (trace_views'; None while it is unknown)."""
    names = []
    for view in VIEWS:
        try:
            if view.of_run is not None:
                active = run is not None and view.of_run(run)
            elif view.all_workers and (run is None or len(run.workers) < 2):
                active = False
            else:
                active = views is not None and view.name in views
            if active:
                names.append(view.name)
        except Exception:
            log.exception("view %s failed its activity check; hiding it", view.name)
    return names
