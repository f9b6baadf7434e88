"""JSON bytes of a trace -> TraceTables.

A plainly shaped document is read straight from its bytes: the event array is found by its
key (decode.find_events) and its pieces are decoded as they are read, which also checks their
JSON; a big local file is not even read whole (read.TraceFile). Anything else (damaged JSON,
non-standard tokens, a key spelled twice) is read by decode_trace, which checks the whole
document first and keeps what it can.
"""

from __future__ import annotations

from typing import Callable

import msgspec

from .decode import DecodedTrace, decode_trace, find_events, locate_events
from .parallel import Helpers, read_pieces, small_pages
from .read import FileChanged, FileSpan, RawTrace, TraceFile
from .tables import TraceTables, assemble

Progress = Callable[[float], None]

# Bytes read from each end of a file to find its event array and its metadata.
_EDGE_BYTES = 1 << 20


def parse_trace_bytes(data: bytes | bytearray, on_progress: Progress | None = None,
                      helpers: Helpers | None = None) -> TraceTables:
    """Parse JSON bytes of a trace, on `helpers` too when given; raises TraceFormatError when
    nothing can be recovered."""
    return parse_raw_trace(RawTrace(data), on_progress, helpers)


def parse_raw_trace(raw: RawTrace, on_progress: Progress | None = None,
                    helpers: Helpers | None = None) -> TraceTables:
    """Like parse_trace_bytes, taking the bytes out of `raw` so that they are freed once the
    events are read, before the tables are assembled."""
    data, raw.data = raw.data, b""
    with small_pages():
        located = locate_events(data)
        parts = None
        if located is not None:
            try:
                parts = read_pieces(located, helpers, on_progress)
            except (msgspec.DecodeError, RecursionError):
                located = None  # not valid JSON: decode_trace finds out where, and what can be kept
        decoded = located or decode_trace(data)
        del data
        if parts is None:
            parts = read_pieces(decoded, helpers, on_progress)
        return assemble(parts, decoded)


def parse_trace_file(file: TraceFile, on_progress: Progress | None = None,
                     helpers: Helpers | None = None) -> TraceTables | None:
    """The tables of a plainly shaped trace file, its pieces read from the file by whichever
    process decodes them; None when it is not plainly shaped, not valid JSON or changed
    meanwhile: then it is to be read whole (parse_raw_trace)."""
    edge = min(_EDGE_BYTES, file.size // 2)
    try:
        head, tail = file.read(0, edge), file.read(file.size - edge, file.size)
        found = find_events(head + tail)
        # The array must start in the head and end in the tail, which the bytes between do not join.
        if found is None or found[1] >= edge or found[2] <= edge:
            return None
        metadata, start, end = found
        decoded = DecodedTrace(metadata, FileSpan(file, start, end - edge + file.size - edge), checked=False)
        with small_pages():
            return assemble(read_pieces(decoded, helpers, on_progress), decoded)
    except (msgspec.DecodeError, RecursionError, FileChanged):
        return None
