"""What a view is to the registry: the `View` record that each slice, `server/api/<view>.py`,
defines as `VIEW` next to its router, and helpers for its `about` note and `is_active` check.

The registry (`server/api/__init__.py`) lists the slices in order, with how each view applies to a
run, and imports a slice when its VIEW is first needed; `/api/runs`, `/api/views`, the left panel
and the page routes are built from it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from fastapi import APIRouter

from ..trace.schema import Kind

if TYPE_CHECKING:
    from ..trace.tables import TraceTables


@dataclass(frozen=True)
class View:
    # One name everywhere: /api/<name>, router tag, analysis module, page /<name>, <name>.html,
    # <name>.js, data-view, tests/*/test_<name>.py.
    name: str
    router: APIRouter
    is_active: Callable[[TraceTables], bool]
    # The modules behind the view (names relative to server/api/, or absolute), whose docstrings make
    # its "how computed" note: imported when the note is first read (/api/views), so that importing a
    # slice costs only what its answers need (the overview's stored answer needs no analysis).
    about_from: tuple[str, ...]

    @property
    def about(self) -> str:
        """The view's "how computed" note: the docstrings of `about_from`, in order."""
        return "\n\n".join((importlib.import_module(m, __package__).__doc__ or "").strip() for m in self.about_from)


def every_trace(tables: TraceTables) -> bool:
    """An `is_active` check for views that every loaded trace has."""
    return True


def has_kind(kind: Kind) -> Callable[[TraceTables], bool]:
    """An `is_active` check: whether the trace holds an event of this kind."""
    def check(tables: TraceTables) -> bool:
        return bool((tables.events["kind"].to_numpy() == kind).any())
    check.__name__ = f"has_{kind.name.lower()}"
    return check
