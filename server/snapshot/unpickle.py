"""Reading a snapshot pickle without running anything it carries.

Unpickling is code execution: a pickle may name any importable callable (`os.system`,
`builtins.eval`, a class) and have it called while loading. Allocator snapshots are plain
data (dicts, lists, tuples, strings, numbers, booleans, None), and the only way a pickle can
reach a callable is to name a global (the GLOBAL / STACK_GLOBAL / EXT* opcodes all resolve
through `find_class`) or to hand one in as a persistent id. Both are refused here, so a
refused file has run nothing. Everything else the pickle machine can build (containers,
strings, numbers, bytes, sets) is inert data.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import zlib
from typing import Any, Union

from .errors import NotASnapshot, SnapshotTooLarge, UnsafeSnapshot

DEFAULT_MAX_BYTES = 4 * 2**30  # as --max-trace-size's default
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"

Source = Union[str, "os.PathLike[str]", bytes]


class _PlainDataUnpickler(pickle.Unpickler):
    """The C unpickler with every route to a callable closed."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeSnapshot(
            f"refused: the pickle asks for the global {module}.{name}; a memory snapshot "
            "holds only plain data (dicts, lists, strings, numbers), so this file is not "
            "loaded (nothing in it was run)")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeSnapshot(
            f"refused: the pickle refers to an external object (persistent id {str(pid)[:80]!r}); "
            "a memory snapshot holds only plain data, so this file is not loaded")


def _read(source: Source, max_bytes: int) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        try:
            size = os.path.getsize(source)
            if size > max_bytes:
                raise SnapshotTooLarge(f"the file is {size} bytes, over the limit of {max_bytes}")
            with open(source, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as e:
            raise NotASnapshot(f"cannot read the file: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise SnapshotTooLarge(f"the file is over the limit of {max_bytes} bytes")
    return data


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    # Read at most one byte past the limit, so a gzip bomb stops there.
    try:
        out = gzip.GzipFile(fileobj=io.BytesIO(data)).read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise NotASnapshot(f"corrupt or truncated gzip: {e}") from None
    if len(out) > max_bytes:
        raise SnapshotTooLarge(f"the gzip inflates beyond the limit of {max_bytes} bytes")
    return out


def _checked(obj: Any) -> dict[str, Any]:
    # Very old PyTorch (torch.cuda.memory_snapshot()) gave a bare list of segments.
    if isinstance(obj, list) and all(isinstance(s, dict) and "blocks" in s for s in obj):
        return {"segments": obj}
    if not isinstance(obj, dict):
        raise NotASnapshot(f"the pickle holds a {type(obj).__name__}, not a memory snapshot (a dict)")
    if not isinstance(obj.get("segments"), list):
        keys = ", ".join(sorted(map(str, obj))[:8]) or "none"
        raise NotASnapshot(f"the pickle holds no 'segments' list, so it is not a memory snapshot (keys: {keys})")
    return obj


def load_snapshot(source: Source, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The snapshot dict from a path or bytes (plain or gzip pickle), refusing anything but plain data.

    Raises UnsafeSnapshot, NotASnapshot or SnapshotTooLarge (all SnapshotError) with a message
    that can be shown as is.
    """
    data = _read(source, max_bytes)
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip(data, max_bytes)
    if not data:
        raise NotASnapshot("the file is empty")
    if data[:4] == _ZIP_MAGIC:
        raise NotASnapshot("a zip archive (torch.save output?), not a pickled memory snapshot")
    try:
        obj = _PlainDataUnpickler(io.BytesIO(data)).load()
    except UnsafeSnapshot:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, OverflowError, RecursionError, UnicodeDecodeError) as e:
        raise NotASnapshot(f"not a readable pickle ({type(e).__name__}: {str(e)[:200]})") from None
    return _checked(obj)
