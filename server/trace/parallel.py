"""Decode one big trace on several processes.

Decoding events into columns is most of a load, and pieces of the event array are independent:
the array is cut at event boundaries into pieces of about PIECE_BYTES, helper processes decode
some of them while this process decodes the others, and the pieces' columns are joined in array
order, so the tables come out exactly as a one-process load makes them.

A cut is found by a byte pattern (`}` `,` `{` with only whitespace between), which could also
match inside a string; such a cut makes a piece invalid JSON, and the load then falls back to
one process. Nothing is lost but time.
"""

from __future__ import annotations

import multiprocessing
import os
import re
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable

import msgspec

from .decode import DecodedTrace
from .tables import TraceTables, _Columns, assemble, build_tables, read_columns

# Arrays smaller than this decode faster in one pass than cut up and shipped to helpers.
PARALLEL_MIN_BYTES = 96 << 20
PIECE_BYTES = 48 << 20
MAX_HELPERS = 4
_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
_OPENING = re.compile(rb"\s*\[\s*")


def cut_points(array: bytes | memoryview, piece_bytes: int = PIECE_BYTES) -> list[tuple[int, int]]:
    """(start, end) of pieces of the JSON array `array` ("[...]"), each a run of whole events,
    without the brackets and the commas between pieces."""
    opening = _OPENING.match(array)
    end = len(array)
    while end and array[end - 1] in b" \t\r\n":
        end -= 1
    if opening is None or end <= opening.end() or array[end - 1] != ord("]"):
        return []
    starts, stops = [opening.end()], []
    while (match := _BETWEEN_EVENTS.search(array, starts[-1] + piece_bytes, end - 1)) is not None:
        stops.append(match.start() + 1)
        starts.append(match.end() - 1)
    stops.append(end - 1)
    return list(zip(starts, stops))


@dataclass(frozen=True)
class Helpers:
    """Processes that decode pieces for a loader, `count` of them."""

    pool: ProcessPoolExecutor
    count: int

    @property
    def broken(self) -> bool:
        """A helper died and the pool takes no more work."""
        return bool(getattr(self.pool, "_broken", False))

    @classmethod
    def start(cls, count: int, initializer: Callable[[], Any] | None = None) -> Helpers:
        """Spawn `count` helpers now, so that they are ready by the time the file has been read."""
        pool = ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=initializer)
        for _ in range(count):
            pool.submit(int)
        return cls(pool, count)


def helper_count() -> int:
    """How many helpers a loader gets: one fewer than the cores, at most MAX_HELPERS."""
    return max(0, min((os.cpu_count() or 1) - 1, MAX_HELPERS))


def _bracketed(array: memoryview, start: int, stop: int) -> bytearray:
    piece = bytearray(b"[")
    piece += array[start:stop]
    piece += b"]"
    return piece


def decode_piece(piece: bytes | bytearray) -> _Columns:
    """Columns of one piece ("[event, ...]"); runs in a helper process."""
    return read_columns(DecodedTrace({}, piece))


def build_tables_parallel(decoded: DecodedTrace, helpers: Helpers,
                          on_progress: Callable[[float], None] | None = None) -> TraceTables:
    """Like build_tables; of every `helpers.count + 1` pieces, the helpers decode all but one."""
    with memoryview(decoded.array) as array:
        cols = _join_pieces(array, helpers, on_progress or (lambda _: None))
    return build_tables(decoded, on_progress) if cols is None else assemble(cols, decoded)


def _join_pieces(array: memoryview, helpers: Helpers, report: Callable[[float], None]) -> _Columns | None:
    """The array's columns, decoded piece by piece; None when it is not worth cutting, a cut
    fell inside a string, or a helper died (out of memory?): then one process does it all."""
    pieces = cut_points(array) if len(array) >= PARALLEL_MIN_BYTES else []
    if len(pieces) < 2:
        return None
    # Helpers take all but every (count + 1)-th piece; only a few pieces are handed out ahead
    # of the one being joined, so that copies of the array do not pile up in the queue.
    theirs = [i for i in range(len(pieces)) if i % (helpers.count + 1)]
    lead = 2 * (helpers.count + 1)
    futures: dict[int, Future] = {}
    cols = _Columns()
    try:
        for i, (start, stop) in enumerate(pieces):
            while theirs and theirs[0] <= i + lead:
                j = theirs.pop(0)
                futures[j] = helpers.pool.submit(decode_piece, _bracketed(array, *pieces[j]))
            part = futures.pop(i).result() if i in futures else decode_piece(_bracketed(array, start, stop))
            cols.absorb(part)
            report((i + 1) / len(pieces))
    except (msgspec.DecodeError, BrokenProcessPool):
        for future in futures.values():
            future.cancel()
        return None
    return cols
