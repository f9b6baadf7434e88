"""The loader processes: the pool of spawned workers that parse traces for the server (server/store.py),
and how each one starts, watches its server and ends.

This module is light on purpose: the server starts its loaders before it imports the app (server/cli.py),
so that each imports what loading needs (pandas, pyarrow, the analyses, the view registry: about a second)
while the server imports its own, on another core; the first trace then parses a second or two sooner.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from typing import Any, Callable

# A loader's work (opening or parsing a trace, computing its items): imported in loaders only.
_LOADING = "profboard.server.loading"

_progress: Any = None  # this loader's end of the progress queue
# How long a load waits for the warm loader to be counted idle after its start (a few ms).
_IDLE_WAIT_S = 1.0


class Loaders:
    """`count` loader processes in a pool, and the queue through which they report progress."""

    def __init__(self, count: int) -> None:
        self.count = max(1, count)
        self.context = multiprocessing.get_context("spawn")
        self.progress: Any = self.context.Queue()
        self.pool = self.new_pool()
        self._lock = threading.Lock()
        self._warming: Future | None = None  # warm()'s task, until the loader it started is idle
        self._waiting = False  # a thread waits for that loader (starting())

    def new_pool(self) -> ProcessPoolExecutor:
        """A pool of loaders, which starts no process until it is given work."""
        return ProcessPoolExecutor(max_workers=self.count, mp_context=self.context,
                                   initializer=_init_loader, initargs=(self.progress, os.getpid()))

    def warm(self) -> None:
        """Start one loader now (the others start when there is work for them): before its first task, a
        loader imports what loading needs, so that a load given to it starts at once."""
        self._warming = submit(self.pool, int)

    def starting(self, then: Callable[[], None]) -> bool:
        """Whether the loader warm() started is still starting; if so, `then` is called (once, from another
        thread) when it is idle. Work handed to the pool meanwhile finds no loader idle, and the pool starts
        another: for a single big trace, a second loader importing for a second on the core that the
        first one's parse needs, and then idling."""
        with self._lock:
            if self._warming is None:
                return False
            if not self._waiting:
                self._waiting = True
                threading.Thread(target=self._when_started, args=(self._warming, then),
                                 name="profboard-loader-start", daemon=True).start()
            return True

    def _when_started(self, warming: Future, then: Callable[[], None]) -> None:
        try:
            warming.exception()
        except CancelledError:
            pass
        # The pool counts a loader idle only after the task's callbacks ran (CPython's executor keeps the
        # count private; where it is absent, the wait is skipped).
        idle = getattr(self.pool, "_idle_worker_semaphore", None)
        if idle is not None and idle.acquire(timeout=_IDLE_WAIT_S):
            idle.release()
        with self._lock:
            self._warming = None
        then()


def submit(pool: ProcessPoolExecutor, fn: Callable[..., Any], *args: Any) -> Future:
    """`pool.submit`, with Ctrl-C blocked in this thread meanwhile: the pool starts a loader from the
    thread that gives it work, and the loader inherits the blocked signal through the exec of a spawned
    process, until it leaves the terminal's process group (_init_loader). A Ctrl-C right after the
    server's start met a loader still starting, and it printed a traceback."""
    blocked = hasattr(signal, "pthread_sigmask")
    if blocked:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return pool.submit(fn, *args)
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def load_in_loader(*args: Any) -> Any:
    """In a loader: server/loading.py's load_in_worker. The server hands the pool this function, which it
    can name without importing the loading code (pandas, Arrow, the analyses)."""
    return importlib.import_module(_LOADING).load_in_worker(*args)


def report(task: int, value: Any) -> None:
    """In a loader: tell the server about `task` (a fraction parsed, or an event of derived.derive)."""
    _progress.put((task, value))


def _init_loader(progress: Any, server: int) -> None:
    global _progress
    _progress = progress
    if hasattr(os, "setpgid"):
        # A group of its own, which the helpers it starts join: Ctrl-C in a terminal signals the whole
        # foreground group, and loaders would each stop mid-load with a traceback while the server shuts
        # down; and the server ends a loader with its helpers in one signal (end_loader).
        os.setpgid(0, 0)
    if hasattr(signal, "pthread_sigmask"):
        # The server ends loaders (end_loader); a Ctrl-C sent while this one started is dropped.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    watch_parent(server)
    importlib.import_module(_LOADING).warm()


def end_loader(pid: int) -> None:
    """Kill a loader and the helpers it started (its process group); one still starting, which has no
    group of its own nor helpers yet, alone."""
    try:
        if hasattr(os, "killpg") and os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)
    except (ProcessLookupError, PermissionError):  # gone already
        pass


def watch_parent(parent: int) -> None:
    """`parent` is the pid of the process that started this one, passed in: read here, after the
    imports, it was init's when the parent had died meanwhile, and the process waited forever."""
    threading.Thread(target=_exit_with_parent, args=(parent,), name="profboard-orphan-watch",
                     daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A worker outlives its server when the server dies without shutting the pool down (killed,
    or uvicorn re-raising SIGTERM after its graceful shutdown): workers hold both ends of their
    task queue, so they would wait forever, holding their memory. Leave when the parent is gone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)
