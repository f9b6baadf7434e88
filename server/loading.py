"""What a loader process does with one trace (server/store.py hands it the work; server/loaders.py
runs the processes): open or write its store entry, computing the first derived items from the parsed
tables while the entry is written, then compute and store the rest (server/derived.py), telling the
server as it goes. Kept apart from the store so that the server's own start imports none of it (pandas,
Arrow, the analyses): a fresh server lists the logdir's runs before any of that is loaded.
"""

from __future__ import annotations

import importlib
import os
from concurrent.futures import Future
from functools import partial
from multiprocessing.util import Finalize
from typing import Any, Callable

from .api import SLICES
from .derived import compute_stored, derive, derive_parsed
from .items import LOAD_ORDER, load_items
from .loaders import report as report_to_server
from .loaders import watch_parent
from .trace.entry import Entry, discard
from .trace.load import store_trace
from .trace.parallel import Helpers, give_back_memory, helper_count, small_pages
from .trace.tables import TraceTables

# Files from this size up are big: they get helpers (a gzip file this big inflates past
# parallel.PARALLEL_MIN_BYTES), and their loader gives the memory of their tables back to the OS.
BIG_FILE_BYTES = 16 << 20
_worker_helpers: Helpers | None = None  # this loader's helper processes, started on its first big file


def _live_helpers() -> Helpers | None:
    """This worker's helpers, unless none were started or one died."""
    return _worker_helpers if _worker_helpers is not None and not _worker_helpers.broken else None


def _helpers_for(size: int) -> Helpers | None:
    """This worker's helpers, started on its first big file; none on a single core."""
    global _worker_helpers
    count = helper_count()
    if _live_helpers() is None and size >= BIG_FILE_BYTES and count > 0:
        _worker_helpers = Helpers.start(count, initializer=partial(watch_parent, os.getpid()))
        # A loader that leaves (its pool shut down when idle) waits for its children before the exit step
        # that would stop the helpers' pool: it waited for them forever, and the server's exit for it.
        # Exit finalizers run before that wait, highest priority first: this one before the queues' (10),
        # which stop the threads that would send the helpers their signal to leave.
        Finalize(None, _worker_helpers.pool.shutdown, exitpriority=100)
    return _worker_helpers


def load_in_worker(task: int, path: str, size: int, mtime: float, worker: str, stores: list[str], max_bytes: int,
                    entry: Entry | None, shared: str | None) -> Entry:
    """Runs in a worker process: the trace's store entry (`entry`, when the server found one, else
    written from the parsed trace) with its derived items computed and stored. Reports (task,
    fraction) while parsing, then derived.derive's events, "ready" with the entry."""
    try:
        return _load(task, path, size, mtime, worker, stores, max_bytes, entry, shared)
    finally:
        if size >= BIG_FILE_BYTES:
            give_back_memory()


def _load(task: int, path: str, size: int, mtime: float, worker: str, stores: list[str], max_bytes: int,
          entry: Entry | None, shared: str | None) -> Entry:
    def report(value: Any) -> None:
        report_to_server(task, value)

    tables = None
    if entry is not None:
        try:
            tables = entry.tables()
        except MemoryError:
            raise
        except Exception as exc:  # a damaged table: parse the trace again
            discard(entry.folder, str(exc), path)
            entry = None
    computed: dict[str, Any] = {}
    if entry is None:
        # The first page's items are computed from the parsed tables while the entry is written.
        entry, tables = store_trace(path, size, mtime, stores, max_bytes=max_bytes, on_progress=report,
                                    helpers=_helpers_for(size), shared=shared,
                                    meanwhile=partial(_derive_parsed, worker, computed))
        if entry is None:
            raise OSError(f"no store folder could be written ({', '.join(stores)})")
        if size >= BIG_FILE_BYTES:
            # The rest come from the stored tables, mapped (read back into the page cache as they were
            # written: trace/entry.py), as in the helper: the parsed ones held 0.75 GB of this process's
            # memory while it computed the timeline's layout (0.5 GB more), which took the server's tree
            # past 2.5 GB on the 1 GB torch.compile trace. Mapped, the items took as long or less there.
            tables = None
            give_back_memory()
            tables = entry.tables()
    names = load_items(entry.rows.get("events", 0))
    # A big trace's items are computed two at a time when its parse had helpers: they idle meanwhile.
    helpers = _live_helpers() if names == LOAD_ORDER else None
    # The items' big arrays are written once and read a few times: faulting in huge pages for them cost
    # more than they give (the Llama trace's layout: 2.4 s, 0.7 s without).
    with small_pages():
        derive(entry, tables, worker, lambda event: report(("ready", entry, *event[1:]) if event[0] == "ready" else event),
               names, helper=None if helpers is None else partial(_on_helper, helpers, entry, worker),
               computed=computed)
    return entry


def _derive_parsed(worker: str, computed: dict[str, Any], tables: TraceTables, written: Callable[[], bool]) -> None:
    """store_trace's `meanwhile` in a loader: derived.derive_parsed, once the helpers (which import only what
    parsing needs, to take their first piece sooner) were told to import what computing items needs."""
    if (helpers := _live_helpers()) is not None:
        helpers.pool.submit(importlib.import_module, derive.__module__)
    with small_pages():
        derive_parsed(worker, computed, tables, written)


def _on_helper(helpers: Helpers, entry: Entry, worker: str, name: str) -> Future:
    return helpers.pool.submit(compute_stored, entry, worker, name)


def warm() -> None:
    """A loader's imports before its first load: this module's, and the view slices, whose activity
    checks run at every load (the "views" item)."""
    for entry in SLICES:
        entry.view
