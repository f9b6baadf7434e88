"""Computing a trace's derived items (server/items.py lists them, with their versions): the analysis
behind each, and the loader's work after parsing.

While a parsed trace's entry is written, the loader computes the first items from the parsed tables
(`derive_parsed`; derive stores them first, smallest first); then a big trace's loader computes two
items at a time, on the helper process its parse had; a small trace gets at load only its views and
its summary (items.load_items).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable

from .analysis import callstacks, distributed, flows, lod, optree, overview, steps, timeline
from .analysis.compile import compiled_view, has_compiled_code
from .analysis.operators import op_instances
from .items import ITEMS, LOAD_ORDER, Derivation, current_items, load_items, with_needs
from .sizes import held_bytes
from .trace.entry import Entry, FileId
from .trace.parallel import give_back_memory, small_pages
from .trace.tables import TraceTables

log = logging.getLogger("profboard")


def _views(tables: TraceTables, worker: str) -> list[str]:
    from .api import trace_views  # the view registry imports the routers, which import this module's users

    return trace_views(tables)


# Each item's computation, a pure analysis function: (tables, worker, *the items it is computed from).
COMPUTE: dict[str, Callable[..., Any]] = {
    "views": _views,
    "steps": lambda t, w: steps.detect_steps(t.events),
    "breakdown": lambda t, w, s: overview.step_breakdown(t.events, s),
    "optree": lambda t, w: optree.build_op_tree(t.events),
    "overview": lambda t, w, s, b, tree: overview.worker_overview(t, lambda: tree, s, b),
    "op_instances": lambda t, w, tree: op_instances(t.events, tree),
    "compile": lambda t, w, s, tree: compiled_view(t, s, tree) if has_compiled_code(t) else None,
    "layout": lambda t, w: timeline.build_layout(t),
    "blocks": lambda t, w, layout: lod.build_blocks(t, layout),
    "flows": lambda t, w, layout: flows.build_flows(t, layout.lane_of >= 0),
    "summary": lambda t, w, s, b: distributed.summarize_worker(w, t, s, b),
}

# The dataclasses stored items are made of: the codec reads and writes these and no others.
CLASSES: dict[str, type] = {cls.__name__: cls for cls in (
    steps.Steps, optree.OpTree, callstacks.Stacks, timeline.Layout, lod.Blocks, flows.Flows,
    distributed.WorkerSummary)}


def compute(name: str, tables: TraceTables, worker: str, needed: list[Any]) -> Any:
    """The item computed from the tables and the items it needs (in ITEMS' order)."""
    return COMPUTE[name](tables, worker, *needed)


# The item of the page a user opens first (the overview): derive_parsed computes it and what it is made
# from before the loader lets go of the parsed tables.
FIRST_PAGE = "overview"

Helper = Callable[[str], "Future[tuple[str | None, FileId | None]]"]


def derive(entry: Entry, tables: TraceTables, worker: str, on_event: Callable[[tuple], None],
           names: tuple[str, ...] = LOAD_ORDER, helper: Helper | None = None,
           computed: dict[str, Any] | None = None) -> None:
    """Compute and store the items of `names` (in LOAD_ORDER, with what they are made from) that the
    entry lacks at their current version: the loader's work after parsing. With `helper` (which
    computes an item in a helper process: compute_stored), two items at a time, each lane taking the
    first item whose inputs are stored. An item stored meanwhile by another process (the server) is
    skipped, and so is one it is computing, with the items made from it (the server computes those
    when asked, and the loader opening the entry next time what is still missing).
    `on_event` hears ("ready", busy) once the trace's views are stored, then ("stored", name, file,
    FileId | None, busy) after each item (file None: it could not be stored); `busy` names the items
    being computed and those taken next, in the same event, so that no request sees the loader
    between two items and computes one a second time. `computed`: items already computed from the same
    tables (store_trace's `meanwhile`), stored first, by this process, before the lanes start."""
    derivation = Derivation(entry, lambda: tables, worker, computed=computed)
    wanted = with_needs(names)
    # Smallest first: writing a new file took 0.5 s per 67 MB (the Llama trace's operator tree) on the
    # machine measured, and the overview, which a user opens first, is small.
    early = sorted((n for n in LOAD_ORDER if n in (computed or {}) and n in wanted and n != "views"),
                   key=lambda n: held_bytes(computed[n]))
    derivation.get("views")
    plan = _Plan(entry, worker, wanted, lanes=2 if helper else 1, taken=early)
    on_event(("ready", plan.busy()))
    for name in early:
        derivation.get(name)
        plan.done(name, lambda: on_event(("stored", name, *derivation.stored_as(name), plan.busy())))

    def run_lane(compute: Callable[[str], tuple[str | None, FileId | None]], name: str | None) -> None:
        while name is not None:
            try:
                file, checked = compute(name)
            except BaseException:
                plan.done(name, lambda: None)
                raise
            plan.done(name, lambda: on_event(("stored", name, file, checked, plan.busy())))
            name = plan.take()

    def here(name: str) -> tuple[str | None, FileId | None]:
        try:
            derivation.get(name)
        finally:
            # The pages of the tables the item read leave this process (they stay in the page cache):
            # with a helper mapping them too, each process held them.
            entry.release_pages()
            if helper is not None:
                # A big trace (it has a helper): glibc kept what the item freed (the layout's 0.5 GB of
                # temporary arrays on the 1 GB traces) until the load ended.
                give_back_memory()
        return derivation.stored_as(name)

    def there(name: str) -> tuple[str | None, FileId | None]:
        try:
            return helper(name).result()
        except Exception as exc:  # the helper died, or the item failed there: here, where an error is told
            log.warning("a helper could not compute %s (%s: %s); computing it in the loader",
                        name, type(exc).__name__, exc)
            return here(name)

    failure: list[BaseException] = []
    # This process takes the first item, the one a user opens next (the operator view's): a helper took 2.3 s
    # for it on the synthetic 1.1 GB trace, the first answer of the operator view waiting (measured when
    # this process computed it from the parsed tables, before the entry's tables were read back as written).
    first = plan.take()
    if helper is not None:
        def second_lane() -> None:
            try:
                run_lane(there, plan.take())
            except BaseException as exc:
                failure.append(exc)
                plan.stop()
        lane = threading.Thread(target=second_lane, name="profboard-derive-lane", daemon=True)
        lane.start()
    try:
        run_lane(here, first)
    except BaseException:
        plan.stop()
        raise
    finally:
        if helper is not None:
            lane.join()
    if failure:
        raise failure[0]


def derive_parsed(worker: str, computed: dict[str, Any], tables: TraceTables, written: Callable[[], bool],
                  names: tuple[str, ...] | None = None) -> None:
    """While a parsed trace's entry is written (trace/load.py store_trace's `meanwhile`): the items of `names`
    (default: its load items) in order, with what they are made from, computed from the parsed tables into
    `computed` (derive, or a Derivation given `computed`, stores them): those of the first page (FIRST_PAGE
    and what it is made from) in any case, the others until `written()`."""
    derivation = Derivation(None, lambda: tables, worker)
    order = names or load_items(len(tables.events))
    # The first page waits for no table to be written, mapped and checked: a big entry's tables are written
    # around the page cache (trace/entry.py), and computed from the stored tables the first page took 3 s
    # more of the synthetic trace's cold start on the machine measured, before they were read back.
    first = set(with_needs((FIRST_PAGE,))) if FIRST_PAGE in order else set()
    try:
        for name in order:
            if written() and name not in first:
                break
            derivation.get(name)
    except Exception as exc:  # noqa: BLE001 derive computes it again from the stored tables, and tells the error
        log.debug("computing %s items from the parsed tables failed: %s: %s", worker, type(exc).__name__, exc)
    computed.update(derivation.values)


def compute_stored(entry: Entry, worker: str, name: str) -> tuple[str | None, FileId | None]:
    """In a helper process: compute the item from the entry's mapped tables and the stored items it
    is made from, and store it; the file it was stored in and its identity as checked here."""
    derivation = Derivation(entry, entry.tables, worker)
    try:
        with small_pages():  # as in the loader (server/store.py)
            derivation.get(name)
        return derivation.stored_as(name)
    finally:
        entry.release_pages()
        del derivation  # the item's value, held by it
        give_back_memory()


class _Plan:
    """Which items a loader still computes, handed to its lanes in LOAD_ORDER, each once its inputs
    are stored."""

    def __init__(self, entry: Entry, worker: str, wanted: set[str], lanes: int, taken: list[str]) -> None:
        """`taken`: items the caller stores before any lane starts (each told with done())."""
        self.entry, self.worker, self.lanes = entry, worker, lanes
        self.pending = [n for n in LOAD_ORDER if n in wanted and n != "views" and n not in taken]
        self.running: list[str] = list(taken)
        self.stopped = False
        self._changed = threading.Condition()
        self._refresh()

    def _refresh(self) -> None:
        """Drop what is stored (by anyone) and what another process is computing, with what is made from it."""
        current = current_items(self.entry, self.worker)

        def elsewhere(n: str) -> bool:
            return (n not in current and n not in self.running
                    and (self.entry.claimed(n) or any(elsewhere(d) for d in ITEMS[n].needs)))
        self.pending = [n for n in self.pending if n not in current and not elsewhere(n)]
        self._stored = current

    def _ready(self) -> list[str]:
        return [n for n in self.pending if all(d in self._stored for d in ITEMS[n].needs)]

    def take(self) -> str | None:
        """The next item for a lane, waiting while every pending one waits for an item being
        computed; None when none is left."""
        with self._changed:
            while not self.stopped:
                ready = self._ready()
                if ready:
                    self.pending.remove(ready[0])
                    self.running.append(ready[0])
                    return ready[0]
                if not self.running or not self.pending:
                    return None
                self._changed.wait()
            return None

    def done(self, name: str, tell: Callable[[], None]) -> None:
        with self._changed:
            self.running.remove(name)
            self._refresh()
            tell()
            self._changed.notify_all()

    def stop(self) -> None:
        with self._changed:
            self.stopped = True
            self._changed.notify_all()

    def busy(self) -> tuple[str, ...]:
        """The items being computed, then those the lanes take next."""
        return (*self.running, *self._ready()[:self.lanes])
