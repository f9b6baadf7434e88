"""Columns of one piece of a trace's event array, rows in the array's order.

A piece is a run of consecutive events; tables.py joins the pieces' columns into the trace's
tables. Reading a piece is most of a load and runs on helper processes too (parallel.py), so
its output is compact: numbers as numpy arrays, texts as codes plus the piece's distinct
values, never one Python object per event. Each column is read in one pass over the events,
with C-level iteration (attrgetter, dict lookups) rather than a Python loop per event; texts
shared by the tables (ph, cat, pid, tid) are numbered once for all events, and values that
become text (ids, launch dimensions) are turned into text once per distinct value, when the
pieces are joined (TEXT_OF).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from itertools import repeat
from operator import attrgetter, is_not, itemgetter
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .decode import DecodedEvents, decode_counter
from .schema import Args, Event, Kind, kind_of_category

# Columns taken from `args`, in the events table's order, with their dtype.
INT_ARGS = ("correlation", "device", "stream", "registers_per_thread", "shared_memory",
            "sequence_number", "fwd_thread_id", "python_id", "python_module_id")
FLOAT_ARGS = ("blocks_per_sm", "warps_per_sm", "occupancy")
ARG_DTYPES: dict[str, str] = {
    **{k: "int" for k in INT_ARGS}, **{k: "float" for k in FLOAT_ARGS},
    "external_id": "int", "python_parent_id": "int", "bytes": "int",
    **{k: "str" for k in ("grid", "block", "input_dims", "input_type", "call_stack", "process_group")},
}
DTYPES = {"int": np.int64, "float": np.float64}
ABSENT = {"int": -1, "float": np.nan}

# Which args each kind of event carries: an event's other args are left absent, and reading
# only these halves the work on big traces. Kinds not listed (unknown categories) get every column.
_DEVICE_ARGS = ("external_id", "correlation", "device", "stream", "bytes", "grid", "block",
                "registers_per_thread", "shared_memory", "blocks_per_sm", "warps_per_sm", "occupancy")
_OP_ARGS = ("external_id", "input_dims", "input_type", "call_stack", "sequence_number", "fwd_thread_id",
            "process_group")
ARGS_BY_KIND: dict[Kind, tuple[str, ...]] = {
    **{k: _DEVICE_ARGS for k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)},
    **{k: ("external_id", "correlation", "device", "stream") for k in (Kind.RUNTIME, Kind.DRIVER)},
    **{k: _OP_ARGS for k in (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)},
    Kind.GPU_USER_ANNOTATION: ("external_id", "device", "stream"),
    Kind.PYTHON_FUNCTION: ("python_id", "python_parent_id", "python_module_id"),
}
ALL_ARGS = tuple(ARG_DTYPES)

MEMORY_INTS = ("device_type", "device_id", "addr", "bytes")
MEMORY_FLOATS = ("total_allocated", "total_reserved")


def _list_text(dims: tuple) -> str:
    return str(list(dims))


# The text of a column's values where they are not text already: pid, tid and flow ids are ints
# or strings in the same trace (one label for both), a process group is either, and launch
# dimensions are lists (kept as tuples). Other text columns hold their values as they are.
TEXT_OF: dict[str, Callable[[Any], str]] = {"pid": str, "tid": str, "id": str, "process_group": str,
                                            "grid": _list_text, "block": _list_text,
                                            "bp": lambda bp: bp or ""}  # a flow's binding point


@dataclass
class Encoded:
    """A text column: `codes` index `values` (distinct values); -1 is absent. The values may
    include some that no code indexes (texts shared by the tables of a piece)."""

    codes: np.ndarray
    values: list[Any]


# `absent` for texts that have no absent value.
NOTHING_ABSENT = object()


def encode(items: Iterable[Any], n: int, absent: Any = None) -> Encoded:
    """Codes of the `n` `items` (`absent` is absent). A dict numbers the distinct values: twice
    as fast as pandas.factorize on an object array, which has to be built first."""
    numbers: dict[Any, int] = {}
    codes = np.fromiter(map(numbers.setdefault, items, map(len, repeat(numbers, n))), np.int32, n)
    values = list(numbers)
    gone = numbers.get(absent)
    if gone is not None:
        del values[gone]
        codes[codes == gone] = -1
        codes[codes > gone] -= 1
    return Encoded(codes, values)


def absent_texts(n: int) -> Encoded:
    return Encoded(np.full(n, -1, dtype=np.int32), [])


@dataclass(frozen=True)
class Absent:
    """`n` absent values: what a piece holds for an arg none of its events carries. Most pieces
    hold few kinds of event (Kineto writes a thread's or a stream's events together), and sending
    the helpers' pieces back through a pipe is part of a load (tables.py fills these in)."""

    n: int


def subset(texts: Encoded, rows: np.ndarray) -> Encoded:
    """The text column of `rows` only (the same values)."""
    return Encoded(texts.codes[rows], texts.values)


class Table(IntEnum):
    """Which table an event feeds, by its ph."""

    COMPLETE, FLOW, INSTANT, COUNTER, META, BEGIN_END, OTHER = range(7)


_PH_TABLE = {"X": Table.COMPLETE, "s": Table.FLOW, "f": Table.FLOW, "t": Table.FLOW, "i": Table.INSTANT,
             "I": Table.INSTANT, "C": Table.COUNTER, "M": Table.META, "B": Table.BEGIN_END, "E": Table.BEGIN_END}


def routed(ph: Encoded) -> tuple[np.ndarray, dict[Table, np.ndarray]]:
    """(each event's Table, the rows of each table but BEGIN_END and OTHER) from the events' ph."""
    table = np.array([_PH_TABLE.get(v, Table.OTHER) for v in ph.values], dtype=np.int8)[ph.codes]
    return table, {t: np.flatnonzero(table == t) for t in (Table.COMPLETE, Table.FLOW, Table.INSTANT, Table.COUNTER,
                                                           Table.META)}


def _take(items: Sequence[Any], rows: np.ndarray) -> list[Any]:
    return list(map(items.__getitem__, rows.tolist()))


def _numbers(items: Sequence[Any], key: str, dtype: type) -> np.ndarray:
    return np.fromiter(map(attrgetter(key), items), dtype, len(items))


def _texts_of(items: Sequence[Any], key: str) -> Encoded:
    return encode(map(attrgetter(key), items), len(items))


def _ints_or_none(items: Sequence[Any], key: str) -> np.ndarray:
    """An int column whose absent values may be None (Kineto writes null for the root frame's parent)."""
    values = list(map(attrgetter(key), items))
    if None in values:
        values = [-1 if v is None else v for v in values]
    return np.array(values, dtype=np.int64) if values else np.empty(0, np.int64)


def _dims(items: Sequence[Any], key: str) -> Encoded:
    """Launch dimensions (grid, block), as tuples: lists cannot be numbered. Copies and memsets
    have none."""
    values = list(map(attrgetter(key), items))
    given = np.flatnonzero(np.fromiter(map(is_not, values, repeat(None)), bool, len(values)))
    if len(given) == len(values):
        return encode(map(tuple, values), len(values))
    out = absent_texts(len(values))
    dims = encode(map(tuple, _take(values, given)), len(given))
    out.codes[given], out.values = dims.codes, dims.values
    return out


_SHARED = ("ph", "cat", "pid", "tid")


def _shared_texts(events: Sequence[Event]) -> dict[str, Encoded]:
    """ph, cat, pid and tid, read in one pass as their combinations (a few dozen), which a pass per
    column takes twice as long as. Each column's values keep the order of their first event, as
    _texts_of gives them: a value first appears with the first combination that holds it."""
    combos = encode(map(attrgetter(*_SHARED), events), len(events))
    out = {}
    for i, key in enumerate(_SHARED):
        column = encode(map(itemgetter(i), combos.values), len(combos.values))
        out[key] = Encoded(column.codes[combos.codes], column.values)
    return out


def _raw_texts(raws: Sequence[Any]) -> Encoded:
    """The JSON text of raw values (input shapes and types); an absent one is empty."""
    return encode(map(str, raws, repeat("utf-8"), repeat("replace")), len(raws), absent="")


def _input_dims(args: Sequence[Args]) -> Encoded:
    dims = list(map(attrgetter("input_dims"), args))
    if not all(dims):  # PyTorch 1.x spelled it "Input dims"
        legacy = list(map(attrgetter("input_dims_legacy"), args))
        if any(legacy):
            dims = [d or old for d, old in zip(dims, legacy)]
    return _raw_texts(dims)


def _external_ids(args: Sequence[Args]) -> np.ndarray:
    ids = _numbers(args, "external_id", np.int64)
    if (ids == -1).any():  # Kineto spelled it "external id" before PyTorch 1.9
        ids = np.where(ids != -1, ids, _numbers(args, "external_id_legacy", np.int64))
    return ids


# How each args column is read off a list of Args.
_READERS: dict[str, Callable[[Sequence[Args]], Any]] = {
    **{k: (lambda args, k=k: _numbers(args, k, np.int64)) for k in INT_ARGS},
    **{k: (lambda args, k=k: _numbers(args, k, np.float64)) for k in FLOAT_ARGS},
    "external_id": _external_ids,
    "python_parent_id": lambda args: _ints_or_none(args, "python_parent_id"),
    "bytes": lambda args: _numbers(args, "bytes_", np.int64),
    "grid": lambda args: _dims(args, "grid"),
    "block": lambda args: _dims(args, "block"),
    "input_dims": _input_dims,
    "input_type": lambda args: _raw_texts(list(map(attrgetter("input_type"), args))),
    "call_stack": lambda args: _texts_of(args, "call_stack"),
    "process_group": lambda args: _texts_of(args, "process_group"),
}


NO_ARGS = Args()


def _args(events: Sequence[Event]) -> list[Args]:
    """The events' args, NO_ARGS for an event without."""
    args = list(map(attrgetter("args"), events))
    return args if None not in args else [NO_ARGS if a is None else a for a in args]


def _ident(value: Any) -> str:
    return "" if value is None else str(value)


@dataclass
class PieceColumns:
    """The columns of one piece. Complete events keep every row, those with an unusable ts/dur
    too, and `index`, their position in the piece: how a one-process load orders rows that
    start at the same time depends on them (see tables.py)."""

    count: int = 0  # array elements in the piece, events that could not be read included
    lenient: bool = False  # some event failed the typed decode and was read on its own
    skipped: int = 0
    repaired: int = 0
    unpaired_begin_end: int = 0
    x: dict[str, Any] = field(default_factory=dict)
    mem: dict[str, Any] = field(default_factory=dict)
    flow: dict[str, Any] = field(default_factory=dict)
    counter: dict[str, list] = field(default_factory=lambda: {k: [] for k in ("name", "pid", "ts", "series",
                                                                              "value")})
    processes: dict[str, dict[str, Any]] = field(default_factory=dict)
    threads: dict[str, dict[str, Any]] = field(default_factory=dict)


def read_piece(decoded: DecodedEvents) -> PieceColumns:
    """Columns of a piece's events."""
    events, index = decoded.events, decoded.index
    cols = PieceColumns(count=decoded.count, lenient=decoded.lenient, skipped=decoded.skipped,
                        repaired=decoded.repaired)
    shared = _shared_texts(events)
    table, rows = routed(shared["ph"])
    x_rows = rows[Table.COMPLETE]
    cols.x = _complete(_take(events, x_rows), {k: subset(shared[k], x_rows) for k in ("cat", "pid", "tid")},
                       x_rows if index is None else index[x_rows])
    instant_rows = rows[Table.INSTANT]
    mem_rows = instant_rows[[e.name == "[memory]" for e in _take(events, instant_rows)]]
    cols.mem = _memory(_take(events, mem_rows), {k: subset(shared[k], mem_rows) for k in ("pid", "tid")})
    cols.flow = _flows(_take(events, rows[Table.FLOW]), {k: subset(shared[k], rows[Table.FLOW]) for k in shared})
    for i in rows[Table.COUNTER].tolist():
        add_counter(cols.counter, decoded.raws[i])
    for ev in _take(events, rows[Table.META]):
        add_meta(cols, ev)
    cols.unpaired_begin_end = int(np.count_nonzero(table == Table.BEGIN_END))
    return cols


def _complete(xs: list[Event], shared: dict[str, Encoded], index: np.ndarray) -> dict[str, Any]:
    """Columns of complete events, args read per kind of event."""
    n = len(xs)
    cat = shared["cat"]
    c: dict[str, Any] = {"index": index.astype(np.int64, copy=False), "name": _texts_of(xs, "name"), **shared,
                         "ts": _numbers(xs, "ts", np.float64), "dur": _numbers(xs, "dur", np.float64)}
    # Events of kinds that read the same args are read together.
    present = np.unique(cat.codes).tolist()
    reads = {code: ARGS_BY_KIND.get(kind_of_category(cat.values[code]), ALL_ARGS) for code in present}
    groups = {columns: [code for code in present if reads[code] == columns] for columns in set(reads.values())}
    args = _args(xs)
    parts: dict[str, list[tuple[np.ndarray | None, Any]]] = {k: [] for k in ALL_ARGS}
    for columns, codes in groups.items():
        if len(groups) == 1:
            group_rows, group_args = None, args
        else:
            group_rows = np.flatnonzero(np.isin(cat.codes, codes))
            group_args = _take(args, group_rows)
        for key in columns:
            parts[key].append((group_rows, _READERS[key](group_args)))
    for key, dtype in ARG_DTYPES.items():
        c[key] = _joined_texts(parts[key], n) if dtype == "str" else _filled(parts[key], n, dtype)
    return c


def _filled(parts: list[tuple[np.ndarray | None, np.ndarray]], n: int, dtype: str) -> np.ndarray | Absent:
    if not parts:
        return Absent(n)
    if len(parts) == 1 and parts[0][0] is None:
        return parts[0][1]
    out = np.full(n, ABSENT[dtype], dtype=DTYPES[dtype])
    for rows, values in parts:
        out[rows] = values
    return out


def _joined_texts(parts: list[tuple[np.ndarray | None, Encoded]], n: int) -> Encoded | Absent:
    """One text column of the groups that read it (their values concatenated)."""
    if not parts:
        return Absent(n)
    if len(parts) == 1 and parts[0][0] is None:
        return parts[0][1]
    out = absent_texts(n)
    for rows, texts in parts:
        out.codes[rows] = np.where(texts.codes >= 0, texts.codes + len(out.values), -1)
        out.values += texts.values
    return out


def _memory(mems: list[Event], shared: dict[str, Encoded]) -> dict[str, Any]:
    args = _args(mems)
    return {
        "ts": _numbers(mems, "ts", np.float64), **shared,
        **{k: _numbers(args, "mem_bytes" if k == "bytes" else k, np.int64) for k in MEMORY_INTS},
        **{k: _numbers(args, k, np.float64) for k in MEMORY_FLOATS},
    }


def _flows(flows: list[Event], shared: dict[str, Encoded]) -> dict[str, Any]:
    return {
        "ph": shared["ph"], "cat": shared["cat"], "id": _texts_of(flows, "id"),
        "ts": _numbers(flows, "ts", np.float64), "pid": shared["pid"], "tid": shared["tid"],
        "bp": encode(map(attrgetter("bp"), flows), len(flows), absent=NOTHING_ABSENT),
    }


def add_counter(counter: dict[str, list], raw: Any) -> None:
    """Add the numeric series of a counter event (its raw JSON) to `counter`."""
    ev = decode_counter(raw)
    if ev is None or ev.args is None:  # a counter without values: nothing to plot
        return
    for series, value in ev.args.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            counter["name"].append(ev.name)
            counter["pid"].append(ev.pid)
            counter["ts"].append(ev.ts)
            counter["series"].append(series)
            counter["value"].append(float(value))


def add_meta(cols: PieceColumns, ev: Event) -> None:
    """Take a process's or thread's name, labels or sort index from a metadata event."""
    pid = _ident(ev.pid)
    if ev.name.startswith("process_"):
        target = cols.processes.setdefault(pid, {})
    elif ev.name.startswith("thread_"):
        target = cols.threads.setdefault(f"{pid}/{_ident(ev.tid)}", {})
    else:
        return
    args = ev.args or NO_ARGS
    if ev.name.endswith("_name") and args.meta_name is not None:
        target["name"] = args.meta_name
    elif ev.name.endswith("_labels") and args.labels is not None:
        target["labels"] = args.labels
    elif ev.name.endswith("_sort_index") and args.sort_index != -1:
        target["sort_index"] = args.sort_index
