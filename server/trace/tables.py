"""Columnar tables of one trace: what every analysis reads.

`TraceTables.events` holds the complete (`ph: "X"`) events sorted by start time, one row
per event, strings as pandas categoricals, absent ints as -1 and absent floats as NaN.
`memory` holds `[memory]` instant events, `flows` the flow arrows (ac2g, fwdbwd),
`counters` the `ph: "C"` samples in long form, and `metadata` the document's top-level
keys plus process and thread names.

The tables are joined from the columns of the pieces of the event array (columns.py), which
hold their rows in array order. Events that start at the same time keep the order the parser
has always given them, since analyses that nest events (an annotation and the op it starts
with) may depend on it: events were read CHUNK_EVENTS at a time (the whole array when it is at
most WHOLE_DECODE_BYTES and every event decoded: DecodedTrace.read_chunk), grouped by category in order of first
appearance within a chunk, then sorted by start time (stable). A text column's categories are
in order of first appearance in that grouped order.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from .columns import (ABSENT, ARG_DTYPES, DTYPES, MEMORY_FLOATS, MEMORY_INTS, TEXT_OF, Absent, Encoded, PieceColumns,
                      absent_texts, encode, read_piece)
from .decode import DecodedEvents, DecodedTrace
from .parallel import Helpers, read_pieces
from .schema import kind_of_category

# TABLES_VERSION (keys.py) is bumped when the tables' content or layout changes: it keys the store.


@dataclass
class TraceTables:
    events: pd.DataFrame
    memory: pd.DataFrame
    flows: pd.DataFrame
    counters: pd.DataFrame
    metadata: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


# Texts (names, shapes, stacks) are kept to this many characters. Real names reach about 5,000
# (templated CUDA kernels); every analysis tests names against patterns, so a 10 MB name cost
# seconds per request.
MAX_TEXT_CHARS = 16_384


def _cut_long(cat: pd.Categorical) -> tuple[pd.Categorical, int]:
    """`cat` with categories longer than MAX_TEXT_CHARS cut, and how many were."""
    categories = cat.categories.to_numpy(dtype=object)
    lengths = np.fromiter(map(len, categories), np.int64, len(categories))  # texts, all of them
    long = lengths > MAX_TEXT_CHARS
    if not long.any():
        return cat, 0
    categories = categories.copy()
    categories[long] = [f"{c[:MAX_TEXT_CHARS]}… (cut from {len(c):,} characters)" for c in categories[long]]
    remap, unique = pd.factorize(categories)  # texts alike up to the cut become one
    codes = np.asarray(cat.codes)
    return pd.Categorical.from_codes(np.where(codes >= 0, remap[np.maximum(codes, 0)], -1),
                                     categories=pd.Index(unique, dtype=object)), int(long.sum())


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def _merged_codes(parts: list[Encoded | Absent], key: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes over all parts' rows, the distinct texts they index) of one text column, the
    values turned into text as TEXT_OF says for `key` (values of one text become one)."""
    parts = [absent_texts(p.n) if isinstance(p, Absent) else p for p in parts]
    values: list[Any] = [v for part in parts for v in part.values]
    merged = _distinct_texts(values, TEXT_OF.get(key))
    codes = np.empty(sum(len(p.codes) for p in parts), dtype=np.int32)
    start = offset = 0
    # One extra entry, -1, that absent codes (-1) index.
    remap = np.append(merged.codes, np.int32(-1))
    for part in parts:
        local = remap[np.where(part.codes >= 0, part.codes + offset, len(remap) - 1)] if part.values else -1
        codes[start:start + len(part.codes)] = local
        start += len(part.codes)
        offset += len(part.values)
    return codes, np.array(merged.values, dtype=object)


def _distinct_texts(values: list[Any], text_of: Callable[[Any], str] | None) -> Encoded:
    """`values` numbered by their text (`text_of`'s, or their own), distinct texts in order of first
    appearance. Ids (flow ids, pids) are mostly ints, distinct in each piece: their text is the same one
    to one, so ints are numbered as numbers and only the distinct ones made text (a flow id column of
    420,000 values took 0.45 s through str and a dict, on the machine measured)."""
    if text_of is str and len(values) > 1000 and set(map(type, values)) == {int}:
        try:
            numbers = np.array(values, dtype=np.int64)
        except OverflowError:  # beyond 64 bits: as texts below
            pass
        else:
            codes, distinct = pd.factorize(numbers)
            return Encoded(codes.astype(np.int32), list(map(str, distinct.tolist())))
    if text_of is not None:
        values = list(map(text_of, values))
    return encode(values, len(values))


def _by_first_appearance(codes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(new code of each old code, then -1 for absent; the values in order of first appearance in
    `codes`), leaving out values no code takes."""
    seen = pd.unique(codes)
    seen = seen[seen >= 0]
    remap = np.full(len(values) + 1, -1, dtype=np.int32)
    remap[seen] = np.arange(len(seen), dtype=np.int32)
    return remap, values[seen]


def _frame(columns: dict[str, Any]) -> pd.DataFrame:
    """A frame holding each column as its own block: stacking same-dtype columns into one block
    copies them all (1.3 s on an 853 MB trace), and the store's tables open this way too."""
    return pd.DataFrame(columns, copy=False)


def _categorical(codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(values, dtype=object), validate=False)


class _Joiner:
    """Joins the pieces' columns into frames, counting the texts cut to MAX_TEXT_CHARS. A text
    column's categories are in order of first appearance in the array (the grouped order for
    complete events, see _event_order)."""

    def __init__(self, parts: list[PieceColumns]) -> None:
        self.parts = parts
        self.cut_texts = 0
        self.bad_x = 0

    def _text(self, codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
        cat, cut = _cut_long(_categorical(codes, values))
        self.cut_texts += cut
        return cat

    def _texts(self, table: str, key: str) -> pd.Categorical:
        codes, values = _merged_codes([getattr(p, table)[key] for p in self.parts], key)
        remap, categories = _by_first_appearance(codes, values)
        return self._text(remap[codes], categories)

    def _numbers(self, table: str, key: str, dtype: type) -> np.ndarray:
        return _joined([getattr(p, table)[key] for p in self.parts], dtype)

    def events_frame(self, chunk: int | None) -> pd.DataFrame:
        parts = self.parts
        ts = _joined([p.x["ts"] for p in parts], np.float64)
        dur = _joined([p.x["dur"] for p in parts], np.float64)
        # One buffer for every number column joined before its rows are put in order: fresh
        # memory for each costs a page fault per 4 KB.
        scratch = np.empty(len(ts) * 8, dtype=np.uint8)

        def numbers(key: str, dtype: str) -> np.ndarray:
            joined = scratch.view(DTYPES[dtype])
            start = 0
            for part in parts:
                values = part.x[key]
                n = values.n if isinstance(values, Absent) else len(values)
                joined[start:start + n] = ABSENT[dtype] if isinstance(values, Absent) else values
                start += n
            return joined[order]

        cat_codes, cat_values = _merged_codes([p.x["cat"] for p in parts], "cat")
        order, kept = _event_order(parts, chunk, ts, dur, cat_codes)
        self.bad_x = len(ts) - len(order)

        def text(key: str, merged: tuple | None = None) -> pd.Categorical:
            codes, values = merged or _merged_codes([p.x[key] for p in parts], key)
            remap, categories = _by_first_appearance(codes[kept], values)
            return self._text(remap[codes[order]], categories)

        def number_columns() -> dict[str, np.ndarray]:
            ordered = {"ts": ts[order], "dur": dur[order]}
            ordered.update((key, numbers(key, dtype)) for key, dtype in ARG_DTYPES.items() if dtype != "str")
            return ordered

        # The number columns are put in order on another thread, numpy's copies letting go of the GIL, while
        # this one numbers the texts: a big trace's loader has a core to spare then (its helpers idle).
        with ThreadPoolExecutor(1, thread_name_prefix="profboard-columns") as pool:
            ordered = pool.submit(number_columns)
            texts = {"name": text("name"), "cat": text("cat", merged=(cat_codes, cat_values)), "pid": text("pid"),
                     "tid": text("tid")}
            texts.update((key, text(key)) for key, dtype in ARG_DTYPES.items() if dtype == "str")
            ordered = ordered.result()
        cat = texts["cat"]
        kinds = np.array([int(kind_of_category(c)) for c in cat.categories], dtype=np.int8)
        columns: dict[str, Any] = {"name": texts["name"], "cat": cat,
                                   "kind": kinds[cat.codes] if len(kinds) else np.empty(0, np.int8),
                                   "pid": texts["pid"], "tid": texts["tid"], "ts": ordered["ts"], "dur": ordered["dur"]}
        columns.update((key, texts[key] if dtype == "str" else ordered[key]) for key, dtype in ARG_DTYPES.items())
        return _frame(columns)

    def memory_frame(self) -> pd.DataFrame:
        ts = self._numbers("mem", "ts", np.float64)
        order = np.argsort(ts, kind="stable")
        columns = {
            "ts": ts, "pid": self._texts("mem", "pid"), "tid": self._texts("mem", "tid"),
            **{k: self._numbers("mem", k, np.int64) for k in MEMORY_INTS},
            **{k: self._numbers("mem", k, np.float64) for k in MEMORY_FLOATS},
        }
        return _frame({k: v[order] for k, v in columns.items()})

    def flows_frame(self) -> pd.DataFrame:
        return _frame({
            "ph": self._texts("flow", "ph"), "cat": self._texts("flow", "cat"), "id": self._texts("flow", "id"),
            "ts": self._numbers("flow", "ts", np.float64), "pid": self._texts("flow", "pid"),
            "tid": self._texts("flow", "tid"), "bp": self._texts("flow", "bp"),
        })

    def counters_frame(self) -> pd.DataFrame:
        lists = {k: [v for p in self.parts for v in p.counter[k]] for k in ("name", "pid", "ts", "series", "value")}

        def text(key: str) -> pd.Categorical:
            codes, values = _merged_codes([encode(lists[key], len(lists[key]))], key)
            return self._text(codes, values)

        return _frame({
            "name": text("name"), "pid": text("pid"), "ts": np.array(lists["ts"], dtype=np.float64),
            "series": text("series"), "value": np.array(lists["value"], dtype=np.float64),
        })


def _event_order(parts: list[PieceColumns], chunk: int | None, ts: np.ndarray, dur: np.ndarray,
                 cat_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the rows of the events table in its order, the same rows in the grouped order before
    sorting by ts), rows with an unusable ts/dur left out. `chunk`: events read at a time."""
    if chunk is not None:
        offsets = np.cumsum([0] + [p.count for p in parts[:-1]])
        index = np.concatenate([p.x["index"] + offset for p, offset in zip(parts, offsets)])
        group_key = (index // chunk) * (int(cat_codes.max(initial=0)) + 1) + cat_codes
    else:
        group_key = cat_codes
    # factorize numbers the groups in order of first appearance, chunk by chunk; a stable sort
    # of 16-bit numbers is a radix sort.
    groups = pd.factorize(group_key)[0]
    grouped = np.argsort(groups.astype(np.int16) if len(groups) and groups.max() < 1 << 15 else groups, kind="stable")
    valid = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0)
    kept = grouped[valid[grouped]]
    return kept[np.argsort(ts[kept], kind="stable")], kept


def assemble(parts: list[PieceColumns], decoded: DecodedTrace) -> TraceTables:
    """The tables of one trace from the columns of its pieces (in array order), with the
    document's metadata and warnings."""
    if not parts:
        parts = [_no_events()]
    joiner = _Joiner(parts)
    chunk = decoded.read_chunk(any(p.lenient for p in parts))
    decoded.release()
    events = joiner.events_frame(chunk)
    memory, flows, counters = joiner.memory_frame(), joiner.flows_frame(), joiner.counters_frame()
    skipped = sum(p.skipped for p in parts)
    repaired = sum(p.repaired for p in parts)
    unpaired = sum(p.unpaired_begin_end for p in parts)
    warnings = list(decoded.warnings)
    if skipped:
        warnings.append(f"{skipped} events could not be read and were skipped")
    if repaired:
        warnings.append(f"{repaired} events had fields that could not be read (a wrong type, a number out of "
                        "range, text that is not UTF-8): those fields were left out or their text repaired")
    if joiner.bad_x:
        warnings.append(f"{joiner.bad_x} complete events had a missing, NaN or negative ts/dur and were skipped")
    if joiner.cut_texts:
        warnings.append(f"{joiner.cut_texts} names or other texts longer than {MAX_TEXT_CHARS:,} characters were "
                        "cut to that length")
    if unpaired:
        warnings.append(f"{unpaired} begin/end (ph B/E) events were ignored; profboard reads complete (X) events")
    metadata = dict(decoded.metadata)
    metadata["processes"], metadata["threads"] = {}, {}
    for part in parts:
        for table, more in ((metadata["processes"], part.processes), (metadata["threads"], part.threads)):
            for key, fields in more.items():
                table.setdefault(key, {}).update(fields)
    if events.empty:
        warnings.append("the trace holds no complete events")
    return TraceTables(events=events, memory=memory, flows=flows, counters=counters, metadata=metadata,
                       warnings=warnings)


def _no_events() -> PieceColumns:
    return read_piece(DecodedEvents([], [], None, 0))


def build_tables(decoded: DecodedTrace, on_progress: Callable[[float], None] | None = None,
                 helpers: Helpers | None = None) -> TraceTables:
    """The tables of one trace: every event of `decoded` read, on `helpers` too when given."""
    return assemble(read_pieces(decoded, helpers, on_progress), decoded)
