"""Read a trace's event array piece by piece, on helper processes too.

Reading events into columns is most of a load, and pieces of the event array are independent:
the array is cut at event boundaries into pieces of about PIECE_BYTES, read in this process
and on helpers (whichever is free takes the next piece), and their columns are kept in array
order for tables.py to join, so the tables come out exactly as a one-process load makes them.
A piece of a big local file (read.TraceFile) is read from the file by whoever decodes it, into
a buffer that process keeps for its next piece; other pieces are sent to the helpers. A thread
hands the helpers their pieces, so that one is never left without work while this process reads.

A cut is found by a byte pattern (`}` `,` `{` with only whitespace between), which could also
match inside a string; such a cut makes a piece invalid JSON, and the array is then split at
its true event boundaries by a JSON pass instead, and read in this process. Nothing is lost but
time.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import re
import sys
import threading
from contextlib import contextmanager
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import msgspec
import numpy as np

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from .columns import PieceColumns, read_piece
from .decode import CHUNK_EVENTS, DecodedTrace, decode_events, decode_raw_events, split_events
from .read import FileSpan, TraceFile
from .scan import available as scanner_available, scan_piece

PIECE_BYTES = 8 << 20
# Raw events per piece when the array is read as a list of raw events (a repaired document).
PIECE_EVENTS = 4 * CHUNK_EVENTS
MAX_HELPERS = 4
# JSON whitespace only: `\s` would also take bytes that make the text invalid JSON.
_BETWEEN_EVENTS = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_OPENING = re.compile(rb"[ \t\r\n]*\[[ \t\r\n]*")
_WHITESPACE = b" \t\r\n"
# Bytes looked at a time for a cut, the array's opening and its end.
_WINDOW = 1 << 16

Progress = Callable[[float], None]
Reader = Callable[[int, int], Any]  # (start, stop) -> those bytes of the array


def cut_points(read: Reader, size: int, piece_bytes: int = PIECE_BYTES) -> list[tuple[int, int]]:
    """(start, end) of pieces of a JSON array ("[...]") of `size` bytes, each a run of whole
    events, without the brackets and the commas between pieces; [] when it does not look like
    an array. `read(start, stop)` gives bytes of the array."""
    opening = _OPENING.match(read(0, min(size, _WINDOW)))
    end = size  # after the last byte that is not whitespace, which must be "]"
    while end > 0:
        tail = bytes(read(max(0, end - _WINDOW), end)).rstrip(_WHITESPACE)
        end = max(0, end - _WINDOW) + len(tail)
        if tail:
            break
    if opening is None or end <= opening.end() or bytes(read(end - 1, end)) != b"]":
        return []
    starts, stops = [opening.end()], []
    while (cut := _next_cut(read, starts[-1] + piece_bytes, end - 1)) is not None:
        stops.append(cut[0] + 1)
        starts.append(cut[1] - 1)
    stops.append(end - 1)
    return list(zip(starts, stops))


def _next_cut(read: Reader, start: int, stop: int) -> tuple[int, int] | None:
    """(start, end) of the first pattern between events in start..stop, looking a window at a time."""
    window = _WINDOW
    while start < stop:
        match = _BETWEEN_EVENTS.search(read(start, min(stop, start + window)))
        if match is not None:
            return start + match.start(), start + match.end()
        if start + window >= stop:
            return None
        window *= 4  # the pattern may straddle the window's end: look again further
    return None


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
        _widen_pipes(pool)
        for _ in range(count):
            pool.submit(int)
        return cls(pool, count)


def _widen_pipes(pool: ProcessPoolExecutor) -> None:
    """Pieces go to the helpers and their columns come back through pipes of 64 KB, so a message
    of a few MB takes many writes, and each waits for this process to take the GIL, which it holds
    for tens of ms at a time while it decodes a piece of its own: a helper sat idle, blocked on
    sending a piece back, and read 46% of the pieces of the Llama trace. Pipes of 1 MB (the most
    a process may ask for by default; Linux) make those waits few. CPython's executor keeps its
    queues private, so this is done where they are found and skipped elsewhere."""
    if fcntl is None or not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    for connection in (getattr(getattr(pool, "_result_queue", None), "_reader", None),
                       getattr(getattr(pool, "_call_queue", None), "_writer", None)):
        try:
            fcntl.fcntl(connection.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        except (AttributeError, OSError):
            pass


def helper_count() -> int:
    """How many helpers a loader gets: one fewer than the cores, at most MAX_HELPERS."""
    return max(0, min((os.cpu_count() or 1) - 1, MAX_HELPERS))


def _bracketed(array: memoryview, start: int, stop: int) -> bytearray:
    piece = bytearray(stop - start + 2)
    piece[0], piece[-1] = ord("["), ord("]")
    piece[1:-1] = array[start:stop]
    return piece


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy asks the kernel for huge pages for arrays of 4 MB and more. Where the kernel has to
    make them (THP defrag on madvise, memory in use), faulting them in cost about 2 s of a 17 s
    load (853 MB trace, one process) on the machine measured, and arrays that are written once
    and read a few times gain little from them; so a load's arrays take ordinary pages."""
    core = getattr(np, "_core", None) or np.core  # numpy 1.x: np.core
    choose = getattr(core.multiarray, "_set_madvise_hugepage", None)
    before = choose(False) if choose else None
    try:
        yield
    finally:
        if choose:
            choose(before)


def give_back_memory() -> None:
    """Return the memory a big load (or a helper's item) freed to the OS while the process idles: glibc and
    Arrow keep freed memory for later (a loader held 1.0 GB after loading the 853 MB Llama trace, 0.1 GB so;
    a helper 0.45 GB after the synthetic 1.1 GB trace's items). Not after a small one: the full garbage
    collection took 45 ms, a quarter of a small trace's load (256 ranks of 8 MB: twice per trace), for
    memory the next load reuses."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
    if "pyarrow" in sys.modules:  # helpers that only parse never import it
        sys.modules["pyarrow"].default_memory_pool().release_unused()


def read_text(text: bytes | bytearray | memoryview) -> PieceColumns:
    """Columns of one piece ("[event, ...]"): by the native scanner where it reads the piece, else by
    msgspec's typed decode (the same columns); runs in a helper process too."""
    with small_pages():
        scanned = scan_piece(text)
        return scanned if scanned is not None else read_piece(decode_events(text))


# Each thread's buffer for pieces of files, kept for its next piece: fresh memory costs a page fault
# per 4 KB, a second per GB on the machines measured.
_buffers = threading.local()


def read_file_piece(file: TraceFile, start: int, stop: int) -> PieceColumns:
    """Columns of the events in bytes start..stop of `file`; runs in a helper process too.
    Raises read.FileChanged when the file is not the one the load opened."""
    size = stop - start + 2
    if len(getattr(_buffers, "buffer", b"")) < size:
        _buffers.buffer = bytearray(size + size // 4)  # pieces differ in size: room for the next ones
    text = memoryview(_buffers.buffer)[:size]
    text[0], text[-1] = ord("["), ord("]")
    file.read_into(text[1:-1], start)
    return read_text(text)


# A piece's work: a function that runs in a helper process too, and its arguments, made when the
# piece is taken (a piece of an array in memory is copied out then, so that copies do not pile up).
Job = Callable[[], tuple[Callable[..., PieceColumns], tuple]]


def _file_job(file: TraceFile, start: int, stop: int) -> Job:
    return lambda: (read_file_piece, (file, start, stop))


def _array_job(array: memoryview, start: int, stop: int) -> Job:
    return lambda: (read_text, (_bracketed(array, start, stop),))


def read_pieces(decoded: DecodedTrace, helpers: Helpers | None = None,
                on_progress: Progress | None = None) -> list[PieceColumns]:
    """The columns of every piece of `decoded`'s events, in array order. Raises
    msgspec.DecodeError when the array is not valid JSON (only a document that decode_trace
    did not check can be invalid), read.FileChanged when its file changed."""
    report = on_progress or (lambda _: None)
    if decoded.raw_events is not None:
        return _read_raw(decoded.raw_events, report)
    if isinstance(decoded.array, FileSpan):
        span = decoded.array
        pieces = cut_points(lambda start, stop: span.file.read(span.start + start, span.start + stop), len(span),
                            PIECE_BYTES)
        if not pieces:
            raise msgspec.DecodeError("traceEvents is not an array")
        return _read_jobs([_file_job(span.file, span.start + start, span.start + stop) for start, stop in pieces],
                          helpers, report)
    with memoryview(decoded.array) as array:
        try:
            pieces = cut_points(lambda start, stop: array[start:stop], len(array),
                                PIECE_BYTES) if len(array) > PIECE_BYTES else []
            if len(pieces) < 2:
                parts = [read_text(decoded.array)]
                report(1.0)
                return parts
            return _read_jobs([_array_job(array, start, stop) for start, stop in pieces], helpers, report)
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


def _run(job: Job, helpers: Helpers | None = None) -> PieceColumns | Future:
    """Run a job here, or hand it to a helper."""
    function, args = job()
    return function(*args) if helpers is None else helpers.pool.submit(function, *args)


def _read_jobs(jobs: list[Job], helpers: Helpers | None, report: Progress) -> list[PieceColumns]:
    if helpers is not None and not helpers.broken:
        parts = _read_on_helpers(jobs, helpers, report)
        if parts is not None:
            return parts
    threads = min(len(jobs), os.cpu_count() or 1)
    if threads > 1 and scanner_available():
        return _read_on_threads(jobs, threads, report)
    parts = []
    for job in jobs:
        parts.append(_run(job))
        report(len(parts) / len(jobs))
    return parts


class _Taker:
    """Hands out the jobs' indices in order, each to the first who asks, until all are taken or a reader
    failed (`failed`: the first failure is raised in the calling thread)."""

    def __init__(self, count: int) -> None:
        self.count, self.taken = count, 0
        self.failed: list[BaseException] = []
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            if self.taken == self.count or self.failed:
                return None
            self.taken += 1
            return self.taken - 1


def _read_on_threads(jobs: list[Job], threads: int, report: Progress) -> list[PieceColumns]:
    """The pieces' columns, read by `threads` threads of this process, each taking the next piece: the
    native scanner releases the GIL for most of a piece (a trace without helpers: `profboard summary`,
    a loader's trace under the size that starts one)."""
    parts: list[PieceColumns | None] = [None] * len(jobs)
    taker = _Taker(len(jobs))
    reporting = threading.Lock()  # one report at a time: the fraction never goes back

    def read() -> None:
        try:
            while (i := taker.take()) is not None:
                parts[i] = _run(jobs[i])
                with reporting:
                    report(sum(part is not None for part in parts) / len(jobs))
        except BaseException as exc:  # noqa: BLE001 (raised in the calling thread)
            taker.failed.append(exc)

    workers = [threading.Thread(target=read, name="profboard-pieces", daemon=True) for _ in range(threads - 1)]
    for worker in workers:
        worker.start()
    read()
    for worker in workers:
        worker.join()
    if taker.failed:
        raise taker.failed[0]
    return parts  # type: ignore[return-value]


def _read_on_helpers(jobs: list[Job], helpers: Helpers, report: Progress) -> list[PieceColumns] | None:
    """The pieces' columns, each piece read by whichever is free: a thread keeps each helper two
    pieces ahead, handing out the next piece as soon as one comes back, while this thread reads
    the next one itself. None when a helper died (out of memory?): then this process reads them all."""
    parts: list[PieceColumns | None] = [None] * len(jobs)
    taker = _Taker(len(jobs))
    take, failed = taker.take, taker.failed

    def feed() -> None:
        pending: dict[Future, int] = {}
        try:
            while True:
                while len(pending) < 2 * helpers.count and (i := take()) is not None:
                    pending[_run(jobs[i], helpers)] = i
                if not pending:
                    return
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    parts[pending.pop(future)] = future.result()
        except BaseException as exc:  # noqa: BLE001 (handed to the reading thread)
            failed.append(exc)
            for future in pending:
                future.cancel()

    feeder = threading.Thread(target=feed, name="profboard-pieces", daemon=True)
    feeder.start()
    try:
        while (i := take()) is not None:
            parts[i] = _run(jobs[i])
            report(sum(part is not None for part in parts) / len(jobs))
    except BaseException as exc:
        failed.append(exc)
        raise
    finally:
        feeder.join()
    if failed:
        if isinstance(failed[0], BrokenProcessPool):
            return None
        raise failed[0]
    report(1.0)
    return parts  # type: ignore[return-value]
