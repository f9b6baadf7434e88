"""Loaded snapshots, kept by file identity (path, size, mtime) so that the views' requests on
one snapshot load it once, with each device's history built once too.

Few are kept (a snapshot in memory is several times its pickle's size); a changed file is a
new identity. Loading happens in the asking request's thread; concurrent requests for one
file wait for the same load instead of starting their own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import fsspec

from .errors import NotASnapshot, SnapshotTooLarge
from .history import DeviceHistory, build_history
from .unpickle import load_snapshot


@dataclass
class Loaded:
    snap: dict[str, Any]
    histories: dict[int, DeviceHistory] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def history(self, device: int) -> DeviceHistory:
        with self._lock:
            if device not in self.histories:
                self.histories[device] = build_history(self.snap, device)
            return self.histories[device]


def _read(path: str, size: int, max_bytes: int) -> bytes:
    if size > max_bytes:
        raise SnapshotTooLarge(f"the file is {size:,} bytes, over this server's limit of {max_bytes:,} "
                               "(--max-snapshot-size)")
    try:
        with fsspec.open(path, "rb") as fh:
            return fh.read(max_bytes + 1)
    except OSError as exc:
        raise NotASnapshot(f"cannot read the file: {exc}") from None


class SnapshotCache:
    def __init__(self, max_bytes: int, keep: int = 2) -> None:
        self.max_bytes = max_bytes
        self._keep = keep
        self._items: OrderedDict[tuple, Loaded] = OrderedDict()
        self._loading: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, path: str, size: int, mtime: float) -> Loaded:
        """The loaded snapshot; raises SnapshotError (unsafe, not a snapshot, too large)."""
        key = (path, size, mtime)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            gate = self._loading.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                if key in self._items:
                    return self._items[key]
            try:
                loaded = Loaded(load_snapshot(_read(path, size, self.max_bytes), self.max_bytes))
            finally:
                with self._lock:
                    self._loading.pop(key, None)
            with self._lock:
                self._items[key] = loaded
                while len(self._items) > self._keep:
                    self._items.popitem(last=False)
            return loaded
