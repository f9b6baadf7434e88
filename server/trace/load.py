"""Load one trace file: parse it into TraceTables, and keep it in the store (server/trace/entry.py)."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from .entry import Entry, write_entry
from .keys import entry_key
from .parallel import Helpers
from .parse import parse_raw_trace, parse_trace_bytes, parse_trace_file  # noqa: F401 (parse_trace_bytes: its old home)
from .read import DEFAULT_MAX_BYTES, open_trace_file, read_trace_bytes
from .mirror import local_stores
from .shared import open_entry_from
from .tables import TraceTables

Progress = Callable[[float], None]

log = logging.getLogger("profboard")


def load_trace(path: str, size: int, mtime: float, *, cache_dir: str | None = None,
               max_bytes: int = DEFAULT_MAX_BYTES, on_progress: Progress | None = None,
               helpers: Helpers | None = None) -> TraceTables:
    """Tables of the trace at `path` (local path or fsspec URL); progress goes 0..1. With
    `cache_dir`, read memory-mapped from its store entry when it has a good one, else parsed and
    stored there (a store that cannot be written is logged, not an error). With `helpers`, a big
    trace's events are decoded on them too."""
    return store_trace(path, size, mtime, [cache_dir] if cache_dir else [], max_bytes=max_bytes,
                       on_progress=on_progress, helpers=helpers)[1]


# (the parsed tables, whether their entry is written yet) -> None: work done while the entry is written.
Meanwhile = Callable[[TraceTables, Callable[[], bool]], None]


def store_trace(path: str, size: int, mtime: float, stores: list[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                on_progress: Progress | None = None, helpers: Helpers | None = None, shared: str | None = None,
                meanwhile: Meanwhile | None = None) -> tuple[Entry | None, TraceTables]:
    """The trace's store entry and tables: the entry in the first of `stores` when it has a good one
    (or `shared`, a store on shared storage, has one to copy there; a store given as a URL is such a
    store, and its local mirror takes its place: server/trace/shared.py), else the trace parsed and
    written to the first store that takes it (None when none does). A parsed trace's entry is written
    by another thread while `meanwhile` runs in this one with the parsed tables."""
    key = entry_key(path, size, mtime)
    stores, found = local_stores(stores)
    shared = shared or found
    if stores:
        entry = open_entry_from(stores[0], key, shared, path)
        if entry is not None:
            return entry, entry.tables()
    tables = parse_trace(path, max_bytes, on_progress, helpers)
    if meanwhile is None or not stores:
        return _write(path, key, tables, stores), tables
    # Writing is mostly the kernel's work, which releases the GIL: a new file's pages cost 2 s for the
    # Llama trace's 330 MB of tables on the machine measured, while this thread computes on another core.
    written: list[Entry | None] = []
    failed: list[BaseException] = []

    def write() -> None:
        try:
            written.append(_write(path, key, tables, stores))
        except BaseException as exc:  # noqa: BLE001 (raised in the calling thread)
            failed.append(exc)

    writer = threading.Thread(target=write, name="profboard-write-entry", daemon=True)
    writer.start()
    try:
        meanwhile(tables, lambda: not writer.is_alive())
    finally:
        writer.join()
    if failed:
        raise failed[0]
    return written[0], tables


def _write(path: str, key: str, tables: TraceTables, stores: list[str]) -> Entry | None:
    """The tables written as the entry `key` in the first of `stores` that takes it; None when none does."""
    for store in stores:
        try:
            return write_entry(store, key, tables)
        except Exception as exc:  # disk full, read-only folder: the next store, or none
            log.warning("cannot write the store entry of %s in %s: %s: %s", path, store, type(exc).__name__, exc)
    return None


def parse_trace(path: str, max_bytes: int = DEFAULT_MAX_BYTES, on_progress: Progress | None = None,
                helpers: Helpers | None = None) -> TraceTables:
    """Parse the trace at `path` into tables; raises TraceFormatError when nothing can be recovered."""
    report = on_progress or (lambda _: None)
    file = open_trace_file(path, max_bytes)
    tables = parse_trace_file(file, report, helpers) if file is not None else None
    if tables is not None:
        return tables
    raw = read_trace_bytes(path, max_bytes)
    report(0.25)
    # Reading is about a quarter of the work; decoding the events the rest.
    def progress(fraction: float) -> None:
        report(0.25 + 0.75 * fraction)

    tables = parse_raw_trace(raw, progress, helpers)
    tables.warnings[:0] = raw.warnings
    return tables
