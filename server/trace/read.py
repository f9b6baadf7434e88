"""Bytes of one trace file from a local path or fsspec URL, gunzipped with a size cap.

The cap stops a gzip bomb (a small file that inflates to many GB) before it exhausts
memory (see server/inflate.py). A gzip stream cut short (a job killed mid-write) yields what
was inflated so far; the JSON decoder then recovers the complete events in it. Only regular
files are read (server/files.py): a FIFO or device named like a trace is refused at once.

A big local file that is not compressed is not read whole here: TraceFile lets each process
that decodes a piece of it read that piece (parallel.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..files import NotARegularFile, is_local, open_regular, read_capped
from ..inflate import Inflated, InflateLimit, gunzip_capped
from ..settings import DEFAULT_MAX_BYTES
from .decode import TraceFormatError


@dataclass
class RawTrace:
    data: bytes | bytearray
    warnings: list[str] = field(default_factory=list)


def read_trace_bytes(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> RawTrace:
    """Read and, for `.gz` files, inflate a trace; raises TraceFormatError with a user-facing message."""
    try:
        with open_regular(path) as fh:
            if not path.endswith(".gz"):
                data = read_capped(fh, max_bytes)
                if data is None:
                    raise TraceFormatError(_too_big(max_bytes))
                return RawTrace(data)
            try:
                inflated = gunzip_capped(fh, max_bytes)
            except InflateLimit:
                raise TraceFormatError(_too_big(max_bytes)) from None
    except NotARegularFile as exc:
        raise TraceFormatError(f"could not read the file: {exc}") from None
    except FileNotFoundError as exc:
        raise TraceFormatError("could not read the file: it is gone (removed or rewritten since it was listed?)"
                               ) from exc
    except PermissionError as exc:  # on S3 also an archived (Glacier) object
        raise TraceFormatError(f"could not read the file: no permission ({exc.strerror or exc})") from exc
    except OSError as exc:
        raise TraceFormatError(f"could not read the file: {exc.strerror or exc}") from exc
    return _checked(inflated)


# Smaller files are read whole: it is as quick, and they are decoded in few pieces.
FILE_PIECES_MIN_BYTES = 64 << 20


class FileChanged(Exception):
    """The file is not the one that was opened (rewritten, grown or replaced meanwhile)."""


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@dataclass(frozen=True)
class TraceFile:
    """A local, uncompressed trace file, read a range at a time by each process that decodes a
    piece of it: reading it whole into one buffer cost about a second on an 853 MB trace (a page
    fault per 4 KB of fresh memory), and the helpers' pieces were then copied to them through
    pipes. `identity` (device, inode, size, modification time) tells a file changed meanwhile."""

    path: str
    identity: tuple[int, int, int, int]

    @property
    def size(self) -> int:
        return self.identity[2]

    def read_into(self, buffer: memoryview, offset: int) -> None:
        """Fill `buffer` with the file's bytes from `offset`; raises FileChanged."""
        with open_regular(self.path) as fh:
            if _identity(os.fstat(fh.fileno())) != self.identity:
                raise FileChanged(self.path)
            fh.seek(offset)
            filled = 0
            while filled < len(buffer):
                got = fh.readinto(buffer[filled:])
                if not got:
                    raise FileChanged(self.path)
                filled += got
            if _identity(os.fstat(fh.fileno())) != self.identity:  # written to while it was read
                raise FileChanged(self.path)

    def read(self, start: int, stop: int) -> bytearray:
        out = bytearray(stop - start)
        self.read_into(memoryview(out), start)
        return out


@dataclass(frozen=True)
class FileSpan:
    """Bytes `start` to `end` of a TraceFile (its event array), read where they are decoded."""

    file: TraceFile
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


def open_trace_file(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> TraceFile | None:
    """The trace at `path` as a TraceFile when it is a local, uncompressed, regular file of at
    least FILE_PIECES_MIN_BYTES and at most `max_bytes`; else (or when it cannot be opened)
    None, and read_trace_bytes reads it, or says why it cannot."""
    if path.endswith(".gz") or not is_local(path):
        return None
    try:
        with open_regular(path) as fh:
            identity = _identity(os.fstat(fh.fileno()))
    except OSError:
        return None
    file = TraceFile(path, identity)
    return file if FILE_PIECES_MIN_BYTES <= file.size <= max_bytes else None


def _checked(inflated: Inflated) -> RawTrace:
    """The inflated bytes, with a warning when the stream was damaged or cut short after some data."""
    size = len(inflated.data)
    if inflated.corrupt is not None:
        if size == 0:
            raise TraceFormatError(f"not a valid gzip file ({inflated.corrupt})")
        return RawTrace(inflated.data, [f"the gzip stream is corrupt after {size:,} bytes ({inflated.corrupt}); "
                                        "reading what came before"])
    if inflated.cut_short:
        if size == 0:
            raise TraceFormatError("the gzip file is empty or cut short before any data")
        return RawTrace(inflated.data, [f"the gzip file is cut short after {size:,} inflated bytes; "
                                        "reading what came before"])
    return RawTrace(inflated.data)


def _too_big(max_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if max_bytes >= scale:
            limit = f"{max_bytes / scale:.4g} {unit}"
            break
    else:
        limit = f"{max_bytes} bytes"
    return f"the trace inflates beyond the {limit} limit (raise it with --max-trace-size)"
