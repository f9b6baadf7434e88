"""Resolve `run`/`worker`/`span` query parameters to one worker's loaded tables.

Clients never name files: ids map only to what discovery found. Results of analysis are
memoised per loaded trace, so repeated requests cost a dictionary lookup.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

from fastapi import Query, Request

from ..store import FileState, TraceStore
from ..trace.tables import TraceTables
from .errors import NotFound, StillLoading, TraceUnreadable


@dataclass
class Selection:
    run: str
    worker: str
    span: str
    state: FileState

    @property
    def tables(self) -> TraceTables:
        assert self.state.tables is not None
        return self.state.tables


def get_store(request: Request) -> TraceStore:
    return request.app.state.store


def select(request: Request,
           run: str = Query(..., description="Run name, as listed by /api/runs"),
           worker: str | None = Query(None, description="Worker; defaults to the run's first"),
           span: str | None = Query(None, description="Span id (\"1\", \"2\", ...); defaults to the first")) -> Selection:
    """Dependency: the selected worker's trace, loaded; raises a public error otherwise."""
    store = get_store(request)
    state = store.run(run)
    if state is None:
        raise NotFound(f"unknown run {run!r}")
    workers = list(state.run.workers)
    if not workers:
        raise NotFound(f"run {run!r} has no trace files (only memory snapshots: see the Memory Snapshot view)")
    worker = worker if worker is not None else workers[0]
    if worker not in state.run.workers:
        raise NotFound(f"run {run!r} has no worker {worker!r} (it has: {', '.join(workers)})")
    spans = state.run.spans(worker)
    span = span if span is not None else spans[0]
    fs = state.files.get((worker, span))
    if fs is None:
        raise NotFound(f"worker {worker!r} of run {run!r} has no span {span!r} (it has: {', '.join(spans)})")
    if fs.status == "loading":
        raise StillLoading(f"run {run!r}, worker {worker!r}, span {span} is still loading ({fs.progress:.0%})")
    if fs.status == "error":
        raise TraceUnreadable(f"the trace of run {run!r}, worker {worker!r}, span {span} could not be read: {fs.error}")
    return Selection(run, worker, span, fs)


class Memo:
    """A small LRU of analysis results keyed by the loaded tables' identity and parameters."""

    def __init__(self, size: int = 256) -> None:
        self._items: OrderedDict[tuple, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, tables: TraceTables, key: tuple, compute: Callable[[], Any]) -> Any:
        full = (id(tables), *key)
        with self._lock:
            if full in self._items:
                self._items.move_to_end(full)
                return self._items[full][1]
        value = compute()
        with self._lock:
            # Holding the tables keeps id() unique for as long as the entry lives.
            self._items[full] = (tables, value)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value


def get_memo(request: Request) -> Memo:
    return request.app.state.memo
