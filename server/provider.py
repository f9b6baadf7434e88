"""One provider per loaded trace: what every router needs of the trace, each thing read or computed once.

A `TraceProvider` holds the trace's store entry (where it is, its metadata and warnings: small) and
gives routers the tables (mapped from the entry), the derived items (server/items.py: steps,
operator tree, operator calls, flows, timeline layout, the worker's overview and distributed
summary; read from the entry, where the loader stored them), and `memo` for request-specific
results. Analyses stay pure: routers pass them what the provider gives.

While the loader process still computes items after the trace became ready, a request for the
item the loader is computing waits for it; one for an item the loader has not reached computes it
here and stores it (the loader then skips it).

Memory: what a provider holds (categories, items computed in this process, memoised results;
mapped pages are the OS's) counts against the server's `Budget`. Past the budget, the providers
used least recently drop what they hold, never one serving a request (`use`); asked again, they
read it back from the store. A provider idle for IDLE_S also lets the pages of its mapped files
go from the process (`release_if_idle`): they stay in the page cache, and the next request maps
back what it reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .budget import Budget
from .items import Derivation
from .sizes import held_bytes
from .trace.entry import Entry, FileId, discard

if TYPE_CHECKING:
    import pandas as pd

    from .analysis.callstacks import Stacks
    from .analysis.distributed import WorkerSummary
    from .analysis.flows import Flows
    from .analysis.lod import Blocks
    from .analysis.optree import OpTree
    from .analysis.steps import Steps
    from .analysis.timeline import Layout
    from .trace.tables import TraceTables

log = logging.getLogger("profboard")

MEMO_SIZE = 128  # request-specific results kept per trace
IDLE_S = 2.0  # seconds without a request after which a trace's mapped pages leave the process


class TableDamage(Exception):
    """The trace's tables turned out damaged when first mapped: the entry was removed and the
    trace is being loaded again."""


class TraceProvider:
    def __init__(self, entry: Entry, worker: str, budget: Budget, reload: Callable[[], None]) -> None:
        self.entry, self.worker = entry, worker
        self._budget, self._reload = budget, reload
        self._lock = threading.Lock()
        self._in_use = 0
        self.last_used = time.monotonic()
        self._released = True  # its mapped pages are not in the process's memory
        self._tables: TraceTables | None = None
        self._sizes: dict[Any, int] = {}  # what is held -> its bytes
        self._memo: OrderedDict[tuple, Any] = OrderedDict()
        self._derivation = self._new_derivation()
        self._views: list[str] | None = None
        # The loader process, while it computes items after the trace became ready.
        self._loader = threading.Condition()
        self._loader_active = False
        self._loader_busy: tuple[str, ...] = ()
        budget.add(self)

    # what /api/runs shows
    @property
    def warnings(self) -> list[str]:
        return list(self.entry.warnings)

    def views(self) -> list[str]:
        """Names of the views this trace has by itself (kept: a few names)."""
        if self._views is None:
            self._views = self._derivation.get("views")
        return self._views

    # use
    @contextmanager
    def use(self) -> Iterator[TraceProvider]:
        """Pins what the provider holds while a request works with it."""
        with self._lock:
            self._in_use += 1
            self.last_used = time.monotonic()
            self._released = False
        try:
            yield self
        finally:
            with self._lock:
                self._in_use -= 1

    def tables(self) -> TraceTables:
        with self._lock:
            if self._tables is not None:
                return self._tables
        try:
            tables = self.entry.tables()
        except MemoryError:
            raise
        except Exception as exc:  # a table file damaged since the entry was written
            discard(self.entry.folder, str(exc))
            self._reload()
            raise TableDamage(str(exc)) from None
        with self._lock:
            if self._tables is None:
                self._tables = tables
                self._sizes["tables"] = held_bytes(tables)
            tables = self._tables
        self._budget.charge(self)
        return tables

    def steps(self) -> Steps:
        return self._derivation.get("steps")

    def op_tree(self) -> OpTree:
        return self._derivation.get("optree")

    def op_instances(self) -> tuple[pd.DataFrame, Stacks]:
        return self._derivation.get("op_instances")

    def compiled(self) -> dict[str, Any] | None:
        """The Compile view's answer, None for a trace without compiled code (which has no such view)."""
        return self._derivation.get("compile")

    def layout(self) -> Layout:
        return self._derivation.get("layout")

    def blocks(self) -> Blocks:
        """The timeline's level-of-detail blocks."""
        return self._derivation.get("blocks")

    def flows(self) -> Flows:
        return self._derivation.get("flows")

    def overview(self) -> dict[str, Any]:
        """This worker's overview on its own (the findings across ranks are added per request)."""
        return self._derivation.get("overview")

    def summary(self) -> WorkerSummary:
        """This worker's share of the Distributed view."""
        return self._derivation.get("summary")

    def stored_summary(self) -> WorkerSummary | None:
        """The summary when it is at hand (held or stored), else None: never computed here."""
        if "summary" in self._derivation.values:
            return self._derivation.values["summary"]
        found, value = self._derivation.stored("summary")
        return value if found else None

    def memo(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """A request-specific result, computed once per `key` (kept among the last MEMO_SIZE)."""
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        value = compute()
        with self._lock:
            self._memo[key] = value
            self._sizes[("memo", key)] = held_bytes(value)
            while len(self._memo) > MEMO_SIZE:
                old, _ = self._memo.popitem(last=False)
                self._sizes.pop(("memo", old), None)
        self._budget.charge(self)
        return value

    # memory
    @property
    def held(self) -> int:
        """Bytes this provider holds (mapped pages not counted)."""
        with self._lock:
            return sum(self._sizes.values())

    def drop(self) -> int:
        """Let go of what the provider holds unless a request is using it; the bytes freed."""
        with self._lock:
            if self._in_use:
                return 0
            freed = sum(self._sizes.values())
            self._tables, self._sizes, self._memo = None, {}, OrderedDict()
            self._derivation = self._new_derivation()
        return freed

    def release_if_idle(self, idle_s: float = IDLE_S) -> None:
        """Let the mapped pages go from the process's memory when no request used the trace for `idle_s`."""
        with self._lock:
            if self._in_use or self._released or time.monotonic() - self.last_used < idle_s:
                return
            self._released = True
        self.entry.release_pages()

    def close(self) -> None:
        """The trace is gone (its file vanished or changed): let go of everything."""
        self._budget.remove(self)
        with self._loader:
            self._loader_active = False
            self._loader.notify_all()

    def _new_derivation(self) -> Derivation:
        return Derivation(self.entry, self.tables, self.worker, before=self._wait_for_loader, kept=self._kept)

    def _kept(self, name: str, value: Any) -> None:
        with self._lock:
            self._sizes[("item", name)] = held_bytes(value)
        self._budget.charge(self)

    # the loader process's progress, told by the store
    def loader_started(self, busy: tuple[str, ...]) -> None:
        """The loader computes items of this trace, `busy` now or next (derived.derive)."""
        with self._loader:
            self._loader_active, self._loader_busy = True, busy

    def loader_stored(self, name: str, file: str | None, checked: FileId | None, busy: tuple[str, ...]) -> None:
        """The loader stored `name` in `file`, whose checksum it checked (as the file was then), and
        computes the items of `busy` now or next."""
        with self._loader:
            if file is not None and checked is not None:
                self.entry.checked[file] = checked
            self._loader_busy = busy
            self._loader.notify_all()

    def loader_done(self) -> None:
        with self._loader:
            self._loader_active, self._loader_busy = False, ()
            self._loader.notify_all()

    def _wait_for_loader(self, name: str) -> None:
        """Wait while the loader computes `name`, or is about to (computing it here too would only
        share two cores between two copies of it)."""
        with self._loader:
            while self._loader_active and name in self._loader_busy:
                self._loader.wait()


def run_view(workers: dict[str, TraceProvider], key: tuple, stored_only: bool) -> dict[str, Any] | None:
    """The Distributed view of a run's span from its workers' summaries, memoised with the first
    worker's trace under `key` (which names the loaded files). `stored_only`: from summaries at
    hand only (None while one is still being computed), never computing one here."""
    from .analysis.distributed import combine  # here, as every analysis (see above)

    anchor = next(iter(workers.values()))
    summaries = []
    for provider in workers.values():
        summary = provider.stored_summary() if stored_only else provider.summary()
        if summary is None:
            return None
        summaries.append(summary)
    return anchor.memo(("distributed", key), lambda: combine(summaries))


def matched_calls(workers: dict[str, TraceProvider], key: tuple) -> pd.DataFrame:
    """The collective calls of a few workers (the ranks a Trace view shows) matched across them
    (stragglers.align_calls; `rank` numbers the workers in their order), each with its row in its
    worker's own calls (`call`), memoised with the first worker's trace under `key` (which names
    the loaded files)."""
    import numpy as np

    from .analysis.stragglers import align_calls

    anchor = next(iter(workers.values()))

    def match() -> pd.DataFrame:
        calls = [provider.summary().calls for provider in workers.values()]
        return align_calls({i: c.assign(call=np.arange(len(c))) for i, c in enumerate(calls)})
    return anchor.memo(("matched calls", key), match)
