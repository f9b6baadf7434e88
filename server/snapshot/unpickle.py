"""Reading a snapshot pickle without running anything it carries, and refusing one that expands.

Unpickling is code execution: a pickle may name any importable callable (`os.system`,
`builtins.eval`, a class) and have it called while loading. Allocator snapshots are plain
data (dicts, lists, tuples, strings, numbers, booleans, None), and the only way a pickle can
reach a callable is to name a global (the GLOBAL / STACK_GLOBAL / EXT* opcodes all resolve
through `find_class`) or to hand one in as a persistent id. Both are refused here, so a
refused file has run nothing. Everything else the pickle machine can build (containers,
strings, numbers, bytes, sets) is inert data.

Inert data can still be a "billion laughs": the pickle memo lets one list hold the same list
many times, nested, so a few KB describe billions of items that the analyses would walk one
by one. After loading, the object graph is measured once, each shared container counted once
per path to it, and the file is refused when it expands to more than 32 items per byte of
pickle (and over a million), or nests containers over 32 levels deep. Real snapshots share
frames between entries yet expand to under 2 items per byte (0.8 for a resnet18 snapshot,
1.4 for bench/snapshot.py's synthetic one) and nest 7 deep.

What the unpickler itself may do on hostile input (hash a key built to take hours, recurse
until the interpreter crashes, build 200 bytes of set per byte of file) cannot be bounded
from inside a process, so the server unpickles each snapshot in a process of its own, with
its processor time and memory limited (worker.py).
"""

from __future__ import annotations

import gc
import io
import os
import pickle
from itertools import compress
from typing import Any, BinaryIO, Union

import numpy as np

from ..files import open_regular, read_capped
from ..inflate import InflateLimit, gunzip_capped
from .errors import NotASnapshot, SnapshotTooLarge, UnsafeSnapshot

DEFAULT_MAX_BYTES = 4 * 2**30  # as --max-trace-size's default
EXPANSION_PER_BYTE = 32
MIN_EXPANSION = 1 << 20  # so that small files sharing a few frame lists are never refused
MAX_DEPTH = 32
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
_CONTAINERS = frozenset({dict, list, tuple, set, frozenset})

Source = Union[str, "os.PathLike[str]", bytes, bytearray]


class _PlainDataUnpickler(pickle.Unpickler):
    """The C unpickler with every route to a callable closed."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeSnapshot(
            f"refused: the pickle asks for the global {module}.{name}; a memory snapshot "
            "holds only plain data (dicts, lists, strings, numbers), so this file is not "
            "loaded (nothing in it was run)")

    def persistent_load(self, pid: Any) -> Any:
        # Only a string is shown: str() of a hostile structure could be huge.
        shown = repr(pid[:80]) if isinstance(pid, str) else f"a {type(pid).__name__}"
        raise UnsafeSnapshot(
            f"refused: the pickle refers to an external object (persistent id {shown}); "
            "a memory snapshot holds only plain data, so this file is not loaded")


def plain_loads(data: bytes) -> Any:
    """Unpickle bytes that may hold only plain data (no globals, no persistent ids)."""
    return _PlainDataUnpickler(io.BytesIO(data)).load()


def _limit_text(max_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if max_bytes >= scale:
            return f"{max_bytes / scale:.4g} {unit}"
    return f"{max_bytes} bytes"


def _too_large(max_bytes: int, what: str) -> SnapshotTooLarge:
    return SnapshotTooLarge(f"{what} this server's limit of {_limit_text(max_bytes)} (--max-snapshot-size)")


def _read_open(fh: BinaryIO, max_bytes: int) -> bytes | bytearray:
    magic = fh.read(2)
    fh.seek(0)
    if magic != _GZIP_MAGIC:
        data = read_capped(fh, max_bytes)
        if data is None:
            raise _too_large(max_bytes, "the file is over")
        return data
    try:
        inflated = gunzip_capped(fh, max_bytes)
    except InflateLimit:
        raise _too_large(max_bytes, "the gzip file inflates beyond") from None
    # Half a pickle is no snapshot: unlike a trace, nothing is salvaged.
    if inflated.corrupt is not None:
        raise NotASnapshot(f"corrupt gzip after {len(inflated.data):,} bytes ({inflated.corrupt})")
    if inflated.cut_short:
        raise NotASnapshot(f"the gzip file is cut short after {len(inflated.data):,} inflated bytes")
    return inflated.data


def read_snapshot(source: Source, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes | bytearray:
    """The pickle's bytes from a path or bytes, gunzipped when gzip, holding at most `max_bytes`
    (plus one inflating step); raises NotASnapshot or SnapshotTooLarge."""
    if isinstance(source, (bytes, bytearray)):
        return _read_open(io.BytesIO(source), max_bytes)
    try:
        with open_regular(os.fspath(source)) as fh:
            return _read_open(fh, max_bytes)
    except OSError as e:
        raise NotASnapshot(f"cannot read the file: {e.strerror or e}") from None


def _expanded(root: Any, budget: int) -> tuple[int, int]:
    """(items, depth) of `root` with each container counted once per path to it; stops with
    (items, depth) as found so far once items pass `budget` or depth passes MAX_DEPTH.

    Breadth first, one level at a time: the containers of a level are grouped by how many
    paths reach them, each group's referents come from one gc.get_referents call, and the
    paths to the next level's containers are summed over the unique ones (numpy), so the
    cost is linear in the graph, not in what it expands to. A dict's referents are its
    values, and its keys when they are not all strings.
    """
    items, depth = 1, 0
    level: list[tuple[int, list[Any]]] = [(1, [root])]  # (paths, containers reached by that many)
    while level:
        depth += 1
        found: list[Any] = []
        weights: list[np.ndarray] = []
        for paths, group in level:
            refs = gc.get_referents(*group)
            items += paths * len(refs)
            inner = list(compress(refs, map(_CONTAINERS.__contains__, map(type, refs))))
            found += inner
            weights.append(np.full(len(inner), paths, dtype=np.float64))
        if items > budget or depth > MAX_DEPTH or not found:
            return items, depth
        ids = np.fromiter(map(id, found), dtype=np.uint64, count=len(found))
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        # Exact as floats: path counts stay below `items`, which stays below the budget.
        path_counts = np.bincount(inverse, weights=np.concatenate(weights)).astype(np.int64)
        level = [(paths, [found[i] for i in first[path_counts == paths].tolist()])
                 for paths in np.unique(path_counts).tolist()]
    return items, depth


def _check_expansion(obj: Any, nbytes: int) -> None:
    budget = max(MIN_EXPANSION, EXPANSION_PER_BYTE * nbytes)
    items, depth = _expanded(obj, budget)
    if depth > MAX_DEPTH:
        raise NotASnapshot(f"refused: the pickle's containers are nested over {MAX_DEPTH} levels deep "
                           "(a memory snapshot's are nested 7 deep)")
    if items > budget:
        raise SnapshotTooLarge(
            f"refused: the pickle's shared references expand to over {budget:,} items, the most allowed for "
            f"a {nbytes:,}-byte file (real snapshots expand to under 2 items per byte): a 'billion laughs' "
            "file, whose analyses would never end")


def _checked(obj: Any) -> dict[str, Any]:
    # Very old PyTorch (torch.cuda.memory_snapshot()) gave a bare list of segments.
    if isinstance(obj, list) and all(isinstance(s, dict) and "blocks" in s for s in obj):
        return {"segments": obj}
    if not isinstance(obj, dict):
        raise NotASnapshot(f"the pickle holds a {type(obj).__name__}, not a memory snapshot (a dict)")
    if not isinstance(obj.get("segments"), list):
        keys = ", ".join(sorted(k[:40] for k in obj if isinstance(k, str))[:8]) or "none"
        raise NotASnapshot(f"the pickle holds no 'segments' list, so it is not a memory snapshot (keys: {keys})")
    return obj


def parse_snapshot(data: bytes | bytearray) -> dict[str, Any]:
    """The snapshot dict from a plain (inflated) pickle, refusing anything but plain data and
    anything that expands past the budget (module note)."""
    if not data:
        raise NotASnapshot("the file is empty")
    if data[:4] == _ZIP_MAGIC:
        raise NotASnapshot("a zip archive (torch.save output?), not a pickled memory snapshot")
    try:
        obj = plain_loads(data)
    except UnsafeSnapshot:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, OverflowError, RecursionError, UnicodeDecodeError) as e:
        raise NotASnapshot(f"not a readable pickle ({type(e).__name__}: {str(e)[:200]})") from None
    _check_expansion(obj, len(data))
    return _checked(obj)


def load_snapshot(source: Source, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The snapshot dict from a path or bytes (plain or gzip pickle), refusing anything but plain
    data (in this process: see worker.py for hostile files).

    Raises UnsafeSnapshot, NotASnapshot or SnapshotTooLarge (all SnapshotError) with a message
    that can be shown as is.
    """
    return parse_snapshot(read_snapshot(source, max_bytes))
