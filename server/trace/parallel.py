"""Read a trace's event array piece by piece, on helper processes too.

Reading events into columns is most of a load, and pieces of the event array are independent:
the array is cut at event boundaries into pieces of about PIECE_BYTES, read in this process
and on helpers (whichever is free takes the next piece), and their columns are kept in array
order for tables.py to join, so the tables come out exactly as a one-process load makes them.

A cut is found by a byte pattern (`}` `,` `{` with only whitespace between), which could also
match inside a string; such a cut makes a piece invalid JSON, and the array is then split at
its true event boundaries by a JSON pass instead, and read in this process. Nothing is lost but
time.
"""

from __future__ import annotations

import multiprocessing
import os
import re
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable

import msgspec

from .columns import PieceColumns, read_piece
from .decode import CHUNK_EVENTS, DecodedTrace, decode_events, decode_raw_events, split_events

PIECE_BYTES = 24 << 20
# Raw events per piece when the array is read as a list of raw events (a repaired document).
PIECE_EVENTS = 4 * CHUNK_EVENTS
MAX_HELPERS = 4
# JSON whitespace only: `\s` would also take bytes that make the text invalid JSON.
_BETWEEN_EVENTS = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_OPENING = re.compile(rb"[ \t\r\n]*\[[ \t\r\n]*")

Progress = Callable[[float], None]


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
    """Processes that read pieces for a loader, `count` of them."""

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
    piece = bytearray(stop - start + 2)
    piece[0], piece[-1] = ord("["), ord("]")
    piece[1:-1] = array[start:stop]
    return piece


def read_text(text: bytes | bytearray | memoryview) -> PieceColumns:
    """Columns of one piece ("[event, ...]"); runs in a helper process too."""
    return read_piece(decode_events(text))


def read_pieces(decoded: DecodedTrace, helpers: Helpers | None = None,
                on_progress: Progress | None = None) -> list[PieceColumns]:
    """The columns of every piece of `decoded`'s events, in array order. Raises
    msgspec.DecodeError when the array is not valid JSON (only a document that decode_trace
    did not check can be invalid)."""
    report = on_progress or (lambda _: None)
    if decoded.raw_events is not None:
        return _read_raw(decoded.raw_events, report)
    with memoryview(decoded.array) as array:
        try:
            pieces = cut_points(array, PIECE_BYTES) if len(array) > PIECE_BYTES else []
            if len(pieces) < 2:
                parts = [read_text(decoded.array)]
                report(1.0)
                return parts
            if helpers is not None and not helpers.broken:
                parts = _read_on_helpers(array, pieces, helpers, report)
                if parts is not None:
                    return parts
            parts = []
            for i, piece in enumerate(pieces):
                parts.append(read_text(_bracketed(array, *piece)))
                report((i + 1) / len(pieces))
            return parts
        except msgspec.DecodeError:
            if not decoded.checked:
                raise
        # The array is valid JSON, so a cut fell inside a string.
        return _read_raw(split_events(array), report)


def _read_raw(raws: list[msgspec.Raw], report: Progress) -> list[PieceColumns]:
    parts = []
    for start in range(0, len(raws), PIECE_EVENTS):
        parts.append(read_piece(decode_raw_events(raws[start:start + PIECE_EVENTS])))
        report(min(1.0, (start + PIECE_EVENTS) / len(raws)))
    return parts


def _read_on_helpers(array: memoryview, pieces: list[tuple[int, int]], helpers: Helpers,
                     report: Progress) -> list[PieceColumns] | None:
    """The pieces' columns, each piece read by whichever is free: the helpers are kept one piece
    ahead each, and this process reads the next piece while they are busy. None when a helper
    died (out of memory?): then this process reads them all."""
    parts: list[PieceColumns | None] = [None] * len(pieces)
    pending: dict[int, Future] = {}
    taken = done = 0
    try:
        while taken < len(pieces) or pending:
            while taken < len(pieces) and len(pending) < 2 * helpers.count:
                pending[taken] = helpers.pool.submit(read_text, _bracketed(array, *pieces[taken]))
                taken += 1
            if taken < len(pieces):
                parts[taken] = read_text(_bracketed(array, *pieces[taken]))
                taken += 1
                done += 1
            else:
                wait(pending.values(), return_when=FIRST_COMPLETED)
            for i in [i for i, future in pending.items() if future.done()]:
                parts[i] = pending.pop(i).result()
                done += 1
            report(done / len(pieces))
    except BrokenProcessPool:
        return None
    finally:
        for future in pending.values():
            future.cancel()
    return parts  # type: ignore[return-value]
