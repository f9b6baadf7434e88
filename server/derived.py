"""Derived data of one trace: what its store entry keeps beside the tables (layout and versions:
server/trace/entry.py), computed once: in the loader process right after parsing, or when first asked for.

`ITEMS` lists each item: its name, its version (a constant next to the code that computes it),
the items it is computed from, and the computation, a pure analysis function. An item's `tag`
hashes its version with those of the items it is computed from (and the codec's): a new version of
one analysis recomputes its item and the items made from it, nothing else. Every item is stored,
the small intermediates too (the step breakdown, which the overview and the summary are made
from): a request that needs one while the loader computes it waits for it instead of computing it
a second time.

`LOAD_ORDER` is the order the loader computes them in: what /api/runs needs first (the views a
trace has: the trace is ready once they are known), then the overview and what it is made from
(the first page a user opens), the operator calls (the page opened next, most often), the
timeline's items, then the summary that the Distributed view and the findings across ranks of
the run's other workers read (a run of one worker, the most common, never needs it). While a parsed
trace's entry is written, the loader computes the first items from the parsed tables (`derive_parsed`;
derive stores them first, smallest first); then a big trace's loader computes two
items at a time, on the helper process its parse had; a small trace gets at load only its views and
its summary (`load_items`).

`Derivation` gets the items of one trace, each once: from memory, else from the entry, else
computed from the tables and the items it needs, and stored.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable

from .analysis import callstacks, distributed, flows, lod, optree, overview, steps, timeline
from .analysis.operators import OP_INSTANCES_VERSION, op_instances
from .sizes import held_bytes
from .trace import codec
from .trace.entry import Entry, FileId
from .trace.parallel import give_back_memory, small_pages
from .trace.tables import TraceTables

log = logging.getLogger("profboard")


@dataclass(frozen=True)
class Item:
    name: str
    version: int
    needs: tuple[str, ...]
    compute: Callable[..., Any]  # (tables, worker, *the needed items) -> value
    by_worker: bool = False  # the value holds the worker's name (which discovery gives)


def _views(tables: TraceTables, worker: str) -> list[str]:
    from .api import trace_views  # the view registry imports the routers, which import this module's users

    return trace_views(tables)


def _views_version() -> int:
    from .api import VIEWS_VERSION

    return VIEWS_VERSION


ITEMS: dict[str, Item] = {item.name: item for item in (
    Item("views", 0, (), _views),  # version: the view registry's (see _tag)
    Item("steps", steps.STEPS_VERSION, (), lambda t, w: steps.detect_steps(t.events)),
    Item("breakdown", overview.BREAKDOWN_VERSION, ("steps",), lambda t, w, s: overview.step_breakdown(t.events, s)),
    Item("optree", optree.OPTREE_VERSION, (), lambda t, w: optree.build_op_tree(t.events)),
    Item("overview", overview.OVERVIEW_VERSION, ("steps", "breakdown", "optree"),
         lambda t, w, s, b, tree: overview.worker_overview(t, lambda: tree, s, b)),
    Item("op_instances", OP_INSTANCES_VERSION, ("optree",), lambda t, w, tree: op_instances(t.events, tree)),
    Item("layout", timeline.LAYOUT_VERSION, (), lambda t, w: timeline.build_layout(t)),
    Item("blocks", lod.BLOCKS_VERSION, ("layout",), lambda t, w, layout: lod.build_blocks(t, layout)),
    Item("flows", flows.FLOWS_VERSION, ("layout",), lambda t, w, layout: flows.build_flows(t, layout.lane_of >= 0)),
    Item("summary", distributed.SUMMARY_VERSION, ("steps", "breakdown"),
         lambda t, w, s, b: distributed.summarize_worker(w, t, s, b), by_worker=True),
)}
LOAD_ORDER = tuple(ITEMS)

# The dataclasses stored items are made of: the codec reads and writes these and no others.
CLASSES: dict[str, type] = {cls.__name__: cls for cls in (
    steps.Steps, optree.OpTree, callstacks.Stacks, timeline.Layout, lod.Blocks, flows.Flows,
    distributed.WorkerSummary)}


def _version_text(name: str) -> str:
    item = ITEMS[name]
    version = _views_version() if name == "views" else item.version
    return f"{name}:{version}(" + ",".join(_version_text(n) for n in item.needs) + ")"


def tag(name: str, worker: str) -> str:
    """The item's version as it appears in its file name (8 hex digits)."""
    text = f"{codec.CODEC_VERSION};{_version_text(name)}"
    if ITEMS[name].by_worker:
        text += f";{worker}"
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def current_items(entry: Entry, worker: str) -> set[str]:
    """The stored items whose file in the entry is of the current version."""
    tags = entry.item_tags()
    return {name for name in ITEMS if tag(name, worker) in tags.get(name, ())}


class Derivation:
    """The items of one trace, each got once (thread-safe): from memory, else read from `entry`,
    else computed from the tables and stored in `entry`. `before` is called, with no lock held,
    before an item is read or computed (the server waits there for the loader computing it);
    `kept` after each value is got."""

    def __init__(self, entry: Entry | None, tables: Callable[[], TraceTables], worker: str,
                 before: Callable[[str], None] = lambda name: None,
                 kept: Callable[[str, Any], None] = lambda name, value: None,
                 computed: dict[str, Any] | None = None) -> None:
        """`computed`: values of items computed elsewhere from the same tables (the parsed ones, while the
        entry was written), stored when first got instead of computed again."""
        self.entry, self.tables, self.worker = entry, tables, worker
        self.before, self.kept = before, kept
        self.values: dict[str, Any] = {}
        self._computed = dict(computed or {})
        self.written: dict[str, str | None] = {}  # item -> the file it was stored in (None: it could not be)
        self._locks = {name: threading.Lock() for name in ITEMS}

    def get(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        item = ITEMS[name]
        self.before(name)
        with self._locks[name]:
            if name in self.values:
                return self.values[name]
            found, value = self.stored(name)
            needed: list[Any] = []
            if not found and name not in self._computed:  # a computed item is stored as it is, its inputs or not
                needed = [self.get(n) for n in item.needs]
                # Waiting for those, the loader may have reached this item: wait for it, or read it.
                self.before(name)
                found, value = self.stored(name)
            if not found:
                if self.entry is None:
                    value = self._compute(item, needed)
                else:
                    with self.entry.computing(name):
                        value = self._compute(item, needed)
                        self.written[name] = self.entry.write_item(name, tag(name, self.worker), value, CLASSES)
            self.values[name] = value
        self.kept(name, value)
        return value

    def _compute(self, item: Item, needed: list[Any]) -> Any:
        if item.name in self._computed:
            return self._computed.pop(item.name)
        return item.compute(self.tables(), self.worker, *needed)

    def stored_as(self, name: str) -> tuple[str | None, FileId | None]:
        """The file this derivation stored the item in (None: it found it stored, or could not store
        it) and that file's identity as checked here."""
        file = self.written.get(name)
        return file, self.entry.checked.get(file) if file else None

    def stored(self, name: str) -> tuple[bool, Any]:
        """(True, value) when the entry holds the item at its current version."""
        if self.entry is None:
            return False, None
        return self.entry.read_item(name, tag(name, self.worker), CLASSES)


def load_items(events: int) -> tuple[str, ...]:
    """The items a loader computes once it has parsed a trace of `events` event rows, in LOAD_ORDER:
    every item of a big trace (each takes a second or more there); of a small one, what lists it and
    what the run's other workers read (its views and its summary). The others take milliseconds when
    first asked for: at load they made a logdir of 2,000 small runs load four times slower."""
    if events >= LOAD_ALL_ROWS:
        return LOAD_ORDER
    return tuple(n for n in LOAD_ORDER if n in _with_needs(("views", "summary")))


def _with_needs(names: tuple[str, ...]) -> set[str]:
    return {n for name in names for n in (name, *_with_needs(ITEMS[name].needs))}


# The item of the page a user opens first (the overview): derive_parsed computes it and what it is made
# from before the loader lets go of the parsed tables.
FIRST_PAGE = "overview"

# Events table rows from which a trace gets every item at load (the Llama trace has 2.7 M; a small
# training step, 3,000).
LOAD_ALL_ROWS = 200_000

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
    wanted = _with_needs(names)
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
        return derivation.stored_as(name)

    def there(name: str) -> tuple[str | None, FileId | None]:
        try:
            return helper(name).result()
        except Exception as exc:  # the helper died, or the item failed there: here, where an error is told
            log.warning("a helper could not compute %s (%s: %s); computing it in the loader",
                        name, type(exc).__name__, exc)
            return here(name)

    failure: list[BaseException] = []
    # This process takes the first item: the one a user opens next (the operator view's), and the tables it
    # reads are in this process's memory, while a helper maps them from the entry (on the synthetic 1.1 GB
    # trace the helper took 2.3 s for it, the first answer of the operator view waiting).
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
    first = set(_with_needs((FIRST_PAGE,))) if FIRST_PAGE in order else set()
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
