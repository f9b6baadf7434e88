"""The view registry: each view is one slice under one name (issue 20), and its registry entry
lives in that slice, so grepping the name finds all of it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from profboard.server.api import VIEWS
from profboard.server.api.views import View

REPO = Path(__file__).resolve().parents[2]
# Where a view's analysis lives when it is not server/analysis/<view>.py.
ANALYSIS = {
    "trace": "server/analysis/timeline.py",  # server/trace/ is the trace reader, not the view
    "snapshot": "server/snapshot",  # a package: the snapshot is unpickled and analysed in a process of its own
}


def test_registry_lists_each_slice_once_in_order():
    names = [v.name for v in VIEWS]
    assert names == ["overview", "recommendations", "operators", "kernels", "compile", "trace", "memory",
                     "snapshot", "modules", "distributed"]
    assert all(isinstance(v, View) for v in VIEWS)


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: v.name)
def test_view_is_one_slice_under_one_name(view):
    name = view.name
    slice_module = importlib.import_module(f"profboard.server.api.{name}")
    assert slice_module.VIEW is view, f"server/api/{name}.py defines the registry entry of view {name}"
    assert slice_module.router is view.router
    for check in (view.is_active, view.of_run):
        assert check is None or check.__name__ != "<lambda>", f"{name}: name the check, no lambdas in the registry"
    routes = [r for r in view.router.routes if isinstance(r, APIRoute)]
    assert routes
    for route in routes:
        assert route.path == f"/api/{name}" or route.path.startswith(f"/api/{name}/"), route.path
        assert route.tags == [name], (route.path, route.tags)
    assert view.about.strip(), f"{name} has no 'how computed' note"
    assert (REPO / ANALYSIS.get(name, f"server/analysis/{name}.py")).exists()
    template = REPO / "web/templates" / f"{name}.html"
    assert f'data-view="{name}"' in template.read_text()
    assert (REPO / "web/static/js" / f"{name}.js").exists()
    assert (REPO / "tests/browser" / f"test_{name}.py").exists()


def test_old_page_names_belong_to_one_view_and_are_not_views():
    old = [o for v in VIEWS for o in v.renamed_from]
    assert sorted(old) == ["kernel", "module", "operator"]
    assert not set(old) & {v.name for v in VIEWS}
