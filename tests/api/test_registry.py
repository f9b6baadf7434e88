"""The view registry: each view is one slice under one name (issue 20), which defines its VIEW,
so grepping the name finds all of it; the registry imports a slice only when its VIEW is needed."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from profboard.server.api import SLICES
from profboard.server.api.views import View

REPO = Path(__file__).resolve().parents[2]
# Where a view's analysis lives when it is not server/analysis/<view>.py.
ANALYSIS = {
    "trace": "server/analysis/timeline.py",  # server/trace/ is the trace reader, not the view
    "snapshot": "server/snapshot",  # a package: the snapshot is unpickled and analysed in a process of its own
}


def test_registry_lists_each_slice_once_in_order():
    names = [e.name for e in SLICES]
    assert names == ["overview", "recommendations", "operators", "kernels", "compile", "trace", "memory",
                     "snapshot", "modules", "distributed", "diff"]
    assert all(isinstance(e.view, View) for e in SLICES)


@pytest.mark.parametrize("entry", SLICES, ids=lambda e: e.name)
def test_view_is_one_slice_under_one_name(entry):
    name = entry.name
    slice_module = importlib.import_module(f"profboard.server.api.{name}")
    view = entry.view
    assert slice_module.VIEW is view and view.name == name, f"server/api/{name}.py defines the VIEW of view {name}"
    assert slice_module.router is view.router
    for check in (view.is_active, entry.of_run):
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
    old = [o for e in SLICES for o in e.renamed_from]
    assert sorted(old) == ["kernel", "module", "operator"]
    assert not set(old) & {e.name for e in SLICES}


def _run_alone(script: str) -> None:
    # In a process of its own: this one has imported everything.
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


_SLICES_IMPORTED = """
import sys, time
from profboard.server.api import SLICES

def slices():
    return [e.name for e in SLICES if f"profboard.server.api.{e.name}" in sys.modules]
"""


def test_the_app_is_made_without_the_analyses(tmp_path):
    # Importing and making the app imports no view slice, no analysis library, no templates (the server
    # lists runs before they are loaded: issue 15); once started, it includes the views beside its first
    # requests, and makes the templates.
    _run_alone(_SLICES_IMPORTED + f"""
from fastapi.testclient import TestClient
from profboard.server.app import create_app
from profboard.server.settings import Settings

app = create_app(Settings(logdir={str(REPO / "examples/logdir")!r}, cache_dir={str(tmp_path)!r}))
heavy = [m for m in ("pandas", "numpy", "pyarrow", "plotly", "jinja2", "profboard.server.provider") if m in sys.modules]
assert heavy == [], heavy
assert slices() == [], slices()
with TestClient(app, base_url="http://localhost") as client:
    assert client.get("/api/runs").status_code == 200
    assert client.get("/api/overview").status_code == 400
    deadline = time.monotonic() + 60
    while (slices() != [e.name for e in SLICES] or "jinja2" not in sys.modules) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert slices() == [e.name for e in SLICES], slices()
    assert "jinja2" in sys.modules  # the pages' templates, made before the first page is asked for
    assert "<html" in client.get("/").text.lower()
""")


def test_a_stored_overview_is_answered_without_the_analyses(tmp_path, start_app):
    # A reopened trace's first page: its run listed and its overview read from the store, with only the
    # overview's slice imported, and neither pandas nor any analysis (issue 15: reopen to the first overview).
    logdir, cache = tmp_path / "logdir", tmp_path / "cache"
    shutil.copytree(REPO / "examples/logdir/loss_sync_after", logdir / "run")
    first = start_app(logdir, expect=["run"], cache_dir=cache)
    expected = first.get("/api/overview", {"run": "run"}).json()  # computed once, and stored
    first.stop()
    _run_alone(_SLICES_IMPORTED + f"""
import json
from fastapi.testclient import TestClient
from profboard.server import app as app_module
from profboard.server.settings import Settings

app_module._Views.include_soon = lambda self: None  # the rest are included later: not what this checks
app = app_module.create_app(Settings(logdir={str(logdir)!r}, cache_dir={str(cache)!r}))
with TestClient(app, base_url="http://localhost") as client:
    deadline = time.monotonic() + 60
    while (answer := client.get("/api/overview", params={{"run": "run"}})).status_code != 200:
        assert answer.status_code == 503 and time.monotonic() < deadline, answer.text
        time.sleep(0.02)
    assert answer.json() == json.loads({json.dumps(json.dumps(expected))}), answer.json()
    runs = client.get("/api/runs").json()["runs"]
    assert runs[0]["status"] == "ready" and "overview" in runs[0]["views"], runs
heavy = [m for m in sys.modules if m == "pandas" or m.startswith(("profboard.server.analysis", "profboard.server.derived"))]
assert heavy == [], heavy
assert slices() == ["overview"], slices()
""")
