"""`profboard index`: fill the store ahead of the server, in parallel on a Dask cluster.

Every trace of the logdir whose store entry lacks the items a loader computes at load
(items.load_items: what lists it, and the worker's summary that the Distributed view combines; the
overview of a rank takes a fraction of a second when first asked for, and computing it for every rank
made indexing twice as long) is parsed, its entry written and those items computed, one trace per task: in this process (`workers=0`), on a Dask LocalCluster of
worker processes, or on an existing cluster (a scheduler address). Each task does what the server's
loader does, with the same code, so the entries are the same wherever they were made. A store on
shared storage (a URL) is written through a local store: the task makes the entry there and
publishes it (server/trace/shared.py).

Dask is imported only here, and only when a cluster is used: the server never imports it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterable, Iterator, Literal

from .derived import derive, derive_parsed
from .items import load_items, tag
from .logdir import TraceFile, discover, is_remote
from .settings import DEFAULT_MAX_BYTES
from .trace.decode import TraceFormatError
from .trace.load import store_trace
from .trace.shared import publish_entry

Outcome = Literal["indexed", "present", "failed"]


@dataclass(frozen=True)
class Indexed:
    """What a task did with one trace."""

    path: str
    outcome: Outcome
    reason: str = ""  # why it failed: one line


@dataclass
class Report:
    total: int
    indexed: int = 0
    present: int = 0
    failures: list[Indexed] = field(default_factory=list)
    seconds: float = 0.0


class BadInput(Exception):
    """The logdir or the cluster cannot be used; the message says why, in one line."""


def traces(logdir: str) -> list[TraceFile]:
    """Every trace file of the logdir, run by run, worker by worker, span by span."""
    try:
        runs = discover(logdir)
    except (OSError, ValueError) as exc:
        raise BadInput(f"cannot list {logdir}: {exc}") from None
    return [f for run in runs.values() for files in run.workers.values() for f in files]


def index_trace(path: str, size: int, mtime: float, worker: str, store: str,
                max_bytes: int = DEFAULT_MAX_BYTES) -> Indexed:
    """Make the trace's entry in `store` (a folder or a shared store's URL) with the items of load:
    a task of `profboard index`, run wherever Dask puts it. A trace that cannot be read is an
    outcome ("failed", with the reason), not an error."""
    shared = store if is_remote(store) else None
    local = tempfile.mkdtemp(prefix="profboard-index-") if shared else store
    try:
        # The entry as the store has it (a shared one copied here), else the trace parsed and stored.
        computed: dict[str, Any] = {}
        entry, tables = store_trace(path, size, mtime, [local], max_bytes=max_bytes, shared=shared,
                                    meanwhile=partial(derive_parsed, worker, computed))
        if entry is None:
            return Indexed(path, "failed", f"cannot write the store {local}")
        wanted = load_items(entry.rows.get("events", 0))
        if all(tag(name, worker) in entry.item_tags().get(name, ()) for name in wanted):
            return Indexed(path, "present")
        derive(entry, tables, worker, lambda event: None, wanted, computed=computed)
        if shared is not None:
            publish_entry(entry, shared)
        return Indexed(path, "indexed")
    except TraceFormatError as exc:
        return Indexed(path, "failed", _one_line(str(exc)))
    except Exception as exc:  # whatever else reading this one trace raised: the others go on
        return Indexed(path, "failed", _one_line(f"{type(exc).__name__}: {exc}"))
    finally:
        if shared is not None:
            shutil.rmtree(local, ignore_errors=True)


def _one_line(text: str) -> str:
    return " ".join(text.split())


Task = tuple[str, int, float, str]

# How long a scheduler address is tried before it counts as unreachable.
SCHEDULER_TIMEOUT = "10s"


def _in_process(tasks: list[Task], store: str, max_bytes: int) -> Iterator[Indexed]:
    for path, size, mtime, worker in tasks:
        yield index_trace(path, size, mtime, worker, store, max_bytes)


def _on_dask(tasks: list[Task], store: str, max_bytes: int, scheduler: str | None, workers: int) -> Iterator[Indexed]:
    """The tasks' outcomes as they complete on a Dask cluster: the one at `scheduler`, else a
    LocalCluster of `workers` processes (one thread each: parsing holds the GIL)."""
    from distributed import Client, LocalCluster, as_completed

    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=SCHEDULER_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise BadInput(f"cannot reach the Dask scheduler at {scheduler}: {_one_line(str(exc))}") from None
        cluster = None
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        paths = {}
        for task in tasks:
            paths[client.submit(index_trace, *task, store, max_bytes, pure=False)] = task[0]
        for future in as_completed(list(paths)):
            if future.status == "error":  # the task itself broke (a worker died, say): its trace failed
                exc = future.exception()
                yield Indexed(paths[future], "failed", _one_line(f"{type(exc).__name__}: {exc}"))
            else:
                yield future.result()
            future.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def index(logdir: str, store: str, *, scheduler: str | None = None, workers: int | None = None,
          max_bytes: int = DEFAULT_MAX_BYTES, on_done: Callable[[Indexed, int, int], None] = lambda *a: None) -> Report:
    """Index every trace of `logdir` into `store`: in this process with `workers` 0, else on Dask
    (`scheduler`, or a LocalCluster of `workers` processes, by default one per core). `on_done`
    hears each outcome with the count done and the total. Raises BadInput."""
    start = time.perf_counter()
    files = traces(logdir)
    tasks = [(f.path, f.size, f.mtime, f.worker) for f in files]
    report = Report(total=len(tasks))
    if workers is None:
        workers = os.cpu_count() or 1
    if not tasks:
        outcomes: Iterable[Indexed] = ()
    elif scheduler is None and workers == 0:
        outcomes = _in_process(tasks, store, max_bytes)
    else:
        outcomes = _on_dask(tasks, store, max_bytes, scheduler, workers)
    for done, outcome in enumerate(outcomes, 1):
        if outcome.outcome == "failed":
            report.failures.append(outcome)
        elif outcome.outcome == "present":
            report.present += 1
        else:
            report.indexed += 1
        on_done(outcome, done, report.total)
    report.seconds = time.perf_counter() - start
    return report


class Progress:
    """Tells on `stream` how indexing goes: done/total, rate and ETA (a line at most every
    `every_s`), and a line per trace that could not be read."""

    def __init__(self, stream, every_s: float = 2.0) -> None:
        self.stream, self.every_s = stream, every_s
        self.start = self.last = time.monotonic()
        self.failed = 0

    def __call__(self, outcome: Indexed, done: int, total: int) -> None:
        if outcome.outcome == "failed":
            self.failed += 1
            print(f"profboard index: cannot read {outcome.path}: {outcome.reason}", file=self.stream, flush=True)
        now = time.monotonic()
        if now - self.last < self.every_s and done < total:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = f", ETA {(total - done) / rate:.0f} s" if done < total else ""
        failed = f" ({self.failed} failed)" if self.failed else ""
        print(f"profboard index: {done}/{total}{failed}, {rate:.1f} traces/s{eta}", file=self.stream, flush=True)
