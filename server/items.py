"""The derived items a trace's store entry keeps beside its tables (layout: server/trace/entry.py): each
item's name, version and what it is computed from; which of an entry's items are current; and
`Derivation`, which gets the items of one trace, each once.

This module is light on purpose. With it, the entry and the codec, the server opens stored traces,
lists them and answers from stored items (a reopened trace's overview) without importing the analyses:
pandas and the analysis modules took half a second of the 1.5 s in which a stored trace should show its
overview (issue 15). The analyses behind the items, and the loader's work after parsing, are in
server/derived.py, imported when an item is first computed.

# Versions

An item's version is here rather than next to the analysis that computes it, because checking which
items of an entry are current must not import that analysis. Bump it when what the analysis returns
changes (each analysis says so beside its result). An item's `tag` hashes its version with those of
the items it is computed from, and the codec's: a new version of one analysis recomputes its item and
the items made from it, nothing else. Every item is stored, the small intermediates too (the step
breakdown, which the overview and the summary are made from): a request that needs one while the
loader computes it waits for it instead of computing it a second time.

`LOAD_ORDER` is the order the loader computes them in: what /api/runs needs first (the views a trace
has: the trace is ready once they are known), then the overview and what it is made from (the first
page a user opens), the operator calls (the page opened next, most often), the Compile view's answer
(which read every event of a 1 GB trace in the server, its memory beside the loader's), the timeline's items, then
the summary that the Distributed view and the findings across ranks of the run's other workers read (a
run of one worker, the most common, never needs it).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from .trace.codec import CODEC_VERSION

if TYPE_CHECKING:
    from .trace.entry import Entry, FileId
    from .trace.tables import TraceTables


@dataclass(frozen=True)
class Item:
    name: str
    version: int
    needs: tuple[str, ...]  # the items it is computed from
    by_worker: bool = False  # the value holds the worker's name (which discovery gives)


ITEMS: dict[str, Item] = {item.name: item for item in (
    Item("views", 0, ()),  # api/__init__.py trace_views; its version is the registry's VIEWS_VERSION
    Item("steps", 1, ()),  # analysis/steps.py detect_steps
    Item("breakdown", 1, ("steps",)),  # analysis/overview.py step_breakdown
    Item("optree", 1, ()),  # analysis/optree.py build_op_tree
    # analysis/overview.py worker_overview, with every rule of analysis/rules and the analyses they read
    Item("overview", 4, ("steps", "breakdown", "optree")),
    Item("op_instances", 2, ("optree",)),  # analysis/operators.py op_instances, with callstacks.op_stacks
    # analysis/compile.py compiled_view, the Compile view's answer (None for a trace without compiled code)
    Item("compile", 1, ("steps", "optree")),
    Item("layout", 2, ()),  # analysis/timeline.py build_layout
    Item("blocks", 1, ("layout",)),  # analysis/lod.py build_blocks
    Item("flows", 2, ("layout",)),  # analysis/flows.py build_flows
    Item("summary", 2, ("steps", "breakdown"), by_worker=True),  # analysis/distributed.py summarize_worker
)}
LOAD_ORDER = tuple(ITEMS)

# Events table rows from which a trace gets every item at load (the Llama trace has 2.7 M; a small
# training step, 3,000).
LOAD_ALL_ROWS = 200_000


def _views_version() -> int:
    # Imported here, not above: helper processes compute items without the view registry (FastAPI).
    from .api import VIEWS_VERSION

    return VIEWS_VERSION


def _version_text(name: str) -> str:
    item = ITEMS[name]
    version = _views_version() if name == "views" else item.version
    return f"{name}:{version}(" + ",".join(_version_text(n) for n in item.needs) + ")"


def tag(name: str, worker: str) -> str:
    """The item's version as it appears in its file name (8 hex digits)."""
    text = f"{CODEC_VERSION};{_version_text(name)}"
    if ITEMS[name].by_worker:
        text += f";{worker}"
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def current_items(entry: Entry, worker: str) -> set[str]:
    """The stored items whose file in the entry is of the current version."""
    tags = entry.item_tags()
    return {name for name in ITEMS if tag(name, worker) in tags.get(name, ())}


def load_items(events: int) -> tuple[str, ...]:
    """The items a loader computes once it has parsed a trace of `events` event rows, in LOAD_ORDER:
    every item of a big trace (each takes a second or more there); of a small one, what lists it and
    what the run's other workers read (its views and its summary). The others take milliseconds when
    first asked for: at load they made a logdir of 2,000 small runs load four times slower."""
    if events >= LOAD_ALL_ROWS:
        return LOAD_ORDER
    return tuple(n for n in LOAD_ORDER if n in with_needs(("views", "summary")))


def with_needs(names: tuple[str, ...]) -> set[str]:
    """`names` with the items they are computed from, and those items' own."""
    return {n for name in names for n in (name, *with_needs(ITEMS[name].needs))}


class _Classes(Mapping[str, type]):
    """The dataclasses stored items are made of (derived.CLASSES, which the codec reads and writes and no
    others), imported when a stored value first names one: the overview and the views name none."""

    def _classes(self) -> Mapping[str, type]:
        from .derived import CLASSES

        return CLASSES

    def __getitem__(self, name: str) -> type:
        return self._classes()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes())

    def __len__(self) -> int:
        return len(self._classes())


CLASSES: Mapping[str, type] = _Classes()


class Derivation:
    """The items of one trace, each got once (thread-safe): from memory, else read from `entry`,
    else computed from the tables (server/derived.py) and stored in `entry`. `before` is called, with
    no lock held, before an item is read or computed (the server waits there for the loader computing
    it); `kept` after each value is got."""

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
                    value = self._compute(name, needed)
                else:
                    with self.entry.computing(name):
                        value = self._compute(name, needed)
                        self.written[name] = self.entry.write_item(name, tag(name, self.worker), value, CLASSES)
            self.values[name] = value
        self.kept(name, value)
        return value

    def _compute(self, name: str, needed: list[Any]) -> Any:
        if name in self._computed:
            return self._computed.pop(name)
        from .derived import compute  # the analyses, imported when an item is first computed

        return compute(name, self.tables(), self.worker, needed)

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
