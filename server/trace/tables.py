"""Columnar tables of one trace: what every analysis reads.

`TraceTables.events` holds the complete (`ph: "X"`) events sorted by start time, one row
per event, strings as pandas categoricals, absent ints as -1 and absent floats as NaN.
`memory` holds `[memory]` instant events, `flows` the flow arrows (ac2g, fwdbwd),
`counters` the `ph: "C"` samples in long form, and `metadata` the document's top-level
keys plus process and thread names.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Callable

import numpy as np
import pandas as pd

from .decode import DecodedTrace, decode_counter
from .schema import Args, Event, Kind, kind_of_category

# Bump when the tables' content or layout changes: it keys the on-disk cache.
TABLES_VERSION = 4

_INT_ARGS = ("correlation", "device", "stream", "registers_per_thread", "shared_memory",
             "sequence_number", "fwd_thread_id", "python_id", "python_module_id")
_FLOAT_ARGS = ("blocks_per_sm", "warps_per_sm", "occupancy")


def _raw_texts(raws) -> list[str | None]:
    return [bytes(r).decode("utf-8", "replace") if r else None for r in raws]


# Columns taken from `args`: dtype ("int", "float" or "str") and how to read them off a list
# of Args. Absent values are -1, NaN or None.
_ARG_COLUMNS: dict[str, tuple[str, Callable[[list[Args]], Any]]] = {
    **{k: ("int", lambda args, k=k: map(attrgetter(k), args)) for k in _INT_ARGS},
    **{k: ("float", lambda args, k=k: map(attrgetter(k), args)) for k in _FLOAT_ARGS},
    "external_id": ("int", lambda args: (a.external_id if a.external_id != -1 else a.external_id_legacy
                                         for a in args)),
    "python_parent_id": ("int", lambda args: (-1 if a.python_parent_id is None else a.python_parent_id
                                              for a in args)),
    "bytes": ("int", lambda args: map(attrgetter("bytes_"), args)),
    "grid": ("str", lambda args: [None if g is None else str(g) for g in map(attrgetter("grid"), args)]),
    "block": ("str", lambda args: [None if b is None else str(b) for b in map(attrgetter("block"), args)]),
    "input_dims": ("str", lambda args: _raw_texts(a.input_dims or a.input_dims_legacy for a in args)),
    "input_type": ("str", lambda args: _raw_texts(map(attrgetter("input_type"), args))),
    "call_stack": ("str", lambda args: list(map(attrgetter("call_stack"), args))),
    "process_group": ("str", lambda args: [None if g is None else str(g) for g in map(attrgetter("process_group"), args)]),
}
_DTYPES = {"int": np.int64, "float": np.float64}
_ABSENT = {"int": -1, "float": np.nan}

# Which args each kind of event carries: reading only those halves the work on big traces.
# Kinds not listed (unknown categories) get every column.
_DEVICE_ARGS = ("external_id", "correlation", "device", "stream", "bytes", "grid", "block",
                "registers_per_thread", "shared_memory", "blocks_per_sm", "warps_per_sm", "occupancy")
_OP_ARGS = ("external_id", "input_dims", "input_type", "call_stack", "sequence_number", "fwd_thread_id",
            "process_group")
_ARGS_BY_KIND: dict[Kind, tuple[str, ...]] = {
    **{k: _DEVICE_ARGS for k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)},
    **{k: ("external_id", "correlation", "device", "stream") for k in (Kind.RUNTIME, Kind.DRIVER)},
    **{k: _OP_ARGS for k in (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)},
    Kind.GPU_USER_ANNOTATION: ("external_id", "device", "stream"),
    Kind.PYTHON_FUNCTION: ("python_id", "python_parent_id", "python_module_id"),
}


@dataclass
class TraceTables:
    events: pd.DataFrame
    memory: pd.DataFrame
    flows: pd.DataFrame
    counters: pd.DataFrame
    metadata: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def _floats(values: list[float]) -> np.ndarray:
    return np.array(values, dtype=np.float64) if values else np.empty(0, dtype=np.float64)


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


Encoded = tuple[np.ndarray, np.ndarray]  # (codes, unique values); code -1 is absent


def _encode(values: list[Any]) -> Encoded:
    """Codes and uniques of a group's strings, so that the per-event objects can be freed."""
    # factorize over objects is several times faster than letting pandas infer a string dtype.
    codes, uniques = pd.factorize(np.array(values, dtype=object))
    return codes.astype(np.int32, copy=False), uniques


def _absent(n: int) -> Encoded:
    return np.full(n, -1, dtype=np.int32), np.empty(0, dtype=object)


def _merged(parts: list[Encoded], as_text: bool = False) -> pd.Categorical:
    """One categorical from encoded parts. `as_text` folds ints and strings into one label
    (pid/tid are ints or strings in the same trace)."""
    uniques = np.concatenate([u for _, u in parts]) if parts else np.empty(0, dtype=object)
    if as_text:
        uniques = np.array(["" if u is None else str(u) for u in uniques], dtype=object)
    remap, merged = pd.factorize(uniques)
    out = []
    offset = 0
    for codes, part_uniques in parts:
        out.append(np.where(codes >= 0, remap[offset + np.maximum(codes, 0)] if len(part_uniques) else -1, -1))
        offset += len(part_uniques)
    codes = np.concatenate(out) if out else np.empty(0, dtype=np.int32)
    return pd.Categorical.from_codes(codes, categories=pd.Index(merged, dtype=object))


def _sorted_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """A frame of the columns reordered by `ts` (stable): each array is sorted once, before
    pandas assembles them, which is cheaper than reordering the finished frame."""
    order = np.argsort(columns["ts"], kind="stable")
    return pd.DataFrame({k: v[order] for k, v in columns.items()})


# Texts (names, shapes, stacks) are kept to this many characters. Real names reach about 5,000
# (templated CUDA kernels); every analysis tests names against patterns, so a 10 MB name cost
# seconds per request.
MAX_TEXT_CHARS = 16_384


def _cut_long(cat: pd.Categorical) -> tuple[pd.Categorical, int]:
    """`cat` with categories longer than MAX_TEXT_CHARS cut, and how many were."""
    categories = cat.categories.to_numpy(dtype=object)
    long = np.fromiter((isinstance(c, str) and len(c) > MAX_TEXT_CHARS for c in categories), bool,
                       len(categories))
    if not long.any():
        return cat, 0
    categories = categories.copy()
    categories[long] = [f"{c[:MAX_TEXT_CHARS]}… (cut from {len(c):,} characters)" for c in categories[long]]
    remap, unique = pd.factorize(categories)  # texts alike up to the cut become one
    codes = np.asarray(cat.codes)
    return pd.Categorical.from_codes(np.where(codes >= 0, remap[np.maximum(codes, 0)], -1),
                                     categories=pd.Index(unique, dtype=object)), int(long.sum())


def _ident(value: Any) -> str:
    return "" if value is None else str(value)


class _Columns:
    """Accumulates the rows of each chunk, per table and column, until the frames are built."""

    def __init__(self) -> None:
        # Complete events: per column, one part per group of events (an array, or for strings
        # codes and uniques: a GB trace's millions of per-event string objects never pile up).
        self.x: dict[str, list] = {k: [] for k in ("name", "cat", "pid", "tid", "ts", "dur", *_ARG_COLUMNS)}
        self.mem: dict[str, list] = {k: [] for k in (
            "ts", "pid", "tid", "device_type", "device_id", "addr", "bytes", "total_allocated", "total_reserved")}
        self.flow: dict[str, list] = {k: [] for k in ("ph", "cat", "id", "ts", "pid", "tid", "bp")}
        self.counter: dict[str, list] = {k: [] for k in ("name", "pid", "ts", "series", "value")}
        self.processes: dict[str, dict[str, Any]] = {}
        self.threads: dict[str, dict[str, Any]] = {}
        self.bad_x = 0
        self.skipped = 0
        self.repaired = 0
        self.unpaired_begin_end = 0
        self.cut_texts = 0

    def absorb(self, other: _Columns) -> None:
        """Append the columns of the events that come after ours (another piece of the array)."""
        for mine, theirs in ((self.x, other.x), (self.mem, other.mem), (self.flow, other.flow),
                             (self.counter, other.counter)):
            for key, parts in theirs.items():
                mine[key].extend(parts)
        for table, more in ((self.processes, other.processes), (self.threads, other.threads)):
            for key, fields in more.items():
                table.setdefault(key, {}).update(fields)
        self.bad_x += other.bad_x
        self.skipped += other.skipped
        self.repaired += other.repaired
        self.unpaired_begin_end += other.unpaired_begin_end

    def add_chunk(self, events: list[Event], raws: list[Any]) -> None:
        by_cat: dict[str, list[Event]] = {}
        mems, flows = [], []
        for i, ev in enumerate(events):
            ph = ev.ph
            if ph == "X":
                group = by_cat.get(ev.cat)
                if group is None:
                    group = by_cat[ev.cat] = []
                group.append(ev)
            elif ph in ("s", "f", "t"):
                flows.append(ev)
            elif ph in ("i", "I") and ev.name == "[memory]":
                mems.append(ev)
            elif ph == "C":
                self._add_counter(raws[i])
            elif ph == "M":
                self._add_meta(ev)
            elif ph in ("B", "E"):
                self.unpaired_begin_end += 1
        for cat, xs in by_cat.items():
            self._add_complete(xs, _ARGS_BY_KIND.get(kind_of_category(cat), tuple(_ARG_COLUMNS)))
        self._add_memory(mems)
        self._add_flows(flows)

    def _add_complete(self, xs: list[Event], arg_columns: tuple[str, ...]) -> None:
        """Append a group of events of one category, reading only the args it carries."""
        ts = np.fromiter(map(attrgetter("ts"), xs), np.float64, len(xs))
        dur = np.fromiter(map(attrgetter("dur"), xs), np.float64, len(xs))
        valid = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0)
        if not valid.all():
            self.bad_x += int(len(xs) - valid.sum())
            xs = [e for e, ok in zip(xs, valid) if ok]
            ts, dur = ts[valid], dur[valid]
        if not xs:
            return
        c, n = self.x, len(xs)
        for key in ("name", "cat", "pid", "tid"):
            c[key].append(_encode(list(map(attrgetter(key), xs))))
        # Numbers go straight into one array per group: no intermediate Python list.
        c["ts"].append(ts)
        c["dur"].append(dur)
        args = [e.args for e in xs]
        for key, (dtype, read) in _ARG_COLUMNS.items():
            if dtype == "str":
                c[key].append(_encode(read(args)) if key in arg_columns else _absent(n))
            elif key in arg_columns:
                c[key].append(np.fromiter(read(args), _DTYPES[dtype], n))
            else:
                c[key].append(np.full(n, _ABSENT[dtype], dtype=_DTYPES[dtype]))

    def _add_memory(self, mems: list[Event]) -> None:
        if not mems:
            return
        m, n = self.mem, len(mems)
        m["ts"].append(np.fromiter(map(attrgetter("ts"), mems), np.float64, n))
        m["pid"].append(_encode(list(map(attrgetter("pid"), mems))))
        m["tid"].append(_encode(list(map(attrgetter("tid"), mems))))
        args = [e.args for e in mems]
        m["bytes"].append(np.fromiter(map(attrgetter("mem_bytes"), args), np.int64, n))
        for key in ("device_type", "device_id", "addr"):
            m[key].append(np.fromiter(map(attrgetter(key), args), np.int64, n))
        for key in ("total_allocated", "total_reserved"):
            m[key].append(np.fromiter(map(attrgetter(key), args), np.float64, n))

    def _add_flows(self, flows: list[Event]) -> None:
        if not flows:
            return
        f = self.flow
        f["ts"].append(np.fromiter(map(attrgetter("ts"), flows), np.float64, len(flows)))
        for key in ("ph", "cat", "id", "pid", "tid"):
            f[key].append(_encode(list(map(attrgetter(key), flows))))
        f["bp"].append(_encode([e.bp or "" for e in flows]))

    def _add_counter(self, raw: Any) -> None:
        ev = decode_counter(raw)
        if ev is None:
            return
        for series, value in ev.args.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.counter["name"].append(ev.name)
                self.counter["pid"].append(ev.pid)
                self.counter["ts"].append(ev.ts)
                self.counter["series"].append(series)
                self.counter["value"].append(float(value))

    def _add_meta(self, ev: Event) -> None:
        pid = _ident(ev.pid)
        if ev.name.startswith("process_"):
            target = self.processes.setdefault(pid, {})
        elif ev.name.startswith("thread_"):
            target = self.threads.setdefault(f"{pid}/{_ident(ev.tid)}", {})
        else:
            return
        if ev.name.endswith("_name") and ev.args.meta_name is not None:
            target["name"] = ev.args.meta_name
        elif ev.name.endswith("_labels") and ev.args.labels is not None:
            target["labels"] = ev.args.labels
        elif ev.name.endswith("_sort_index") and ev.args.sort_index != -1:
            target["sort_index"] = ev.args.sort_index

    def _text(self, parts: list[Encoded], as_text: bool = False) -> pd.Categorical:
        """A categorical of one column's parts, over-long texts cut (and counted)."""
        cat, cut = _cut_long(_merged(parts, as_text))
        self.cut_texts += cut
        return cat

    def events_frame(self) -> pd.DataFrame:
        c = self.x
        columns: dict[str, Any] = {
            "name": self._text(c["name"]),
            "cat": self._text(c["cat"]),
            "pid": self._text(c["pid"], as_text=True),
            "tid": self._text(c["tid"], as_text=True),
            "ts": _joined(c["ts"], np.float64),
            "dur": _joined(c["dur"], np.float64),
        }
        for key, (dtype, _) in _ARG_COLUMNS.items():
            if dtype == "str":
                columns[key] = self._text(c[key])
            else:
                columns[key] = _joined(c[key], _DTYPES[dtype])
        cat = columns["cat"]
        kinds = np.array([int(kind_of_category(c)) for c in cat.categories], dtype=np.int8)
        kind = kinds[cat.codes] if len(kinds) else np.empty(0, np.int8)
        columns = {"name": columns.pop("name"), "cat": columns.pop("cat"), "kind": kind, **columns}
        return _sorted_frame(columns)

    def memory_frame(self) -> pd.DataFrame:
        m = self.mem
        return _sorted_frame({
            "ts": _joined(m["ts"], np.float64),
            "pid": self._text(m["pid"], as_text=True), "tid": self._text(m["tid"], as_text=True),
            **{k: _joined(m[k], np.int64) for k in ("device_type", "device_id", "addr", "bytes")},
            **{k: _joined(m[k], np.float64) for k in ("total_allocated", "total_reserved")},
        })

    def flows_frame(self) -> pd.DataFrame:
        f = self.flow
        return pd.DataFrame({
            "ph": self._text(f["ph"]), "cat": self._text(f["cat"]), "id": self._text(f["id"], as_text=True),
            "ts": _joined(f["ts"], np.float64),
            "pid": self._text(f["pid"], as_text=True), "tid": self._text(f["tid"], as_text=True),
            "bp": self._text(f["bp"]),
        })

    def counters_frame(self) -> pd.DataFrame:
        k = self.counter
        return pd.DataFrame({
            "name": self._text([_encode(k["name"])]), "pid": self._text([_encode(k["pid"])], as_text=True),
            "ts": _floats(k["ts"]), "series": self._text([_encode(k["series"])]), "value": _floats(k["value"]),
        })


@contextmanager
def _gc_paused():
    """The objects made while parsing hold no cycles; collecting them mid-parse costs ~10% of a load."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_columns(decoded: DecodedTrace, on_progress: Callable[[float], None] | None = None) -> _Columns:
    """Decode every event chunk of `decoded` into columns (not yet assembled into tables)."""
    cols = _Columns()
    with _gc_paused():
        for events, raws in decoded.chunks(on_progress):
            cols.add_chunk(events, raws)
    cols.skipped += decoded.skipped
    cols.repaired += decoded.repaired
    return cols


def assemble(cols: _Columns, decoded: DecodedTrace) -> TraceTables:
    """The tables of one trace from its columns, with the document's metadata and warnings."""
    with _gc_paused():
        decoded.release()
        events = cols.events_frame()
    memory, flows, counters = cols.memory_frame(), cols.flows_frame(), cols.counters_frame()
    warnings = list(decoded.warnings)
    if cols.skipped:
        warnings.append(f"{cols.skipped} events could not be read and were skipped")
    if cols.repaired:
        warnings.append(f"{cols.repaired} events had fields that could not be read (a wrong type, a number out of "
                        "range, text that is not UTF-8): those fields were left out or their text repaired")
    if cols.bad_x:
        warnings.append(f"{cols.bad_x} complete events had a missing, NaN or negative ts/dur and were skipped")
    if cols.cut_texts:
        warnings.append(f"{cols.cut_texts} names or other texts longer than {MAX_TEXT_CHARS:,} characters were cut "
                        "to that length")
    if cols.unpaired_begin_end:
        warnings.append(f"{cols.unpaired_begin_end} begin/end (ph B/E) events were ignored; profboard reads complete (X) events")
    metadata = dict(decoded.metadata)
    metadata["processes"] = cols.processes
    metadata["threads"] = cols.threads
    if events.empty:
        warnings.append("the trace holds no complete events")
    return TraceTables(
        events=events,
        memory=memory,
        flows=flows,
        counters=counters,
        metadata=metadata,
        warnings=warnings,
    )


def build_tables(decoded: DecodedTrace, on_progress: Callable[[float], None] | None = None) -> TraceTables:
    """Decode every event chunk and assemble the columnar tables of one trace."""
    return assemble(read_columns(decoded, on_progress), decoded)
