"""JSON bytes of a trace -> TraceTables.

A plainly shaped document is read straight from its bytes: the event array is found by its
key (decode.locate_events) and its pieces are decoded as they are read, which also checks
their JSON. Anything else (damaged JSON, non-standard tokens, a key spelled twice) is read
by decode_trace, which checks the whole document first and keeps what it can.
"""

from __future__ import annotations

from typing import Callable

import msgspec

from .decode import decode_trace, locate_events
from .parallel import Helpers, read_pieces
from .read import RawTrace
from .tables import TraceTables, assemble

Progress = Callable[[float], None]


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
