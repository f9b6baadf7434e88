"""Resolve `run`/`worker`/`span` query parameters to one worker's trace provider
(server/provider.py), pinned while the request works with it.

Clients never name files: ids map only to what discovery found.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse
from starlette.requests import Request as StarletteRequest

from ..provider import TableDamage, TraceProvider, run_view
from ..store import FileState, RunState, TraceStore
from .errors import BadParameter, NotFound, StillLoading, TraceUnreadable

if TYPE_CHECKING:
    from ..trace.tables import TraceTables


@dataclass
class Selection:
    run: str
    worker: str
    span: str
    state: FileState
    run_state: RunState
    provider: TraceProvider

    @property
    def tables(self) -> TraceTables:
        return self.provider.tables()


@dataclass
class SpanSelection:
    """One span of every worker of a run: those loaded, in worker order, and why others are not."""

    run: str
    span: str
    ready: dict[str, TraceProvider]
    files: dict[str, FileState]
    warnings: list[str]
    loading: str | None = None  # why the span is not complete yet

    @property
    def key(self) -> tuple:
        """Identifies the loaded files (a reloaded or newly loaded worker changes it)."""
        return tuple((w, fs.file.path, fs.file.size, fs.file.mtime) for w, fs in self.files.items())


# Trace times are microseconds since the epoch (about 1.8e15 today); a bound keeps every
# difference between two of them finite (1e308 - (-1e308) is inf, and a window that wide
# divided by zero).
MAX_TIME_US = 1e18


def time_query(description: str) -> Any:
    """A query parameter holding an absolute trace time in microseconds: finite and bounded."""
    return Query(None, ge=-MAX_TIME_US, le=MAX_TIME_US, allow_inf_nan=False, description=description)


def get_store(request: Request) -> TraceStore:
    return request.app.state.store


def select(request: Request,
           run: str = Query(..., description="Run name, as listed by /api/runs"),
           worker: str | None = Query(None, description="Worker; defaults to the run's first"),
           span: str | None = Query(None, description="Span id (\"1\", \"2\", ...); defaults to the first")
           ) -> Iterator[Selection]:
    """Dependency: the selected worker's trace, loaded, its provider pinned for the request; raises a
    public error otherwise."""
    state = _run_state(request, run)
    workers = list(state.run.workers)
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
    provider = fs.provider
    if provider is None:  # being loaded again
        raise StillLoading(f"run {run!r}, worker {worker!r}, span {span} is being read again")
    with provider.use():
        try:
            yield Selection(run, worker, span, fs, state, provider)
        except TableDamage as exc:
            raise StillLoading(f"the stored trace of run {run!r}, worker {worker!r}, span {span} was damaged "
                               f"({exc}): it is being read again") from None


def select_span(request: Request,
                run: str = Query(..., description="Run name, as listed by /api/runs"),
                span: str | None = Query(None, description="Span id (\"1\", \"2\", ...) of every worker; "
                                         "defaults to the first")) -> Iterator[SpanSelection]:
    """Dependency: one span of every worker of a run, all loaded (unreadable ones are left out
    with a warning), their providers pinned for the request; raises a public error while any is
    loading or when none could be read."""
    state = _run_state(request, run)
    span = span if span is not None else state.run.spans(next(iter(state.run.workers)))[0]
    picked = span_of_workers(state, span)
    if picked.loading is not None:
        raise StillLoading(picked.loading)
    if not picked.ready:
        unreadable = [fs for w in state.run.workers if (fs := state.files.get((w, span))) is not None]
        error = TraceUnreadable if unreadable else NotFound
        raise error(f"no worker of run {run!r} has a readable span {span!r}: " + "; ".join(picked.warnings))
    with _pinned(picked):
        yield picked


def _pinned(picked: SpanSelection) -> ExitStack:
    stack = ExitStack()
    for provider in picked.ready.values():
        stack.enter_context(provider.use())
    return stack


def span_of_workers(state: RunState, span: str) -> SpanSelection:
    """Every worker's file of one span; `loading` says which is still loading, if one is."""
    ready: dict[str, TraceProvider] = {}
    files: dict[str, FileState] = {}
    warnings: list[str] = []
    for worker in state.run.workers:
        fs = state.files.get((worker, span))
        provider = fs.provider if fs is not None else None
        if fs is None:
            warnings.append(f"worker {worker!r} has no span {span!r}: left out")
        elif fs.status == "loading" or (fs.status == "ready" and provider is None):
            return SpanSelection(state.run.name, span, {}, {}, [], loading=(
                f"run {state.run.name!r}, worker {worker!r}, span {span} is still loading ({fs.progress:.0%})"))
        elif fs.status == "error":
            warnings.append(f"worker {worker!r} could not be read ({fs.error}): left out")
        else:
            ready[worker], files[worker] = provider, fs
    return SpanSelection(state.run.name, span, ready, files, warnings)


def distributed_of(picked: SpanSelection, stored_only: bool = False) -> dict[str, Any] | None:
    """The Distributed view of one span of a run's loaded workers, from their summaries (see
    provider.run_view), with the warnings of the workers left out."""
    view = run_view(picked.ready, picked.key, stored_only)
    if view is None:
        return None
    return {"span": picked.span, **view, "warnings": picked.warnings + view["warnings"]}


def overview_of(sel: Selection) -> dict[str, Any]:
    """The selected worker's overview: its own, stored at load, with the findings across ranks
    once the run's other workers of this span are loaded and summarised (read from their stores,
    never computed here); until then a warning says they are still being computed."""
    own = sel.provider.overview()
    if len(sel.run_state.run.workers) < 2:
        return own
    peers = span_of_workers(sel.run_state, sel.span)
    if peers.loading is None and (len(peers.ready) < 2 or sel.worker not in peers.ready):
        return own  # no other worker to compare with
    with _pinned(peers):
        view = None if peers.loading is not None else distributed_of(peers, stored_only=True)
        if view is None:
            waiting = peers.loading or "the other workers' summaries are being computed"
            note = f"Findings across ranks (stragglers, waiting in collectives) come once every worker is ready: {waiting}."
            return {**own, "warnings": [*own["warnings"], note]}
        # Imported here: a run of one worker, the most common, is answered from its store without the analyses.
        from ..analysis.overview import across_ranks

        return sel.provider.memo(("overview", peers.key), lambda: across_ranks(own, view, sel.worker))


def _run_state(request: Request, run: str) -> RunState:
    state = get_store(request).run(run)
    if state is None:
        raise NotFound(f"unknown run {run!r}")
    if not state.run.workers:
        raise NotFound(f"run {run!r} has no trace files (only memory snapshots: see the Memory Snapshot view)")
    return state


def add_moved_route(router: APIRouter, old: str, new: str) -> None:
    """Answers GET `old`, an API path that clients may have scripted before it moved, with a 307 to
    `new`, query string kept. Hidden from the OpenAPI schema; the README lists it."""
    def moved(request: StarletteRequest) -> RedirectResponse:
        query = request.url.query
        return RedirectResponse(new + (f"?{query}" if query else ""), status_code=307)
    router.add_route(old, moved, methods=["GET"], include_in_schema=False)


def select_pair(request: Request,
                base_run: str | None = Query(None, description="Baseline run, as listed by /api/runs; default: `run`"),
                base_worker: str | None = Query(None, description="Baseline worker; default: `worker`, else the run's first"),
                base_span: str | None = Query(None, description="Baseline span id; default: `span`, else the first"),
                new_run: str | None = Query(None, description="Candidate run; default: the baseline's run"),
                new_worker: str | None = Query(None, description="Candidate worker; defaults to the run's first"),
                new_span: str | None = Query(None, description="Candidate span id; defaults to the first"),
                run: str | None = Query(None, description="The baseline's run, as every view names its selection"),
                worker: str | None = Query(None, description="The baseline's worker"),
                span: str | None = Query(None, description="The baseline's span")
                ) -> Iterator[tuple[Selection, Selection]]:
    """Dependency: two selections (a diff's baseline and candidate), each resolved and pinned as
    `select` does it. The baseline is `base_*`, else the selection every view takes (`run`,
    `worker`, `span`)."""
    if base_run is None:
        base_run, base_worker, base_span = run, base_worker or worker, base_span or span
    if base_run is None:
        raise BadParameter("pass the baseline's run: base_run (or run)")
    with ExitStack() as stack:
        base = stack.enter_context(contextmanager(select)(request, base_run, base_worker, base_span))
        new = stack.enter_context(contextmanager(select)(request, new_run or base_run, new_worker, new_span))
        yield base, new
