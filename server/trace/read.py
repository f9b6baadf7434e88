"""Bytes of one trace file from a local path or fsspec URL, gunzipped with a size cap.

The cap stops a gzip bomb (a small file that inflates to many GB) before it exhausts
memory. A gzip stream cut short (a job killed mid-write) yields what was inflated so far;
the JSON decoder then recovers the complete events in it.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import fsspec

from .decode import TraceFormatError

DEFAULT_MAX_BYTES = 4 << 30
_READ_BLOCK = 8 << 20


@dataclass
class RawTrace:
    data: bytes
    warnings: list[str] = field(default_factory=list)


def read_trace_bytes(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> RawTrace:
    """Read and, for `.gz` files, inflate a trace; raises TraceFormatError with a user-facing message."""
    try:
        with fsspec.open(path, "rb") as fh:
            compressed = path.endswith(".gz")
            if not compressed:
                data = fh.read(max_bytes + 1)
                if len(data) > max_bytes:
                    raise TraceFormatError(_too_big(max_bytes))
                return RawTrace(data)
            return _gunzip(fh, max_bytes)
    except OSError as exc:
        raise TraceFormatError(f"could not read the file: {exc.strerror or exc}") from exc


def _too_big(max_bytes: int) -> str:
    return (f"the trace is larger than the {max_bytes / (1 << 30):.1f} GiB limit "
            "(raise it with --max-trace-size)")


def _gunzip(fh, max_bytes: int) -> RawTrace:
    inflater = zlib.decompressobj(wbits=31)
    parts: list[bytes] = []
    size = 0
    warnings: list[str] = []
    while True:
        block = fh.read(_READ_BLOCK)
        if not block:
            break
        try:
            # Inflate at most what still fits under the cap, so a bomb never gets further.
            out = inflater.decompress(block, max_bytes + 1 - size)
            while True:
                parts.append(out)
                size += len(out)
                if size > max_bytes:
                    raise TraceFormatError(_too_big(max_bytes))
                if not inflater.unconsumed_tail:
                    break
                out = inflater.decompress(inflater.unconsumed_tail, max_bytes + 1 - size)
        except zlib.error as exc:
            if size == 0:
                raise TraceFormatError(f"not a valid gzip file ({exc})") from exc
            warnings.append(f"the gzip stream is corrupt after {size:,} bytes ({exc}); reading what came before")
            break
        if inflater.eof:
            break
    else:  # pragma: no cover - loop always exits by break
        pass
    if not inflater.eof and not warnings:
        if size == 0:
            raise TraceFormatError("the gzip file is empty or cut short before any data")
        warnings.append(f"the gzip file is cut short after {size:,} inflated bytes; reading what came before")
    return RawTrace(b"".join(parts), warnings)
