"""Load one trace file into TraceTables: from the cache when it can, else parse and cache."""

from __future__ import annotations

from typing import Callable

from .entry import cache_key, load_cached, store_cached
from .decode import decode_trace
from .parallel import Helpers, build_tables_parallel
from .read import DEFAULT_MAX_BYTES, read_trace_bytes
from .tables import TraceTables, build_tables

Progress = Callable[[float], None]


def parse_trace_bytes(data: bytes, on_progress: Progress | None = None) -> TraceTables:
    """Parse JSON bytes of a trace; raises TraceFormatError when nothing can be recovered."""
    return build_tables(decode_trace(data), on_progress)


def load_trace(path: str, size: int, mtime: float, *, cache_dir: str | None = None,
               max_bytes: int = DEFAULT_MAX_BYTES, on_progress: Progress | None = None,
               helpers: Helpers | None = None) -> TraceTables:
    """Tables of the trace at `path` (local path or fsspec URL); progress goes 0..1. With
    `helpers`, a big trace's events are decoded on them too."""
    key = cache_key(path, size, mtime)
    if cache_dir:
        cached = load_cached(cache_dir, key, path)
        if cached is not None:
            return cached
    report = on_progress or (lambda _: None)
    raw = read_trace_bytes(path, max_bytes)
    report(0.25)
    decoded = decode_trace(raw.data)
    raw.data = b""  # `decoded` holds what it needs and lets go of it after the events are read
    # Reading is about a quarter of the work; decoding the events the rest.
    def progress(fraction: float) -> None:
        report(0.25 + 0.75 * fraction)

    tables = build_tables_parallel(decoded, helpers, progress) if helpers else build_tables(decoded, progress)
    tables.warnings[:0] = raw.warnings
    if cache_dir:
        store_cached(cache_dir, key, tables)
    return tables
