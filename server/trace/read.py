"""Bytes of one trace file from a local path or fsspec URL, gunzipped with a size cap.

The cap stops a gzip bomb (a small file that inflates to many GB) before it exhausts
memory (see server/inflate.py). A gzip stream cut short (a job killed mid-write) yields what
was inflated so far; the JSON decoder then recovers the complete events in it. Only regular
files are read (server/files.py): a FIFO or device named like a trace is refused at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..files import NotARegularFile, open_regular, read_capped
from ..inflate import Inflated, InflateLimit, gunzip_capped
from .decode import TraceFormatError

DEFAULT_MAX_BYTES = 4 << 30


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
