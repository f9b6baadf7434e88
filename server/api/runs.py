"""GET /api/runs (what the logdir holds and how loading goes) and GET /api/views."""

from __future__ import annotations

from typing import Literal

import msgspec
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from ..store import RunState, TraceStore
from . import SLICES, active_views


class FileInfo(BaseModel):
    worker: str
    span: str
    status: Literal["loading", "ready", "error"]
    progress: float
    error: str | None
    warnings: list[str]


class RunInfo(BaseModel):
    name: str
    status: Literal["loading", "ready", "error"]
    progress: float
    error: str | None
    workers: list[str]
    spans: dict[str, list[str]]
    views: list[str]
    files: list[FileInfo]
    snapshots: list[str]


class Runs(BaseModel):
    runs: list[RunInfo]
    error: str | None = None
    # What discovery noticed: links followed out of the logdir or not followed, a scan cut short.
    notes: list[str] = []


class ViewInfo(BaseModel):
    name: str
    title: str
    about: str
    all_workers: bool  # shows every worker of a span: the worker picker does not apply


class Views(BaseModel):
    views: list[ViewInfo]


router = APIRouter(tags=["runs"])


def _run_info(state: RunState) -> dict:
    """One run of the answer, shaped as RunInfo."""
    files = [{"worker": w, "span": s, "status": fs.status, "progress": fs.progress, "error": fs.error,
              "warnings": fs.warnings} for (w, s), fs in state.files.items()]
    statuses = {f["status"] for f in files}
    if "loading" in statuses:
        status = "loading"
    elif statuses == {"error"}:
        status = "error"
    else:
        status = "ready"
    errors = [f"{f['worker']} span {f['span']}: {f['error']}" for f in files if f["error"]]
    first_ready = next((fs.provider for fs in state.files.values() if fs.status == "ready" and fs.provider), None)
    return {
        "name": state.run.name,
        "status": status,
        "progress": sum(f["progress"] for f in files) / len(files) if files else 1.0,
        "error": "; ".join(errors) if errors else None,
        "workers": list(state.run.workers),
        "spans": {w: state.run.spans(w) for w in state.run.workers},
        "views": active_views(first_ready.views() if first_ready is not None else None, state.run),
        "files": files,
        "snapshots": [f.name for f in state.run.snapshots],
    }


@router.get("/api/runs", response_model=Runs)
def get_runs(request: Request) -> Response:
    """Every run found in the logdir, with its workers, spans, load status and available views."""
    # The store straight from the app, not through .deps: that module brings the providers (numpy, Arrow),
    # which a fresh server's first answer, this one, should not wait for.
    store: TraceStore = request.app.state.store
    runs = {"runs": [_run_info(s) for s in store.runs()], "error": store.discovery_error,
            "notes": store.discovery_notes}
    # Encoded here, as Runs documents it: validating 2,000 runs through the model on a fresh server's first
    # answer took 0.1 s of the 1 s in which a big logdir should be listed (issue 15).
    return Response(msgspec.json.encode(runs), media_type="application/json")


@router.get("/api/views", response_model=Views)
def get_views() -> Views:
    """Every view profboard has, with its "how computed" note."""
    return Views(views=[ViewInfo(name=e.name, title=e.title, about=e.view.about, all_workers=e.all_workers)
                        for e in SLICES])
