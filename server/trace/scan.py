"""A piece's columns from the native scanner (_scan.c), with the same content as columns.read_piece's.

The scanner reads every event's fields into per-event columns in one pass of C; this module routes
the rows to the tables as read_piece does (complete events, `[memory]` instants, flows, counters,
metadata) and leaves absent the args an event's kind does not read (columns.ARGS_BY_KIND). A piece
the scanner does not read (damaged JSON, unexpected types: _scan.c says which) gives None, and is
read by read_piece; so does every piece where the extension was not built (no C compiler at install).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .columns import (ABSENT, ALL_ARGS, ARG_DTYPES, ARGS_BY_KIND, DTYPES, MEMORY_FLOATS, MEMORY_INTS, Absent,
                      Encoded, PieceColumns, Table, add_counter, add_meta, routed, subset)
from .decode import decode_event
from .schema import kind_of_category

try:
    from . import _scan
except ImportError:  # built without a compiler: every piece is read by columns.read_piece
    _scan = None

# The scanner's columns, in _scan.c's order; the ints and floats under their Args names.
_TEXTS = ("ph", "cat", "name", "pid", "tid", "id", "bp", "grid", "block", "input_dims", "input_dims_legacy",
          "input_type", "call_stack", "process_group", "meta_name", "labels")
_INTS = ("external_id", "external_id_legacy", "correlation", "device", "stream", "registers_per_thread",
         "shared_memory", "bytes", "sequence_number", "fwd_thread_id", "python_id", "python_parent_id",
         "python_module_id", "device_type", "device_id", "addr", "mem_bytes", "sort_index")
_FLOATS = ("ts", "dur", "blocks_per_sm", "warps_per_sm", "occupancy", "total_allocated", "total_reserved")


def available() -> bool:
    return _scan is not None


def scan_piece(text: bytes | bytearray | memoryview) -> PieceColumns | None:
    """The columns of a piece ("[event, ...]"), or None where the scanner does not read it."""
    if _scan is None:
        return None
    scanned = _scan.scan(text)
    if scanned is None:
        return None
    count, codes, values, ints, floats, spans = scanned
    texts = {k: Encoded(np.frombuffer(c, np.int32), v) for k, c, v in zip(_TEXTS, codes, values)}
    numbers = {**{k: np.frombuffer(b, np.int64) for k, b in zip(_INTS, ints)},
               **{k: np.frombuffer(b, np.float64) for k, b in zip(_FLOATS, floats)}}
    cols = PieceColumns(count=count)
    table, rows = routed(texts["ph"])
    x_rows = rows[Table.COMPLETE]
    cols.x = _complete(texts, numbers, x_rows)
    instants = rows[Table.INSTANT]
    names = texts["name"]
    memory = np.array([v == "[memory]" for v in names.values], dtype=bool)
    mem_rows = instants[memory[names.codes[instants]]]
    cols.mem = {"ts": numbers["ts"][mem_rows], **{k: subset(texts[k], mem_rows) for k in ("pid", "tid")},
                **{k: numbers["mem_bytes" if k == "bytes" else k][mem_rows] for k in MEMORY_INTS},
                **{k: numbers[k][mem_rows] for k in MEMORY_FLOATS}}
    flows = rows[Table.FLOW]
    cols.flow = {"ph": subset(texts["ph"], flows), "cat": subset(texts["cat"], flows), "id": subset(texts["id"], flows),
                 "ts": numbers["ts"][flows], "pid": subset(texts["pid"], flows), "tid": subset(texts["tid"], flows),
                 "bp": subset(texts["bp"], flows)}
    span = np.frombuffer(spans, np.int64).reshape(-1, 2)
    with memoryview(text) as view:
        for i in rows[Table.COUNTER].tolist():
            add_counter(cols.counter, view[span[i, 0]:span[i, 1]])
        for i in rows[Table.META].tolist():
            add_meta(cols, decode_event(view[span[i, 0]:span[i, 1]]))
    cols.unpaired_begin_end = int(np.count_nonzero(table == Table.BEGIN_END))
    return cols


def _complete(texts: dict[str, Encoded], numbers: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, Any]:
    cat = subset(texts["cat"], rows)
    c: dict[str, Any] = {"index": rows.astype(np.int64), "name": subset(texts["name"], rows), "cat": cat,
                         "pid": subset(texts["pid"], rows), "tid": subset(texts["tid"], rows),
                         "ts": numbers["ts"][rows], "dur": numbers["dur"][rows]}
    ext = numbers["external_id"][rows]
    ext = np.where(ext != -1, ext, numbers["external_id_legacy"][rows])  # Kineto before PyTorch 1.9
    dims = subset(texts["input_dims"], rows)
    old = subset(texts["input_dims_legacy"], rows)
    if (dims.codes < 0).any() and (old.codes >= 0).any():  # PyTorch 1.x spelled it "Input dims"
        dims = Encoded(np.where(dims.codes >= 0, dims.codes, np.where(old.codes >= 0, old.codes + len(dims.values), -1)),
                       dims.values + old.values)
    reads = [ARGS_BY_KIND.get(kind_of_category(v), ALL_ARGS) for v in cat.values]
    for key, dtype in ARG_DTYPES.items():
        # An event's args outside what its kind reads are left absent, as read_piece leaves them.
        read = np.array([key in r for r in reads], dtype=bool)[cat.codes] if reads else np.zeros(len(rows), bool)
        if not read.any():
            c[key] = Absent(len(rows))
            continue
        if dtype == "str":
            column = dims if key == "input_dims" else subset(texts[key], rows)
            c[key] = column if read.all() else Encoded(np.where(read, column.codes, -1).astype(np.int32), column.values)
        else:
            column = ext if key == "external_id" else numbers[key][rows]
            c[key] = column if read.all() else np.where(read, column, ABSENT[dtype]).astype(DTYPES[dtype])
    return c
