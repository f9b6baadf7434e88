"""What one profboard server (or one test's server) works with."""

from __future__ import annotations

from dataclasses import dataclass, field

# Trace files larger than this are refused (--max-trace-size): memory for a parse is a few times the file.
DEFAULT_MAX_BYTES = 4 << 30


@dataclass(frozen=True)
class Settings:
    logdir: str
    cache_dir: str | None = None  # None: no on-disk cache
    max_trace_bytes: int = DEFAULT_MAX_BYTES
    # A loaded snapshot takes several times its pickle's size in memory.
    max_snapshot_bytes: int = 1 << 30
    # Processor time of each step of a snapshot's process, plus 1 s per 4 MiB of pickle (server/snapshot/worker.py):
    # past it, the snapshot is refused (a pickle can be built to hash for hours).
    snapshot_cpu_seconds: float = 5.0
    load_workers: int = 2  # processes that parse traces in parallel
    # Bytes the traces' providers may hold in the server (categories, derived data, memoised answers;
    # the store's mapped files are the OS's page cache): past it, traces viewed least recently let go.
    memory_budget: int = 1 << 30
    rescan_seconds: float = 5.0
    # When set, every request needs it (server/auth.py); kept out of repr so it never reaches a log.
    token: str | None = field(default=None, repr=False)
    # Host names requests may carry besides the defaults (server/hosts.py); the bind host is one of those.
    host: str = "127.0.0.1"
    allow_hosts: tuple[str, ...] = ()
    # Folders where the relative files of call stacks are looked for, for editor links (server/sources.py).
    source_roots: tuple[str, ...] = ()
