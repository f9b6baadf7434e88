"""Loaded snapshots, kept by file identity (path, size, mtime), and the files refused.

Each loaded snapshot is a process of its own (worker.py) that keeps each device's history
once built. Few are kept (a snapshot in memory is several times its pickle's size); a changed
file is a new identity. Concurrent requests for one file wait for the same load instead of
starting their own. A refusal (unsafe, not a snapshot, too large, too slow, crashed its
reader) is remembered per identity and answered again without reading the file, until the
file changes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

from .errors import SnapshotError
from .worker import CPU_SECONDS, AnalysisFailed, SnapshotProcess, Unavailable

Key = tuple[str, int, float]


class SnapshotCache:
    def __init__(self, max_bytes: int, keep: int = 2, cpu_seconds: float = CPU_SECONDS) -> None:
        self.max_bytes = max_bytes
        self._keep = keep
        self._cpu_seconds = cpu_seconds
        self._items: OrderedDict[Key, SnapshotProcess] = OrderedDict()
        self._refused: dict[str, tuple[Key, type[SnapshotError], str]] = {}  # by path: its refused identity
        self._loading: dict[Key, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, path: str, size: int, mtime: float) -> SnapshotProcess:
        """The loaded snapshot; raises SnapshotError (unsafe, not a snapshot, too large, ...)."""
        key = (path, size, mtime)
        with self._lock:
            found = self._known(key)
            if found is not None:
                return found
            gate = self._loading.setdefault(key, threading.Lock())
        with gate:
            with self._lock:  # loaded or refused while this request waited
                found = self._known(key)
                if found is not None:
                    return found
            try:
                loaded = SnapshotProcess(path, size, self.max_bytes, self._cpu_seconds)
            except (AnalysisFailed, Unavailable):
                raise
            except SnapshotError as exc:
                self._refuse(key, exc)
                raise
            finally:
                with self._lock:
                    self._loading.pop(key, None)
            with self._lock:
                self._items[key] = loaded
                self._refused.pop(path, None)
                evicted = [self._items.popitem(last=False)[1] for _ in range(len(self._items) - self._keep)]
        for old in evicted:
            old.close()
        return loaded

    def call(self, path: str, size: int, mtime: float, method: Callable[..., Any], *args: Any) -> Any:
        """`method(loaded, *args)` (a method of worker.Loaded) on the snapshot; raises SnapshotError."""
        key = (path, size, mtime)
        attempts = 0
        while True:
            loaded = self.get(*key)
            try:
                return loaded.call(method, *args)
            except Unavailable:  # closed by the load of another file meanwhile: load it again
                attempts += 1
                if attempts == 3:
                    raise
            except AnalysisFailed:
                raise
            except SnapshotError as exc:  # stopped by its limits while analysing: refused as if at load
                self._refuse(key, exc)
                with self._lock:
                    if self._items.get(key) is loaded:
                        del self._items[key]
                loaded.close()
                raise

    def _known(self, key: Key) -> SnapshotProcess | None:
        refused = self._refused.get(key[0])
        if refused is not None and refused[0] == key:
            raise refused[1](refused[2])
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        return None

    def _refuse(self, key: Key, exc: SnapshotError) -> None:
        with self._lock:
            self._refused[key[0]] = (key, type(exc), str(exc))
