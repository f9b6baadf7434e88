"""The logdir's traces as the server sees them: discovered, loading, ready or failed.

Each trace lives in the store (server/trace/entry.py): a file whose store entry holds the current
views item opens at once (a thread reads its meta.json; its tables are checked when first mapped)
and its provider (server/provider.py) serves it. Otherwise it loads in a pool of worker processes
(server/loaders.py: started before the server's imports, each importing what loading needs meanwhile):
the server's own process never stalls on a big decode, several files load at once, and parsing
garbage never lands in the server. A worker writes the entry, tells the server the trace is ready
once the views it has are known, then computes and stores its derived items (server/derived.py),
reporting progress and each item through a queue; the server gets the entry (a handle: where it
is, metadata, warnings), never the tables. With --no-cache, or when the store folder cannot be
written, entries go to a private temporary store deleted at exit. A store on shared storage
(--cache-dir s3://..., which `profboard index` fills: server/trace/shared.py) is read, not written:
an entry found there is copied whole into its local mirror and served from the copy; a trace it
lacks is parsed into the mirror. A worker that dies (out of memory, say)
breaks the pool: a fresh one is made and each file it held is tried once more. A worker
loading a big file spawns helper processes (one fewer than the cores, kept for later files)
that decode pieces of it alongside.
A watcher thread re-discovers the logdir every few seconds: new runs and new or rewritten
trace files are picked up without a restart. One file's failure is recorded against that
file alone.
"""

from __future__ import annotations

import functools
import itertools
import logging
import multiprocessing
import os
import queue
import shutil
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .budget import Budget
from .loaders import Loaders, end_loader, load_in_loader, submit
from .logdir import Run, TraceFile, discover, display_url, is_remote, readable
from .settings import Settings
from .trace.keys import entry_key
from .trace.mirror import local_stores

if TYPE_CHECKING:
    from .provider import TraceProvider
    from .trace.entry import Entry

# What opening and serving a trace need (its entry, items and provider: Arrow and numpy) is imported
# where first used, by the threads that open entries and take loaders' answers, never at the top: a
# fresh server lists the logdir's runs before any of it is loaded (issue 15). Serving a stored trace's
# overview needs no more (server/items.py); pandas and the analyses come with the first item computed or
# view imported. The loaders' side is server/loading.py.

log = logging.getLogger("profboard")

# A trace this big takes about its size in memory to parse and, with its loader's helpers, every core for
# seconds. Two such parses at once (two ranks of about 1 GB, on two cores) each took twice as long: the
# first overview came after 10 s instead of 6 s, and the process tree peaked at 2.7 GB instead of 1.9 GB.
# So they take turns, as many at once as the cores hold a loader and its helpers (_parses_at_once).
ALONE_BYTES = 256 << 20
# How many times a gzip trace inflates, for that size (12 to 17 for the 1 GB traces measured).
GZIP_RATIO = 12

Status = Literal["loading", "ready", "error"]


@dataclass
class FileState:
    file: TraceFile
    status: Status = "loading"
    progress: float = 0.0
    error: str | None = None
    provider: TraceProvider | None = None
    attempts: int = 0
    wanted: bool = False  # a request asked for it while it loaded: it loads before files nobody asked for

    @property
    def warnings(self) -> list[str]:
        return self.provider.warnings if self.provider is not None else []


@dataclass
class RunState:
    run: Run
    files: dict[tuple[str, str], FileState] = field(default_factory=dict)  # (worker, span) -> state


class TraceStore:
    """Thread-safe registry of runs and their per-file load state."""

    def __init__(self, settings: Settings, loaders: Loaders | None = None) -> None:
        """`loaders`: the loader processes, when started before the server's imports (server/cli.py)."""
        self.settings = settings
        self._lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self._by_path: dict[str, FileState] = {}
        self._loaders = loaders or Loaders(settings.load_workers)
        self._pool = self._loaders.pool
        self._tasks: dict[int, FileState] = {}
        # Held while a load's news is taken (_loader_event) and while its end is (_finish): the two come
        # from different threads, and news taken after the end is dropped.
        self._news_lock = threading.RLock()
        self._task_ids = itertools.count()
        self._stop = threading.Event()
        # Loads wait here for a free loader, not in the pool, whose queue is first come, first served: a
        # logdir may hold thousands of traces, and the run a request asks for should load next (run()).
        self._waiting: deque[tuple[FileState, tuple]] = deque()
        self._opening: deque[tuple[FileState, tuple]] = deque()  # files for the opener thread, in turn
        self._openers = 0  # opener threads at work on the queue
        self._loading = 0  # loads handed to the pool and not done
        self._alone = 0  # of those, parses of traces of ALONE_BYTES or more
        self._started = 0  # loads handed to the pool so far: whether any came while loaders idled
        self._leaving: list[multiprocessing.Process] = []  # loaders let go when idle, maybe not gone yet
        self._queue_lock = threading.Lock()
        self.budget = Budget(settings.memory_budget)
        # Entries go to the store folder (a shared store's local mirror); to a private one (made at start,
        # deleted at exit) with --no-cache, or when the store folder cannot be written.
        self._stores, self._shared = local_stores([settings.cache_dir] if settings.cache_dir else [])
        self._scratch: str | None = None
        # Opening an entry reads a few small files, but a logdir may hold thousands: not in the scan.
        self._opener = ThreadPoolExecutor(max_workers=OPENERS, thread_name_prefix="profboard-open")
        self.discovery_error: str | None = None
        self.discovery_notes: list[str] = []  # what the last scan noticed (server/logdir.py)

    # lifecycle
    def start(self) -> None:
        self._scratch = _scratch_store()
        self._stores.append(self._scratch)
        threading.Thread(target=self._drain_progress, name="profboard-progress", daemon=True).start()
        threading.Thread(target=self._release_idle, name="profboard-idle", daemon=True).start()
        if self.settings.cache_dir:
            # Housekeeping, a few seconds after the start rather than beside the first answers.
            sweeper = threading.Timer(SWEEP_AFTER_S, _sweep, args=(self._stores[0],))
            sweeper.daemon = True
            sweeper.start()
        # A remote store may take minutes to answer or time out (retries, an unreachable
        # endpoint): the server starts at once and the watcher makes the first scan.
        remote = is_remote(self.settings.logdir)
        if not remote:
            self.rescan()
        threading.Thread(target=self._watch, args=(remote,), name="profboard-watch", daemon=True).start()

    def close(self) -> None:
        """Stop at once: queued loads are dropped and the loaders are ended with their helpers, mid-load
        too. Nothing of a load is worth waiting for (a store entry is renamed into place whole), and a
        1 GB decode cannot be interrupted: the pool's own shutdown waited for it, and Python's exit
        waits for the pool, so the server stayed up for a minute after Ctrl-C."""
        self._stop.set()
        self._opener.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            pool, leaving = self._pool, self._leaving
        # The pool's processes, a private dict it lets go of on shutdown; read after it, since a load
        # submitted meanwhile may start one. Python's exit waits for every child: those leaving go too.
        processes = getattr(pool, "_processes", None) or {}
        pool.shutdown(wait=False, cancel_futures=True)
        loaders = list(processes.values()) + [p for p in leaving if p.is_alive()]
        for loader in loaders:
            end_loader(loader.pid)
        deadline = time.monotonic() + _LOADER_EXIT_S
        for loader in loaders:
            loader.join(max(0.0, deadline - time.monotonic()))
        if self._scratch is not None:  # once no loader writes there
            shutil.rmtree(self._scratch, ignore_errors=True)

    def _watch(self, scan_first: bool) -> None:
        if scan_first:
            self.rescan()
        while not self._stop.wait(self.settings.rescan_seconds):
            self.rescan()

    def _drain_progress(self) -> None:
        while not self._stop.is_set():
            try:
                task, value = self._loaders.progress.get(timeout=0.5)
            except queue.Empty:
                continue
            except (EOFError, OSError):
                return
            fs = self._tasks.get(task)
            if fs is None:
                continue
            try:
                if isinstance(value, float):
                    fs.progress = value
                else:
                    self._loader_event(task, fs, value)
            except Exception:  # this thread ending would leave every later load unheard, loading forever
                log.exception("cannot take the loader's news of %s", fs.file.path)

    def _loader_event(self, task: int, fs: FileState, event: tuple) -> None:
        """What derived.derive tells as a loader computes a trace's items (the entry joins "ready").
        News that comes after the load's end (_finish, in another thread) is old: told then, a trace
        would wait for a loader that is gone, and its requests with it."""
        with self._news_lock:
            if task not in self._tasks:
                return
            if event[0] == "ready":
                self._ready(fs, event[1]).loader_started(event[2])
            elif fs.provider is not None and event[0] == "stored":
                fs.provider.loader_stored(*event[1:])

    def _release_idle(self) -> None:
        """Traces nobody asked for a while let their mapped pages go (provider.release_if_idle)."""
        while not self._stop.wait(1.0):
            with self._lock:
                providers = [fs.provider for fs in self._by_path.values() if fs.provider is not None]
            for provider in providers:
                provider.release_if_idle()

    def rescan(self) -> None:
        """Discover the logdir again; queue loads for new or changed files."""
        notes: list[str] = []
        try:
            runs = discover(self.settings.logdir, notes)
            self.discovery_error, self.discovery_notes = None, notes
        except Exception as exc:  # a vanished or unreachable logdir must not kill the watcher
            self.discovery_error = readable(f"cannot list the logdir {display_url(self.settings.logdir)}: {exc}")
            log.warning(self.discovery_error)
            return
        to_load: list[FileState] = []
        by_path: dict[str, FileState] = {}  # only what this scan saw: vanished files let go of their data
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
                            to_load.append(fs)
                        by_path[f.path] = fs
                        state.files[(worker, str(i + 1))] = fs
                self._runs[name] = state
            for gone in set(self._runs) - set(runs):
                del self._runs[gone]
            dropped = [fs for path, fs in self._by_path.items() if by_path.get(path) is not fs]
            self._by_path = by_path
        for fs in dropped:
            if fs.provider is not None:
                fs.provider.close()
        for fs in to_load:
            self._open(fs)

    def _open(self, fs: FileState) -> None:
        """Serve the file from its store entry, or load it (in opener threads, each taking the next file
        queued: a task each for 2,000 files took half a second of the server's start)."""
        with self._queue_lock:
            _queue_up(self._opening, fs, ())
            if self._openers >= OPENERS:
                return
            self._openers += 1
        try:
            self._opener.submit(self._open_queued)
        except RuntimeError:  # shut down: the server is stopping
            pass

    def _open_queued(self) -> None:
        while True:
            with self._queue_lock:
                if not self._opening or self._stop.is_set():
                    self._openers -= 1
                    return
                fs, _ = self._opening.popleft()
            try:
                self._open_now(fs)
            except Exception:  # one file's trouble must not stop the others' opening
                log.exception("cannot open the store entry of %s", fs.file.path)

    def _open_now(self, fs: FileState) -> None:
        f = fs.file
        key = entry_key(f.path, f.size, f.mtime)
        if self._shared is None and not os.path.lexists(os.path.join(self._stores[0], key)):
            # Nothing stored: load it, without importing what opening needs, which the server's own first
            # answers (a big logdir's run list) need not share the process with.
            self._submit(fs, None)
            return
        from .items import current_items, load_items
        from .trace.shared import open_entry_from

        try:
            entry = open_entry_from(self._stores[0], key, self._shared, f.path, check=False)
            current = current_items(entry, f.worker) if entry is not None else set()
        except Exception:  # never leave the file waiting: an error in a thread pool's task goes unseen
            log.exception("cannot open the store entry of %s; loading it", f.path)
            entry, current = None, set()
        if entry is not None and "views" in current:
            self._ready(fs, entry)
            if set(load_items(entry.rows.get("events", 0))) - current:
                self._submit(fs, entry)  # stale items: the loader computes them, in the background
            return
        self._submit(fs, entry)

    def _ready(self, fs: FileState, entry: Entry) -> TraceProvider:
        """The file is served from `entry` (its provider made once)."""
        from .provider import TraceProvider

        if fs.provider is None:
            fs.provider = TraceProvider(entry, fs.file.worker, self.budget, reload=lambda: self._reload(fs))
            fs.progress, fs.status = 1.0, "ready"
            log.info("ready: %s (%d events)", fs.file.path, entry.rows["events"])
        return fs.provider

    def _reload(self, fs: FileState) -> None:
        """The file's entry turned out damaged (and was removed): load the trace again."""
        provider, fs.provider = fs.provider, None
        fs.progress, fs.status = 0.0, "loading"
        if provider is not None:
            provider.close()
        self._submit(fs, None)

    def _submit(self, fs: FileState, *args: Any) -> None:
        """Queue a load of `fs` (arguments for _start): first if a request asked for the file."""
        if _parses_alone(fs, args):
            _parses_at_once()  # its first call imports the parser (numpy): here, not under the queue's lock
        with self._queue_lock:
            _queue_up(self._waiting, fs, args)
        self._feed()

    def _feed(self) -> None:
        """Hand queued loads to the pool while it has a loader free: the first in the queue, unless it is a
        big parse and as many run as the cores hold (ALONE_BYTES); then the first that is not."""
        while True:
            with self._queue_lock:
                if self._stop.is_set() or not self._waiting or self._loading >= max(1, self.settings.load_workers):
                    return
                if self._loaders.starting(self._feed):
                    return
                turn = self._next_turn()
                if turn is None:
                    return
                i, alone = turn
                fs, args = self._waiting[i]
                del self._waiting[i]
                self._loading += 1
                self._alone += alone
                self._started += 1
            try:
                self._start(fs, *args, alone)
            except Exception as exc:  # no loader could be started (out of memory or processes, say)
                with self._queue_lock:
                    self._loading -= 1
                    self._alone -= alone
                log.error("cannot start loading %s: %s: %s", fs.file.path, type(exc).__name__, exc)
                fs.error = f"could not start a process to load this trace ({type(exc).__name__}: {exc})"
                fs.status = "error"

    def _next_turn(self) -> tuple[int, bool] | None:
        """The place in the queue of the first load that may start now, and whether it is a big parse (with
        the queue's lock held)."""
        for i, (fs, args) in enumerate(self._waiting):
            alone = _parses_alone(fs, args)
            if not alone or self._alone < _parses_at_once():
                return i, alone
        return None

    def _loaded(self, alone: bool) -> None:
        with self._queue_lock:
            self._loading -= 1
            self._alone -= alone
            idle = not self._loading and not self._waiting
            started = self._started
        if idle:
            timer = threading.Timer(LOADERS_IDLE_S, self._retire_loaders, args=(started,))
            timer.daemon = True
            timer.start()
        self._feed()

    def _retire_loaders(self, started: int) -> None:
        """End the loaders (with their helpers) if no load came since they went idle: each holds its
        imports and heap, 150 MB or more, for nothing. The next load starts new ones."""
        with self._queue_lock:
            if self._started != started or self._loading or self._stop.is_set():
                return
            with self._lock:
                idle, self._pool = self._pool, self._loaders.new_pool()  # a pool starts no process until it has work
        leaving = list((getattr(idle, "_processes", None) or {}).values())
        idle.shutdown(wait=False)
        with self._lock:
            self._leaving = [p for p in self._leaving if p.is_alive()] + leaving

    def _start(self, fs: FileState, entry: Entry | None, alone: bool) -> None:
        f, s = fs.file, self.settings
        task = next(self._task_ids)
        self._tasks[task] = fs
        fs.attempts += 1
        args = (load_in_loader, task, f.path, f.size, f.mtime, f.worker, self._stores, s.max_trace_bytes, entry,
                self._shared)
        try:
            future = submit(self._pool, *args)
        except BrokenProcessPool:
            self._replace_broken_pool()
            future = submit(self._pool, *args)
        except RuntimeError:  # the pool was shut down: the server is stopping
            self._tasks.pop(task, None)
            return
        future.add_done_callback(lambda done: self._finish(task, done))
        future.add_done_callback(lambda done: self._loaded(alone))

    def _replace_broken_pool(self) -> None:
        with self._lock:
            if getattr(self._pool, "_broken", False) and not self._stop.is_set():
                self._pool = self._loaders.new_pool()

    def _finish(self, task: int, future: Future) -> None:
        with self._news_lock:
            self._finish_task(task, future)

    def _finish_task(self, task: int, future: Future) -> None:
        from .trace.decode import TraceFormatError

        fs = self._tasks.pop(task, None)
        if fs is None or future.cancelled():
            return
        exc = future.exception()
        served = fs.provider
        if served is not None:  # the loader was computing items of a trace already served
            served.loader_done()
        if exc is None:
            entry = future.result()
            self._ready(fs, entry).entry.checked.update(entry.checked)
        elif served is not None:
            if not isinstance(exc, BrokenProcessPool) or not self._stop.is_set():
                log.error("computing the derived data of %s failed (%s: %s): the server computes it when asked",
                          fs.file.path, type(exc).__name__, exc)
            if isinstance(exc, BrokenProcessPool):
                self._replace_broken_pool()
        elif isinstance(exc, TraceFormatError):
            fs.error, fs.status = str(exc), "error"
            log.warning("cannot read %s: %s", fs.file.path, exc)
        elif isinstance(exc, BrokenProcessPool):
            if self._stop.is_set():
                return
            self._replace_broken_pool()
            if fs.attempts < 2:
                self._submit(fs, None)
            else:
                fs.error, fs.status = "the process loading this trace died (out of memory?)", "error"
        else:
            log.error("failed to load %s: %s: %s", fs.file.path, type(exc).__name__, exc)
            message = "not enough memory to load this trace" if isinstance(exc, MemoryError) else (
                f"failed to load this trace ({type(exc).__name__}: {exc})")
            fs.error, fs.status = message, "error"

    # queries
    def runs(self) -> list[RunState]:
        with self._lock:
            return list(self._runs.values())

    def run(self, name: str) -> RunState | None:
        """The run `name`. A request for it is someone viewing it: its files still queued load next."""
        with self._lock:
            state = self._runs.get(name)
        if state is not None:
            self._first([fs for fs in state.files.values() if fs.status == "loading"])
        return state

    def _first(self, files: list[FileState]) -> None:
        """`files` go to the front of the load queue, and there when they join it later."""
        if not files:
            return
        ids = {id(fs) for fs in files}
        with self._queue_lock:
            for fs in files:
                fs.wanted = True
            self._opening = _to_front(self._opening, ids)
            self._waiting = _to_front(self._waiting, ids)


def _parses_alone(fs: FileState, args: tuple) -> bool:
    """Whether the queued load parses a trace of ALONE_BYTES or more (rather than open its store entry)."""
    size = fs.file.size * (GZIP_RATIO if fs.file.path.endswith(".gz") else 1)
    return size >= ALONE_BYTES and (not args or args[0] is None)


@functools.cache
def _parses_at_once() -> int:
    """How many big parses may run at once: each takes a loader and its helpers' cores."""
    from .trace.parallel import helper_count  # numpy: only once a big trace is queued

    return max(1, (os.cpu_count() or 1) // (helper_count() + 1))


def _queue_up(queue: deque[tuple[FileState, tuple]], fs: FileState, args: tuple) -> None:
    """Add `fs` to a queue of the store: at the front when a request asked for it."""
    if fs.wanted:
        queue.appendleft((fs, args))
    else:
        queue.append((fs, args))


def _to_front(queue: deque[tuple[FileState, tuple]], ids: set[int]) -> deque[tuple[FileState, tuple]]:
    """`queue` with the items of the files whose id is in `ids` first, in their order."""
    ahead = [item for item in queue if id(item[0]) in ids]
    return deque(ahead + [item for item in queue if id(item[0]) not in ids]) if ahead else queue


def _scratch_store() -> str:
    """A private store folder for this server, named by its pid; those of servers gone without
    deleting theirs (killed) are deleted."""
    for folder in Path(tempfile.gettempdir()).glob("profboard-store-*-*"):
        pid = folder.name.split("-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"profboard-store-{os.getpid()}-")


def _sweep(store: str) -> None:
    from .trace.entry import sweep

    swept = sweep(store)
    if swept:
        log.info("deleted %d temporary file(s) left in the store %s by writers that were stopped", swept, store)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


# Threads opening store entries: on a store no longer in the page cache, opening 1,024 entries is thousands of
# small reads, which one thread made one after another (40 s to the Distributed view of 1,024 ranks).
OPENERS = 8
# Seconds loaders idle before they leave (TraceStore._retire_loaders).
LOADERS_IDLE_S = 10.0
# Seconds after the start at which the store is swept of what writers killed mid-write left there.
SWEEP_AFTER_S = 5.0
# How long close() waits for killed loaders to be reaped.
_LOADER_EXIT_S = 1.0
