"""Routers never import each other: what several views share (the trace's provider, the selection,
response models) lives in modules without routes (deps.py, models.py, views.py, errors.py) or in
the provider, so each view's slice stands alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

API = Path(__file__).resolve().parents[2] / "server" / "api"


def _tree(name: str, folder: Path) -> ast.Module:
    return ast.parse((folder / f"{name}.py").read_text())


def _has_router(name: str, folder: Path = API) -> bool:
    return any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "router" for t in node.targets)
               for node in _tree(name, folder).body)


def _siblings_imported(name: str, folder: Path = API) -> set[str]:
    """The modules of server/api that `name` imports (relative imports of this package)."""
    found = set()
    for node in ast.walk(_tree(name, folder)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:  # from . import a, b
                found.update(alias.name for alias in node.names)
    return found


MODULES = sorted(p.stem for p in API.glob("*.py") if p.stem != "__init__")
ROUTERS = [name for name in MODULES if _has_router(name)]


def test_the_views_have_routers():
    assert {"overview", "operators", "trace", "distributed", "runs"} <= set(ROUTERS)


@pytest.mark.parametrize("name", ROUTERS)
def test_a_router_imports_no_other_router(name):
    others = sorted(_siblings_imported(name) & (set(ROUTERS) - {name}))
    assert not others, f"server/api/{name}.py imports the routers of {others}: share through deps.py, models.py or the provider"


def test_the_check_sees_an_import_of_a_router(tmp_path):
    # The check itself: a router importing another is caught, in either import form.
    (tmp_path / "a.py").write_text("from fastapi import APIRouter\nrouter = APIRouter()\n")
    (tmp_path / "b.py").write_text("from .a import router as other\nrouter = None\n")
    (tmp_path / "c.py").write_text("from . import a\nfrom ..store import TraceStore\n")
    assert _has_router("a", tmp_path) and _has_router("b", tmp_path) and not _has_router("c", tmp_path)
    assert _siblings_imported("b", tmp_path) == {"a"} and _siblings_imported("c", tmp_path) == {"a"}
