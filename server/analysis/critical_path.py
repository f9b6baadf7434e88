"""The critical path of a step: the chain of host work, launches, GPU work and synchronisations
that sets the step's time, and that time split by what bound it.

The graph is HTA's "lightweight critical path" (host operators in order on their thread, launch
call -> its kernel, kernels in order on their stream, GPU work -> the host call that waited for
it). Its edges' weights are the time between their ends, so the longest path is found walking
back from the step's end, each time to the dependency that was satisfied last:
1. GPU work (kernel, memcpy, memset) started when both the work before it on its stream had ended
   and its host call had been made. Launched after the stream's previous work ended (idle.py's host
   wait): the path goes to the launch call, and launch call start -> work start is launch overhead.
   Otherwise to the previous work on the stream; the gap is kernel-to-kernel overhead. A gap of
   30 us or more (idle.py's KERNEL_WAIT_US) where other work of its GPU ended inside the gap: the
   work waited for that stream (cudaStreamWaitEvent), and the path goes to the work that ended last.
2. A host thread runs its operators back to back: walking back along it, the host time is CPU
   (data loading inside a DataLoader range) until a synchronising call that blocked: one whose
   waited GPU work ended after the call began. From there the path goes to that work; waited work
   end -> call end is sync latency. A thread other than the main one (the ProfilerStep's: e.g.
   autograd's backward thread) hands back to the main thread where its run of operators (gaps under
   30 us) began.
3. Synchronising calls, as HTA's blocking calls: *Synchronize, copies (cudaMemcpy*), and any call
   a sync event was recorded for (cudaEventQuery's Event Sync). Which work one waited for: with CUDA
   sync events (the collectors' `--sync-events`), for a Stream Sync the last work to end inside the
   call on its stream, for a Context Sync on any stream; for a copy call, its copy's stream's.
   Without them, and for Event Syncs (which event is not read), the last GPU work to end inside
   the call on any stream: `approximated` says so.
4. The path starts at the step's end: at the GPU work that ends it, else on the main thread; it
   ends at the step's start. Its segments tile the step, so the breakdown sums to the step time.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..trace.schema import DEVICE_KINDS, LAUNCH_KINDS, Kind
from .categories import is_communication_kernel_name, is_dataloader_name
from .idle import KERNEL_WAIT_US
from .kinds import of_kinds
from .names import name_mask
from .records import clean_row
from .steps import STEP_PREFIX, Steps

BOUNDS = ("cpu", "data_loading", "launch_overhead", "gpu_compute", "communication", "kernel_overhead", "sync")
SYNC_CATEGORY = "cuda_sync"

NO_SYNC_EVENTS = ("no CUDA sync events in the trace (record them with the collectors' --sync-events): a "
                  "synchronising call (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize) "
                  "waited for the last GPU work to end inside it, on any stream")
EVENT_SYNC = "an Event Sync waited for the last GPU work to end inside it, on any stream (the event is not read)"
CROSS_STREAM = ("GPU work that waited for another stream (cudaStreamWaitEvent, not read) follows the last work "
                "of its GPU to end before it")
OTHER_THREAD = "a host thread other than the main one hands over to the main thread where its run of operators began"
NO_HOST_CALL = "GPU work with no host call continues on the main thread at its start"

_NONE, _LAUNCH, _PREV, _CROSS = range(4)  # what GPU work waited for last (note 1)
_ANY_STREAM = -2


def _is_sync_call(name: str) -> bool:
    return "Synchronize" in name or "Memcpy" in name


@dataclass(frozen=True)
class Thread:
    """A host thread's top-level operators (not inside another; disjoint, by start), the runs they
    form (gaps under KERNEL_WAIT_US), and its blocking synchronising calls by end."""

    op_starts: list[float]
    op_ends: list[float]
    op_rows: list[int]
    op_loading: list[bool]
    run_starts: list[float]
    run_ends: list[float]
    sync_ends: list[float]
    sync_rows: list[int]


@dataclass(frozen=True)
class Graph:
    """What the walk needs of one trace, computed once (vectorised); per events row where noted."""

    ts: np.ndarray
    end: np.ndarray
    pred_kind: np.ndarray  # per row (GPU work): _NONE, _LAUNCH, _PREV, _CROSS
    pred: np.ndarray  # per row: the launch call or earlier GPU work, -1
    comm: np.ndarray  # per row: a communication kernel
    thread_of: np.ndarray  # per row: host thread number, -1
    threads: dict[int, Thread]
    main: int
    waited: dict[int, tuple[int, int, bool]]  # sync call row -> (waited work row, sync event row or -1, exact)
    work_by_end: tuple[np.ndarray, np.ndarray]  # every GPU work row, sorted by end; their ends
    has_sync_events: bool
    has_sync_calls: bool


def _thread_numbers(events: pd.DataFrame) -> np.ndarray:
    pid = events["pid"].cat.codes.to_numpy().astype(np.int64)
    tid = events["tid"].cat.codes.to_numpy().astype(np.int64)
    return (pid + 1) * (len(events["tid"].cat.categories) + 1) + tid + 1


def _by_correlation(rows: np.ndarray, corr: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each correlation id in `keys`, the first of `rows` with it (-1: none, or a key under 0)."""
    first = pd.Series(rows, index=corr[rows])
    found = first[~first.index.duplicated(keep="first")].reindex(keys).fillna(-1).to_numpy().astype(np.int64)
    return np.where(keys >= 0, found, -1)


def _work_predecessors(events: pd.DataFrame, work: np.ndarray, ts: np.ndarray, end: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU work row, what it waited for last (note 1): kind and row."""
    n = len(events)
    kind_out = np.full(n, _NONE, dtype=np.int8)
    pred_out = np.full(n, -1, dtype=np.int64)
    if not len(work):
        return kind_out, pred_out
    device = events["device"].to_numpy()[work]
    stream = events["stream"].to_numpy()[work]
    order = np.lexsort((ts[work], stream, device))
    rows, dev, st = work[order], device[order], stream[order]
    w_end = end[rows]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = (dev[1:] != dev[:-1]) | (st[1:] != st[:-1])
    group = np.cumsum(first) - 1
    # The previous work that ended last on the stream: the latest one to set a new maximum end (one
    # running maximum over all streams, each stream's ends lifted above the ones before).
    rel = w_end - w_end.min()
    lift = group * (rel.max() + 1.0)
    reach = np.maximum.accumulate(rel + lift) - lift
    last_record = np.maximum.accumulate(np.where(rel >= reach, np.arange(len(rows)), -1))
    prev = np.full(len(rows), -1, dtype=np.int64)
    prev[1:] = last_record[:-1]
    prev[first] = -1
    prev_row = np.where(prev >= 0, rows[np.maximum(prev, 0)], -1)
    prev_end = np.where(prev >= 0, end[prev_row], -np.inf)
    # The host call: the earliest runtime or driver call with the work's correlation id.
    corr = events["correlation"].to_numpy()
    kind = events["kind"].to_numpy()
    calls = np.flatnonzero(of_kinds(kind, LAUNCH_KINDS) & (corr >= 0))
    launch = _by_correlation(calls[np.argsort(ts[calls], kind="stable")], corr, corr[rows])
    launch_ts = np.where(launch >= 0, ts[np.maximum(launch, 0)], np.nan)
    # Work of its GPU that ended last before it started, on any stream (for cross-stream waits).
    start = ts[rows]
    cross = np.full(len(rows), -1, dtype=np.int64)
    for d in np.unique(dev):
        mine = np.flatnonzero(dev == d)
        by_end = np.argsort(w_end[mine], kind="stable")
        ends = w_end[mine][by_end]
        at = np.searchsorted(ends, start[mine], side="right") - 1
        cross[mine] = np.where(at >= 0, rows[mine][by_end][np.maximum(at, 0)], -1)
    cross_end = np.where(cross >= 0, end[np.maximum(cross, 0)], -np.inf)
    with np.errstate(invalid="ignore"):
        by_launch = (launch >= 0) & ((prev < 0) | (launch_ts > prev_end))
    by_cross = ~by_launch & (prev >= 0) & (start - prev_end >= KERNEL_WAIT_US) & (cross_end > prev_end) & (
        cross != rows)
    by_prev = ~by_launch & ~by_cross & (prev >= 0)
    kind_out[rows] = np.select([by_launch, by_cross, by_prev], [_LAUNCH, _CROSS, _PREV], _NONE)
    pred_out[rows] = np.select([by_launch, by_cross, by_prev], [launch, cross, prev_row], -1)
    return kind_out, pred_out


def _waited(events: pd.DataFrame, ts: np.ndarray, end: np.ndarray, work: np.ndarray
            ) -> tuple[dict[int, tuple[int, int, bool]], bool, bool]:
    """Per synchronising call that blocked, the GPU work it waited for (note 3); whether the trace has
    sync events, and synchronising calls. The calls: runtime and driver calls named *Synchronize or
    *Memcpy*, and those a sync event was recorded for (cudaEventQuery's Event Sync)."""
    corr = events["correlation"].to_numpy()
    stream = events["stream"].to_numpy()
    syncs = np.flatnonzero((events["cat"] == SYNC_CATEGORY).to_numpy() & (corr >= 0))
    runtime = of_kinds(events["kind"].to_numpy(), LAUNCH_KINDS)
    calls = np.flatnonzero(runtime & (name_mask(events["name"], _is_sync_call) | np.isin(corr, corr[syncs])))
    sync_row = _by_correlation(syncs, corr, corr[calls])
    own_row = _by_correlation(work, corr, corr[calls])
    names = events["name"].to_numpy()
    wait_stream = np.full(len(calls), _ANY_STREAM, dtype=np.int64)
    exact = np.zeros(len(calls), dtype=bool)
    for i, (s, o) in enumerate(zip(sync_row.tolist(), own_row.tolist())):
        if s >= 0:
            kind = str(names[s])
            exact[i] = kind != "Event Sync"
            if kind == "Stream Sync" and stream[s] >= 0:
                wait_stream[i] = stream[s]
        elif o >= 0:  # a copy waits for its own copy's stream
            wait_stream[i], exact[i] = stream[o], True
    waited = np.full(len(calls), -1, dtype=np.int64)
    for s in np.unique(wait_stream):
        pick = wait_stream == s
        pool = work if s == _ANY_STREAM else work[stream[work] == s]
        by_end = pool[np.argsort(end[pool], kind="stable")]
        at = np.searchsorted(end[by_end], end[calls[pick]], side="right") - 1
        waited[pick] = np.where(at >= 0, by_end[np.maximum(at, 0)], -1)
    blocking = (waited >= 0) & (end[np.maximum(waited, 0)] > ts[calls])
    found = {int(c): (int(w), int(s), bool(x)) for c, w, s, x, b in
             zip(calls, waited, sync_row, exact, blocking) if b}
    return found, len(syncs) > 0, len(calls) > 0


def _threads(events: pd.DataFrame, ts: np.ndarray, end: np.ndarray, thread_of: np.ndarray,
             waited: dict[int, tuple[int, int, bool]]) -> dict[int, Thread]:
    kind = events["kind"].to_numpy()
    op = of_kinds(kind, (Kind.CPU_OP, Kind.USER_ANNOTATION)) & ~name_mask(
        events["name"], lambda n: n.startswith(STEP_PREFIX))
    rows = np.flatnonzero(op & (events["dur"].to_numpy() > 0))
    rows = rows[np.lexsort((-end[rows], ts[rows], thread_of[rows]))]
    loading = name_mask(events["name"], is_dataloader_name)
    syncs = np.array(sorted(waited), dtype=np.int64)
    syncs = syncs[np.lexsort((end[syncs], thread_of[syncs]))]
    out: dict[int, Thread] = {}
    for t in np.union1d(thread_of[rows], thread_of[syncs]).tolist():
        mine = rows[thread_of[rows] == t]
        reach = np.maximum.accumulate(end[mine]) if len(mine) else end[mine]
        top = np.ones(len(mine), dtype=bool)
        top[1:] = ts[mine][1:] >= reach[:-1]  # not inside an earlier one
        tops = mine[top]
        new_run = np.ones(len(tops), dtype=bool)
        new_run[1:] = ts[tops][1:] - end[tops][:-1] >= KERNEL_WAIT_US
        run_first = np.flatnonzero(new_run)
        run_last = np.append(run_first[1:] - 1, len(tops) - 1)[:len(run_first)]  # none without operators
        waits = syncs[thread_of[syncs] == t]
        out[t] = Thread(ts[tops].tolist(), end[tops].tolist(), tops.tolist(), loading[tops].tolist(),
                        ts[tops][run_first].tolist(), end[tops][run_last].tolist(), end[waits].tolist(), waits.tolist())
    return out


def build_graph(events: pd.DataFrame) -> Graph:
    """The walk's tables for one trace (notes 1-3)."""
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    kind = events["kind"].to_numpy()
    work = np.flatnonzero(of_kinds(kind, DEVICE_KINDS))
    pred_kind, pred = _work_predecessors(events, work, ts, end)
    comm = (kind == Kind.KERNEL) & name_mask(events["name"], is_communication_kernel_name)
    thread_of = _thread_numbers(events)
    host = of_kinds(kind, (Kind.CPU_OP, Kind.USER_ANNOTATION, *LAUNCH_KINDS))
    thread_of = np.where(host, thread_of, -1)
    waited, has_sync_events, has_sync_calls = _waited(events, ts, end, work)
    threads = _threads(events, ts, end, thread_of, waited)
    step_rows = np.flatnonzero(of_kinds(kind, (Kind.CPU_OP, Kind.USER_ANNOTATION)) & name_mask(
        events["name"], lambda n: n.startswith(STEP_PREFIX)))
    if len(step_rows):
        main = int(pd.Series(thread_of[step_rows]).mode().iloc[0])
    else:
        main = max(threads, key=lambda t: len(threads[t].op_rows), default=-1)
    work_by_end = work[np.argsort(end[work], kind="stable")]
    return Graph(ts, end, pred_kind, pred, comm, thread_of, threads, main, waited,
                 (work_by_end, end[work_by_end]), has_sync_events, has_sync_calls)


class _Walk:
    """Segments collected walking back from a step's end (appended latest first)."""

    def __init__(self, graph: Graph, events: pd.DataFrame, lo: float) -> None:
        self.g, self.lo = graph, lo
        self.kind = events["kind"].to_numpy()
        self.segments: list[dict[str, Any]] = []
        self.approximated: set[str] = set()

    def add(self, kind: str, bound: str, start: float, end: float, event: int | None, **more: Any) -> None:
        start = max(start, self.lo)
        if end > start:
            self.segments.append({"kind": kind, "bound": bound, "start_us": start, "end_us": end,
                                  "event_id": event, **more})

    def gpu(self, row: int, t: float) -> tuple[str, int, float] | None:
        g = self.g
        bound = "communication" if g.comm[row] else "gpu_compute"
        self.add("gpu", bound, float(g.ts[row]), t, row)
        t = min(float(g.ts[row]), t)
        how, pred = int(g.pred_kind[row]), int(g.pred[row])
        if how == _LAUNCH:
            began = min(float(g.ts[pred]), t)
            self.add("launch", "launch_overhead", began, t, pred, to_id=row)
            return ("host", int(g.thread_of[pred]), began)
        if how in (_PREV, _CROSS):
            if how == _CROSS:
                self.approximated.add(CROSS_STREAM)
            ended = min(float(g.end[pred]), t)
            self.add("gpu_gap", "kernel_overhead", ended, t, None)
            return ("gpu", pred, ended)
        self.approximated.add(NO_HOST_CALL)
        return ("host", g.main, t)

    def host(self, thread: int, t: float) -> tuple[str, int, float] | None:
        g = self.g
        th = g.threads.get(thread)
        stop, sync = self.lo, None
        if th is not None:
            at = bisect.bisect_right(th.sync_ends, t) - 1
            if at >= 0 and th.sync_ends[at] > stop:
                stop, sync = th.sync_ends[at], th.sync_rows[at]
        if thread != g.main:
            run = -1 if th is None else bisect.bisect_left(th.run_ends, t)
            began = th.run_starts[run] if th is not None and run < len(th.run_starts) and th.run_starts[run] < t else t
            if began >= stop:
                stop, sync = began, None
        self._host_stretch(th, stop, t)
        if stop <= self.lo:
            return None
        if sync is None:
            self.approximated.add(OTHER_THREAD)
            return ("host", g.main, stop)
        work, event, exact = g.waited[sync]
        if not exact:
            kind_of = EVENT_SYNC if g.has_sync_events and event >= 0 else NO_SYNC_EVENTS
            self.approximated.add(kind_of)
        ended = min(float(g.end[work]), stop)
        self.add("sync", "sync", ended, stop, sync, sync_event_id=None if event < 0 else event, to_id=work)
        return ("gpu", work, ended)

    def _host_stretch(self, th: Thread | None, a: float, b: float) -> None:
        """Host time [a, b] on a thread, as its top-level operators and the time between them."""
        pieces: list[tuple[float, float, int | None, bool]] = []
        cursor = a
        if th is not None:
            first = bisect.bisect_right(th.op_ends, a)
            last = bisect.bisect_left(th.op_starts, b)
            for i in range(first, last):
                s, e = max(th.op_starts[i], a), min(th.op_ends[i], b)
                if s > cursor:
                    pieces.append((cursor, s, None, False))
                pieces.append((s, e, th.op_rows[i], th.op_loading[i]))
                cursor = max(cursor, e)
        if b > cursor:
            pieces.append((cursor, b, None, False))
        for s, e, row, loading in reversed(pieces):
            self.add("host", "data_loading" if loading else "cpu", s, e, row)


def step_critical_path(events: pd.DataFrame, graph: Graph, steps: Steps, index: int) -> dict[str, Any]:
    """Step `index`'s critical path: `segments` by time (kind host / launch / gpu / gpu_gap / sync, bound,
    start_us, end_us, event_id), the breakdown by bound (`*_us`, summing to the step time) and what
    was `approximated`."""
    lo, hi = float(steps.starts[index]), float(steps.ends[index])
    walk = _Walk(graph, events, lo)
    rows, ends = graph.work_by_end
    at = int(np.searchsorted(ends, hi, side="right")) - 1
    state: tuple[str, int, float] | None
    if at >= 0 and ends[at] >= hi and ends[at] > lo:
        state = ("gpu", int(rows[at]), hi)
    else:
        state = ("host", graph.main, hi)
    budget = 4 * len(events) + 16  # every move goes to an earlier event; this only guards odd timestamps
    while state is not None and state[2] > lo and budget > 0:
        where, what, t = state
        state = walk.gpu(what, t) if where == "gpu" else walk.host(what, t)
        budget -= 1
    if state is not None and state[2] > lo:
        walk.add("host", "cpu", lo, state[2], None)
    if graph.has_sync_calls and not graph.has_sync_events:
        walk.approximated.add(NO_SYNC_EVENTS)
    segments = [clean_row(s) for s in reversed(walk.segments)]
    breakdown = {b: 0.0 for b in BOUNDS}
    for s in walk.segments:
        breakdown[s["bound"]] += s["end_us"] - s["start_us"]
    return {
        **clean_row({"step": steps.names[index], "start_us": lo, "end_us": hi, "total_us": hi - lo}),
        "segments": segments,
        "breakdown": clean_row({f"{b}_us": v for b, v in breakdown.items()}),
        "approximated": sorted(walk.approximated),
    }
