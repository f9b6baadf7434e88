"""The view registry: the views profboard has, in the order of the left panel.

Each view is a slice, `server/api/<name>.py`, that defines `VIEW` next to its router (router,
`is_active`, "how computed" note; see views.py). The registry lists the slices by name, with their
titles and older page names and how each view applies to a run besides its trace's `is_active` check,
and imports a slice when its `VIEW` is first asked for: the slices' routes, response models and
analysis modules take a quarter of a second to import, which the server's start, its pages and
/api/runs (answered from `SLICES` alone) need not wait for. Adding a view is its slice plus one line here. A view whose `is_active` check fails is
logged and hidden, never fatal.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..logdir import Run
from .views import View

if TYPE_CHECKING:
    from ..trace.tables import TraceTables

log = logging.getLogger("profboard")


@dataclass(frozen=True)
class Slice:
    """A view as the registry lists it: the name of its slice, its title, its pages' older names, and what
    it needs of a run. The page routes and the left panel are built from these alone, never importing a
    slice: a reopened trace's first page is served without the analyses (issue 15)."""
    name: str
    title: str
    # Older page names of this view (/<old>?...), redirected to /<name> with their query.
    renamed_from: tuple[str, ...] = ()
    # Set for views of a run's other files (memory snapshots): active by the run, not a trace.
    of_run: Callable[[Run], bool] | None = None
    # Views of every worker of a span side by side: the worker picker does not apply, and the
    # run needs two workers at least.
    all_workers: bool = False

    @property
    def view(self) -> View:
        """The slice's `VIEW`, its module imported on first use."""
        return importlib.import_module(f"{__name__}.{self.name}").VIEW


def has_snapshots(run: Run) -> bool:
    return bool(run.snapshots)


SLICES: tuple[Slice, ...] = (
    Slice("overview", "Overview"),
    Slice("recommendations", "Recommendations"),
    Slice("operators", "Operator", renamed_from=("operator",)),
    Slice("kernels", "Kernel", renamed_from=("kernel",)),
    Slice("compile", "torch.compile"),
    Slice("trace", "Trace"),
    Slice("memory", "Memory"),
    Slice("snapshot", "Memory Snapshot", of_run=has_snapshots),
    Slice("modules", "Module", renamed_from=("module",)),
    Slice("distributed", "Distributed", all_workers=True),
    Slice("diff", "Diff"),
)


# Version of trace_views' answer, which the trace's store keeps (the "views" item: server/items.py):
# bump when a view is added or its is_active check changes.
VIEWS_VERSION = 2


def trace_views(tables: TraceTables) -> list[str]:
    """Names of the views a trace has by itself (its `is_active` checks; computed at load)."""
    names = []
    for entry in SLICES:
        if entry.of_run is not None:
            continue
        try:
            if entry.view.is_active(tables):
                names.append(entry.name)
        except Exception:
            log.exception("view %s failed its activity check; hiding it", entry.name)
    return names


def active_views(views: list[str] | None, run: Run | None = None) -> list[str]:
    """Names of the views that apply to a run and to its loaded trace, which has `views`
    (trace_views'; None while it is unknown)."""
    names = []
    for entry in SLICES:
        try:
            if entry.of_run is not None:
                active = run is not None and entry.of_run(run)
            elif entry.all_workers and (run is None or len(run.workers) < 2):
                active = False
            else:
                active = views is not None and entry.name in views
            if active:
                names.append(entry.name)
        except Exception:
            log.exception("view %s failed its activity check; hiding it", entry.name)
    return names
