"""A store on shared storage (an fsspec URL such as s3://bucket/profboard-cache): `profboard index`'s
workers write entries there, servers and `profboard summary` read them.

An entry is read memory-mapped, which needs local files: a reader copies a shared entry whole into
a local store, the shared store's mirror (a folder of this user's temporary folder, named by the URL,
kept across runs: a server started again copies nothing), and opens it there like any entry, with
every check of entry.py; a trace the shared store lacks is parsed into the mirror. A writer
makes the entry in a local store and publishes it: the table and item files first, meta.json last
(object stores have no rename; a PUT of one object is all or nothing), so an entry without meta.json
is absent to readers. The layout and versions are entry.py's, under the URL.
"""

from __future__ import annotations

import logging
import os
import posixpath
import tempfile
from pathlib import Path

import fsspec

from .entry import _ITEM_FILE, _META, _TABLE_FILES, Entry, _remove, open_entry

log = logging.getLogger("profboard")


def _folder(shared: str, key: str):
    fs, root = fsspec.core.url_to_fs(shared)
    return fs, posixpath.join(root.rstrip("/"), key)


def _listing(fs, folder: str) -> list[str]:
    """Names of the entry's files in the shared store (fresh: fsspec caches listings)."""
    fs.invalidate_cache(folder)
    try:
        return [posixpath.basename(p) for p in fs.ls(folder, detail=False)]
    except FileNotFoundError:
        return []


def _wanted(name: str) -> bool:
    return name in _TABLE_FILES or name == _META or _ITEM_FILE.match(name) is not None


def mirror_entry(shared: str, key: str, local: str, trace: str = "", check: bool = True) -> Entry | None:
    """The entry of `key` copied from the shared store into the local store `local` and opened
    there (entry.open_entry's checks), or None when the shared store has no entry (no meta.json)
    or it cannot be copied (logged)."""
    fs, folder = _folder(shared, key)
    names = [n for n in _listing(fs, folder) if _wanted(n)]
    if _META not in names:
        return None
    root = Path(local)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        # meta.json first: the files it names were all published before it.
        fs.get_file(posixpath.join(folder, _META), str(tmp / _META))
        tables = sorted(n for n in names if n in _TABLE_FILES)
        fs.get([posixpath.join(folder, n) for n in tables], [str(tmp / n) for n in tables])
        for name in (n for n in names if _ITEM_FILE.match(n)):
            try:
                fs.get_file(posixpath.join(folder, name), str(tmp / name))
            except FileNotFoundError:  # replaced by a newer version meanwhile: computed when needed
                pass
        final = root / key
        if os.path.lexists(final):  # another process mirrored it meanwhile
            _remove(tmp)
        else:
            os.replace(tmp, final)
    except Exception as exc:
        log.warning("cannot copy the store entry %s%s from %s: %s: %s", key, f" of {trace}" if trace else "",
                    shared, type(exc).__name__, exc)
        if tmp.exists():
            _remove(tmp)
        return None
    return open_entry(local, key, trace, check=check)


def open_entry_from(local: str, key: str, shared: str | None, trace: str = "", check: bool = True) -> Entry | None:
    """The entry of `key` in the local store, else mirrored there from `shared` (when given)."""
    entry = open_entry(local, key, trace, check=check)
    if entry is None and shared is not None:
        entry = mirror_entry(shared, key, local, trace, check=check)
    return entry


def publish_entry(entry: Entry, shared: str) -> None:
    """Copy the local `entry` into the shared store: its tables and items, then meta.json, then the
    shared store's files of other versions of its items are removed. Raises what writing raised."""
    fs, folder = _folder(shared, entry.name)
    local = sorted(n for n in os.listdir(entry.folder) if _wanted(n))
    present = set(_listing(fs, folder))
    # Files of an entry never change under their names (tables: one per key; items: a CRC in the name).
    files = [n for n in local if n != _META and n not in present]
    fs.makedirs(folder, exist_ok=True)
    if files:
        fs.put([os.path.join(entry.folder, n) for n in files], [posixpath.join(folder, n) for n in files])
    if _META not in present:
        fs.put_file(os.path.join(entry.folder, _META), posixpath.join(folder, _META))
    mine = {m.group(1): n for n in local if (m := _ITEM_FILE.match(n))}
    stale = [n for n in present if (m := _ITEM_FILE.match(n)) and m.group(1) in mine and n not in local]
    if stale:
        fs.rm([posixpath.join(folder, n) for n in stale])
