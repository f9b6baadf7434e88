"""What a view is to the registry: the `View` record that each slice, `server/api/<view>.py`,
defines as `VIEW` next to its router, and helpers for its `about` note and `is_active` check.

The registry (`server/api/__init__.py`) lists the slices in order, with how each view applies to a
run, and imports a slice when its VIEW is first needed; `/api/runs`, `/api/views`, the left panel
and the page routes are built from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
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
    title: str
    router: APIRouter
    is_active: Callable[[TraceTables], bool]
    about: str
    # Older page names of this view (/<old>?...), redirected to /<name> with their query.
    renamed_from: tuple[str, ...] = ()


def about_of(*modules: ModuleType) -> str:
    """A view's "how computed" note: the docstrings of the analysis modules behind it, in order."""
    return "\n\n".join((m.__doc__ or "").strip() for m in modules)


def every_trace(tables: TraceTables) -> bool:
    """An `is_active` check for views that every loaded trace has."""
    return True


def has_kind(kind: Kind) -> Callable[[TraceTables], bool]:
    """An `is_active` check: whether the trace holds an event of this kind."""
    def check(tables: TraceTables) -> bool:
        return bool((tables.events["kind"].to_numpy() == kind).any())
    check.__name__ = f"has_{kind.name.lower()}"
    return check
