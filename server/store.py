"""The logdir's traces as the server sees them: discovered, loading, ready or failed.

Loading runs on a small thread pool so requests keep being answered meanwhile (decoding
works in chunks, each releasing the interpreter between them; gunzip and numpy release it
too). A watcher thread re-discovers the logdir every few seconds: new runs and new or
rewritten trace files are picked up without a restart. One file's failure is recorded
against that file alone.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from .logdir import Run, TraceFile, discover
from .settings import Settings
from .trace.decode import TraceFormatError
from .trace.load import load_trace
from .trace.tables import TraceTables

log = logging.getLogger("profboard")

Status = Literal["loading", "ready", "error"]


@dataclass
class FileState:
    file: TraceFile
    status: Status = "loading"
    progress: float = 0.0
    error: str | None = None
    tables: TraceTables | None = None

    @property
    def warnings(self) -> list[str]:
        return list(self.tables.warnings) if self.tables is not None else []


@dataclass
class RunState:
    run: Run
    files: dict[tuple[str, str], FileState] = field(default_factory=dict)  # (worker, span) -> state


class TraceStore:
    """Thread-safe registry of runs and their per-file load state."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self._by_path: dict[str, FileState] = {}
        self._pool = ThreadPoolExecutor(max_workers=max(1, settings.load_threads), thread_name_prefix="profboard-load")
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.discovery_error: str | None = None

    # lifecycle
    def start(self) -> None:
        self.rescan()
        self._watcher = threading.Thread(target=self._watch, name="profboard-watch", daemon=True)
        self._watcher.start()

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _watch(self) -> None:
        while not self._stop.wait(self.settings.rescan_seconds):
            self.rescan()

    def rescan(self) -> None:
        """Discover the logdir again; queue loads for new or changed files."""
        try:
            runs = discover(self.settings.logdir)
            self.discovery_error = None
        except Exception as exc:  # a vanished or unreachable logdir must not kill the watcher
            self.discovery_error = f"cannot list the logdir {self.settings.logdir}: {exc}"
            log.warning(self.discovery_error)
            return
        to_load: list[FileState] = []
        with self._lock:
            for name, run in runs.items():
                state = RunState(run)
                for worker, files in run.workers.items():
                    for i, f in enumerate(files):
                        old = self._by_path.get(f.path)
                        if old is not None and old.file.size == f.size and old.file.mtime == f.mtime:
                            fs = old
                            fs.file = f
                        else:
                            fs = FileState(f)
                            self._by_path[f.path] = fs
                            to_load.append(fs)
                        state.files[(worker, str(i + 1))] = fs
                self._runs[name] = state
            for gone in set(self._runs) - set(runs):
                del self._runs[gone]
        for fs in to_load:
            self._pool.submit(self._load, fs)

    def _load(self, fs: FileState) -> None:
        f = fs.file

        def progress(value: float) -> None:
            fs.progress = value

        started = time.perf_counter()
        try:
            tables = load_trace(f.path, f.size, f.mtime, cache_dir=self.settings.cache_dir,
                                max_bytes=self.settings.max_trace_bytes, on_progress=progress)
        except TraceFormatError as exc:
            fs.error, fs.status = str(exc), "error"
            log.warning("cannot read %s: %s", f.path, exc)
            return
        except MemoryError:
            fs.error, fs.status = "not enough memory to load this trace", "error"
            return
        except Exception as exc:  # any other failure stays with this file
            log.exception("failed to load %s", f.path)
            fs.error, fs.status = f"failed to load this trace ({type(exc).__name__}: {exc})", "error"
            return
        fs.tables, fs.progress, fs.status = tables, 1.0, "ready"
        log.info("loaded %s in %.2fs (%d events)", f.path, time.perf_counter() - started, len(tables.events))

    # queries
    def runs(self) -> list[RunState]:
        with self._lock:
            return list(self._runs.values())

    def run(self, name: str) -> RunState | None:
        with self._lock:
            return self._runs.get(name)
