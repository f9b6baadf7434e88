"""The bytes that the server's trace providers (server/provider.py) may hold together, and who lets go
past it. Apart from the providers so that the store can be made without importing them (server/store.py).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .provider import TraceProvider

log = logging.getLogger("profboard")


class Budget:
    """The bytes that providers may hold together; past it, those used least recently drop theirs."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._providers: dict[int, TraceProvider] = {}

    def add(self, provider: TraceProvider) -> None:
        with self._lock:
            self._providers[id(provider)] = provider

    def remove(self, provider: TraceProvider) -> None:
        with self._lock:
            self._providers.pop(id(provider), None)

    @property
    def held(self) -> int:
        with self._lock:
            providers = list(self._providers.values())
        return sum(p.held for p in providers)

    def charge(self, provider: TraceProvider) -> None:
        """After `provider` took more: drop others, least recently used first, until under the limit."""
        with self._lock:
            others = sorted((p for p in self._providers.values() if p is not provider), key=lambda p: p.last_used)
        total = self.held
        for victim in others:
            if total <= self.limit:
                return
            held = victim.held
            if held and victim.drop():
                log.info("memory budget: let go of %s (%.0f MB)", victim.entry.folder, held / 1e6)
                total -= held
