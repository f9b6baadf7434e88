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
# zlib reports corruption per call, losing that call's output: a failed block is fed again
# in small steps from a snapshot of the inflater, to keep everything before the damage.
_SALVAGE_STEP = 256


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
    except FileNotFoundError as exc:
        raise TraceFormatError("could not read the file: it is gone (removed or rewritten since it was listed?)"
                               ) from exc
    except PermissionError as exc:  # on S3 also an archived (Glacier) object
        raise TraceFormatError(f"could not read the file: no permission ({exc.strerror or exc})") from exc
    except OSError as exc:
        raise TraceFormatError(f"could not read the file: {exc.strerror or exc}") from exc


def _too_big(max_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if max_bytes >= scale:
            limit = f"{max_bytes / scale:.4g} {unit}"
            break
    else:
        limit = f"{max_bytes} bytes"
    return f"the trace inflates beyond the {limit} limit (raise it with --max-trace-size)"


def _inflate(inflater, data: bytes, parts: list[bytes], size: int, max_bytes: int) -> int:
    """Inflate one block, never past the cap (so a bomb stops early); returns the new size."""
    out = inflater.decompress(data, max_bytes + 1 - size)
    while True:
        parts.append(out)
        size += len(out)
        if size > max_bytes:
            raise TraceFormatError(_too_big(max_bytes))
        if not inflater.unconsumed_tail:
            return size
        out = inflater.decompress(inflater.unconsumed_tail, max_bytes + 1 - size)


def _salvage(inflater, piece: bytes, parts: list[bytes], size: int, max_bytes: int) -> int:
    """Inflate a block known to hold corruption in small steps, up to the damage."""
    for start in range(0, len(piece), _SALVAGE_STEP):
        try:
            size = _inflate(inflater, piece[start:start + _SALVAGE_STEP], parts, size, max_bytes)
        except zlib.error:
            break
    return size


def _gunzip(fh, max_bytes: int) -> RawTrace:
    inflater = zlib.decompressobj(wbits=31)
    parts: list[bytes] = []
    size = 0
    warnings: list[str] = []
    corrupt = False
    while not corrupt and not inflater.eof:
        block = fh.read(_READ_BLOCK)
        if not block:
            break
        snapshot, kept, kept_size = inflater.copy(), len(parts), size
        try:
            size = _inflate(inflater, block, parts, size, max_bytes)
        except zlib.error as exc:
            inflater, size = snapshot, kept_size
            del parts[kept:]
            size = _salvage(inflater, block, parts, size, max_bytes)
            if size == 0:
                raise TraceFormatError(f"not a valid gzip file ({exc})") from exc
            warnings.append(f"the gzip stream is corrupt after {size:,} bytes ({exc}); reading what came before")
            corrupt = True
    if not inflater.eof and not warnings:
        if size == 0:
            raise TraceFormatError("the gzip file is empty or cut short before any data")
        warnings.append(f"the gzip file is cut short after {size:,} inflated bytes; reading what came before")
    return RawTrace(b"".join(parts), warnings)
