"""A trace's entry in the store: its tables and the data derived from them, kept on disk and read
back memory-mapped, so that a stored trace opens in milliseconds and its memory is the OS's page cache.

# Layout

The store is a folder (`--cache-dir`; with `--no-cache`, a private temporary folder the server
deletes at exit). It holds one entry per version of a trace file, a folder named by a hash of the
trace's path, size and modification time, the tables' version and this layout's (keys.py): a
changed file or a new parser never meets a stale entry.

    <store>/<key>/
      meta.json                        the document's metadata, the warnings, row counts, each table
                                       file's size and CRC-32
      events.arrow memory.arrow        the tables, one Arrow IPC file each: numeric columns as they
      flows.arrow counters.arrow       are (NaN stays NaN, no nulls), categoricals as dictionaries
      <item>-<tag>-<crc32>.arrow       derived data (codec.py), one file per item: steps, the
                                       operator tree, the timeline layout, the overview...
      .<item>.computing                empty: a process is computing the item (others skip it)

Reading a table maps its file and makes pandas columns that are views on the mapped buffers:
numeric columns and categorical codes are not copied; only the categories become Python strings
(frames.py).

# Shared storage

The store may also live on shared storage, an fsspec URL (`--cache-dir s3://bucket/profboard-cache`),
which `profboard index` fills from a cluster and servers read (server/trace/shared.py): the same
entries under the URL, `<url>/<key>/...`. Object stores have no rename, so a writer makes the entry
in a local store, then copies its table and item files and meta.json last: an entry without
meta.json is absent. Files never change under their names (an entry's key names one version of the
trace; an item's file, its version and CRC-32). A reader maps only local files: it copies an entry
whole into the shared store's local mirror (a store like any other, under the temporary folder) and
opens it there, with every check below; a damaged copy is discarded and the trace parsed into the
mirror.

# Versions

Each derived item has a version (server/items.py); its `tag` (a hash of its version, the versions of
the items it is computed from, and codec.CODEC_VERSION) is in its file name. A new version of one
analysis makes only its item's file (and those derived from it) stale: it is computed again and
written beside the others, and the stale file removed. Items of names
this version does not know (written by a newer profboard sharing the store) are left alone.

# Integrity

An entry is used only once it checks out, because disks, copies and people damage files:
1. the folder holds meta.json, the four tables and item files, nothing else (but the markers of
   items being computed);
2. meta.json decodes into its typed shape, and its metadata and warnings match their CRC-32;
3. each table file has its recorded size and CRC-32, checked when the entry is opened, before
   Arrow reads it (a damaged file can make Arrow return wrong numbers or read out of bounds);
4. each table has the columns and dtypes, in order, of the tables the parser makes, and category
   codes within their categories.
An entry that fails is logged with the reason, moved aside and deleted; the caller parses the
trace again and writes a good one. An item file is checked (its CRC-32 against its name) when it
is first read; a damaged one is logged, removed and computed again. Store trouble is never the
caller's error.

A file is checked once per process: an `Entry` remembers the identity (size, modification time,
inode) of each file it checked, and travels with that memory from the loader process to the server.
CRC-32 runs at about 1.4 GB/s here (0.19 s for the 274 MB events file of a 853 MB trace, 12 ms for
fixtures/big's 38 MB entry; SHA-256 and BLAKE2b are 2-4x slower); nothing here needs a
cryptographic hash, since whoever can write an entry can write its checksum too. A writer checksums
the bytes as it writes them: it never reads its files back to check them.

# Writing

A file that outgrows an 8 MB staging buffer (a big trace's tables, its operator tree, layout...) is
written around the page cache (O_DIRECT where the file system takes it), and a table is then read
back into the page cache for the server's first answers; smaller files are written through it
(_EntryFile says what that saves on the machine measured).
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import tempfile
import time
import uuid
import weakref
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

import msgspec
import pyarrow as pa

from . import codec

if TYPE_CHECKING:
    from .tables import TraceTables

log = logging.getLogger("profboard")

TABLES = ("events", "memory", "flows", "counters")
_META = "meta.json"
_TABLE_FILES = frozenset(f"{name}.arrow" for name in TABLES)
_COMPUTING = ".computing"
CLAIM_S = 600.0  # an item marked as being computed longer ago is anyone's again
# What writers name their work before renaming it into place (write_entry, Entry.write_item: tempfile's
# eight random characters; _discard).
_TEMPORARY = re.compile(r"^\.(([0-9a-f]{32}|[a-z][a-z0-9_]*)-[a-z0-9_]{8}|[0-9a-f]{32}-damaged-[0-9a-f]{8})$")
STALE_S = 3600.0  # a temporary untouched this long belongs to a writer that was killed
_ITEM_FILE = re.compile(r"^([a-z][a-z0-9_]*)-([0-9a-f]{8})-([0-9a-f]{8})\.arrow$")


class _FileCheck(msgspec.Struct, forbid_unknown_fields=True):
    size: int
    crc32: int


class _Content(msgspec.Struct, forbid_unknown_fields=True):
    metadata: dict[str, Any]
    warnings: list[str]
    rows: dict[str, int]


class _Meta(msgspec.Struct, forbid_unknown_fields=True):
    files: dict[str, _FileCheck]
    content_crc32: int
    # Kept as the bytes written, so that their checksum needs no canonical re-encoding.
    content: msgspec.Raw


class Damaged(Exception):
    """An entry, or a file of it, that must not be used; the message says why."""


@dataclass(frozen=True)
class FileId:
    """Which version of a file was checked: a file rewritten or replaced since has another."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileId:
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)


@dataclass
class Entry:
    """An opened entry: where it is, what meta.json says, and which of its files this process
    checked. Small and picklable: the loader process returns it to the server."""

    folder: str
    metadata: dict[str, Any]
    warnings: list[str]
    rows: dict[str, int]
    files: dict[str, _FileCheck] = field(repr=False)
    checked: dict[str, FileId] = field(default_factory=dict, repr=False)
    # The files this process mapped (not pickled: a mapping is the process's own).
    _maps: weakref.WeakSet = field(default_factory=weakref.WeakSet, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_maps"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _maps=weakref.WeakSet())

    @property
    def name(self) -> str:
        return os.path.basename(self.folder)

    # tables
    def tables(self) -> TraceTables:
        """The tables, memory-mapped; raises Damaged when a table file changed since it was checked
        and no longer matches its checksum, or does not have the parser's columns."""
        # Imported here: opening an entry and reading its items needs neither pandas nor the parser's tables.
        from .frames import read_frame
        from .tables import TraceTables

        frames = {name: read_frame(name, data) for name, data in self.check_tables().items()}
        return TraceTables(**frames, metadata=self.metadata, warnings=list(self.warnings))

    def check_tables(self) -> dict[str, pa.Buffer]:
        """Each table's file mapped, once its size and checksum are checked (raises Damaged), without
        reading the tables (nor importing pandas)."""
        return {name: self._checked(f"{name}.arrow", self.files[f"{name}.arrow"]) for name in TABLES}

    def _checked(self, name: str, check: _FileCheck | None) -> pa.Buffer:
        """The file mapped, after its size and checksum were checked in this process (once for a
        file that has not changed since). `check` None: the file is an item, its CRC in its name."""
        path = os.path.join(self.folder, name)
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            expected = check.crc32 if check is not None else int(_ITEM_FILE.match(name).group(3), 16)
            if check is not None and st.st_size != check.size:
                raise Damaged(f"{name}: {st.st_size} bytes, {check.size} written")
            if st.st_size == 0:
                raise Damaged(f"{name}: empty")
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        identity = FileId.of(st)
        if self.checked.get(name) != identity:
            if zlib.crc32(mapped) != expected:
                raise Damaged(f"{name}: the bytes do not match their checksum")
            self.checked[name] = identity
            # The check read every page: let them go from this process's memory (they stay in the page
            # cache), so that only what analyses touch counts in it.
            mapped.madvise(mmap.MADV_DONTNEED)
        self._maps.add(mapped)
        return pa.py_buffer(mapped)

    def release_pages(self) -> None:
        """Let the pages of this entry's files go from this process's memory: they stay in the page
        cache, and a later read maps them back (a minor fault)."""
        for mapped in list(self._maps):
            try:
                mapped.madvise(mmap.MADV_DONTNEED)
            except (ValueError, OSError):  # closed meanwhile
                pass

    # derived items
    def item_tags(self) -> dict[str, set[str]]:
        """Item name -> the tags of its files in the entry."""
        found: dict[str, set[str]] = {}
        for name in _listdir(self.folder):
            match = _ITEM_FILE.match(name)
            if match:
                found.setdefault(match.group(1), set()).add(match.group(2))
        return found

    @contextmanager
    def computing(self, item: str) -> Iterator[None]:
        """Marks the item as being computed by this process while the block runs, so that a loader
        computing the trace's items skips it instead of computing it a second time (`claimed`)."""
        marker = os.path.join(self.folder, f".{item}{_COMPUTING}")
        try:
            open(marker, "wb").close()
        except OSError:
            pass  # a read-only store: nothing to coordinate
        try:
            yield
        finally:
            _unlink(marker)

    def claimed(self, item: str) -> bool:
        """Whether another process marked the item as being computed (recently: a marker left by a
        process that died is stale after CLAIM_S)."""
        try:
            age = time.time() - os.stat(os.path.join(self.folder, f".{item}{_COMPUTING}")).st_mtime
        except OSError:
            return False
        return age < CLAIM_S

    def read_item(self, item: str, tag: str, classes: Mapping[str, type]) -> tuple[bool, Any]:
        """(True, value) of the item's file of this tag, or (False, None) when there is none or it is
        damaged (then it is logged and removed)."""
        for name in _listdir(self.folder):
            match = _ITEM_FILE.match(name)
            if match and match.group(1) == item and match.group(2) == tag:
                try:
                    return True, codec.read_value(self._checked(name, None), classes)
                except FileNotFoundError:
                    return False, None  # replaced meanwhile by a writer: read again next time
                except MemoryError:
                    raise
                except Exception as exc:
                    reason = str(exc) if isinstance(exc, Damaged) else f"{type(exc).__name__}: {exc}"
                    log.warning("stored %s in %s is damaged (%s): removed it, computing it again",
                                item, self.folder, reason)
                    _unlink(os.path.join(self.folder, name))
                    return False, None
        return False, None

    def write_item(self, item: str, tag: str, value: Any, classes: Mapping[str, type]) -> str | None:
        """Store `value` as the item's file of this tag, replacing its other versions, and name the
        file; failures (disk full, read-only store, a value outside the codec's allowlist) are
        logged, not raised (None)."""
        root = os.path.dirname(self.folder)
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{item}-", dir=root)
            with _EntryFile(fd) as sink:
                codec.write_value(sink, value, classes)
                sink.finish()
            name = f"{item}-{tag}-{sink.crc32:08x}.arrow"
            os.replace(tmp, os.path.join(self.folder, name))
            tmp = None
            self.checked[name] = FileId.of(os.stat(os.path.join(self.folder, name)))
        except Exception as exc:
            log.warning("cannot store %s in %s: %s: %s", item, self.folder, type(exc).__name__, exc)
            return None
        finally:
            if tmp is not None:
                _unlink(tmp)
        for other in _listdir(self.folder):
            match = _ITEM_FILE.match(other)
            if match and match.group(1) == item and other != name:
                _unlink(os.path.join(self.folder, other))
        return name


_BLOCK = 4096  # what O_DIRECT writes must be a multiple of, in length, buffer address and file offset
# Files bigger than this are written around the page cache (_EntryFile); smaller ones through it.
_STAGE_BYTES = 8 << 20


class _EntryFile:
    """A file of an entry being written (a table, an item), with the CRC-32 of its bytes. Its bytes gather
    in a page-aligned staging buffer; a file that outgrows it is written around the page cache (O_DIRECT,
    where the file system allows it), a smaller one through the page cache at the end. On the machine
    measured (a VM whose host takes back free memory) a buffered write of 80 MB took 0.72 s, written direct
    0.08-0.11 s and then read back from the disk, mapped, 0.15 s (one process, 2 s idle before each); the synthetic
    1.1 GB trace's 316 MB of tables took 2.6-5.1 s of its cold start through the page cache. On a machine
    without that cost the two ways are within a tenth of a second of each other for such files on an SSD.
    A table written direct is then read back (`read_back`, its path) into the page cache: the server maps
    the tables for its first answers (POSIX_FADV_WILLNEED read 2-8 MB of a 100 MB file there). The CRC-32 is
    taken as the bytes go out: reading a file back just after writing it cost 1.2 s for the Llama trace's
    tables while the disk was still busy taking earlier writes, 0.2 s otherwise."""

    def __init__(self, fd: int, read_back: str | None = None) -> None:
        self.fd, self.read_back = fd, read_back
        self.crc32, self.closed = 0, False
        self._stage = mmap.mmap(-1, _STAGE_BYTES)  # page-aligned, as O_DIRECT needs
        self._used = self.size = 0
        self._direct, self._first_flush = False, True

    def __enter__(self) -> _EntryFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)
        self._stage.close()

    def write(self, data: Any) -> int:
        self.crc32 = zlib.crc32(data, self.crc32)
        view = memoryview(data).cast("B")
        written = len(view)
        while view:
            n = min(len(view), _STAGE_BYTES - self._used)
            self._stage[self._used:self._used + n] = view[:n]
            self._used, view = self._used + n, view[n:]
            if self._used == _STAGE_BYTES:
                if self._first_flush:  # the file outgrows the buffer: direct from here, if it can be
                    self._direct, self._first_flush = _set_direct(self.fd, True), False
                self._flush_stage(_STAGE_BYTES)
        self.size += written
        return written

    def _flush_stage(self, length: int) -> None:
        """Write the staging buffer's first `length` bytes (direct: a multiple of _BLOCK)."""
        view = memoryview(self._stage)[:length]
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:
            if not self._direct:
                raise
            # The file system took O_DIRECT but not the writes: on through the page cache.
            self._direct = _set_direct(self.fd, False)
            while view:
                view = view[os.write(self.fd, view):]
        self._used = 0

    def flush(self) -> None:
        pass  # the staging buffer goes out whole at a time, its rest at finish()

    def close(self) -> None:  # Arrow closes its sink; the file is closed by the caller, after finish()
        self.closed = True

    def writable(self) -> bool:
        return True

    def finish(self) -> os.stat_result:
        """Write what is left and give the file's status; its size is what was written."""
        if self._direct:
            if self._used:
                self._flush_stage(-(-self._used // _BLOCK) * _BLOCK)  # padded to whole blocks, then cut
                os.ftruncate(self.fd, self.size)
            if self.read_back is not None:
                # 0.15 s per 80 MB on the machine measured, while the loader computes the first page's items.
                with open(self.read_back, "rb", buffering=0) as fh:
                    while fh.readinto(self._stage):
                        pass
        elif self._used:
            self._flush_stage(self._used)
        return os.fstat(self.fd)


def _set_direct(fd: int, on: bool) -> bool:
    """Turn O_DIRECT on or off for `fd`; whether it is on (never where the system has none)."""
    if fcntl is None or not hasattr(os, "O_DIRECT"):
        return False
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_DIRECT if on else flags & ~os.O_DIRECT)
    except OSError:  # a file system without O_DIRECT (tmpfs)
        return False
    return on


def _listdir(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def open_entry(store: str, key: str, trace: str = "", check: bool = True) -> Entry | None:
    """The entry for `key` with its tables checked (with `check` False: only its folder and
    meta.json; the tables when first mapped), or None when absent or damaged (a damaged entry is
    removed, and logged against `trace`)."""
    folder = Path(store) / key
    if not os.path.lexists(folder):
        return None
    try:
        entry = _open(folder)
        if check:
            entry.tables()  # every check, before the entry is used
        return entry
    except MemoryError:
        raise  # not the entry's fault: keep it
    except Damaged as exc:
        reason = str(exc)
    except Exception as exc:  # whatever reading a damaged entry raises: parsing again is the answer
        reason = f"{type(exc).__name__}: {exc}"
    discard(str(folder), reason, trace)
    return None


def discard(folder: str, reason: str, trace: str = "") -> None:
    """Log why an entry is damaged and remove it."""
    log.warning("store entry %s%s is damaged (%s): removed it, parsing the trace again",
                folder, f" of {trace}" if trace else "", reason)
    _discard(Path(folder))


def _open(folder: Path) -> Entry:
    if not folder.is_dir():
        raise Damaged("not a folder")
    names = set(os.listdir(folder))
    expected = _TABLE_FILES | {_META}
    unexpected = sorted(n for n in names - expected
                        if not (_ITEM_FILE.match(n) or n.startswith(".") and n.endswith(_COMPUTING))
                        or not (folder / n).is_file())
    if not expected <= names or unexpected:
        parts = [f"missing files {sorted(expected - names)}", f"unexpected files {unexpected}"]
        raise Damaged("; ".join(p for p in parts if not p.endswith("[]")))
    try:
        meta = msgspec.json.decode((folder / _META).read_bytes(), type=_Meta)
        if zlib.crc32(meta.content) != meta.content_crc32:
            raise Damaged(f"{_META}: the metadata and warnings do not match their checksum")
        content = msgspec.json.decode(meta.content, type=_Content)
    except msgspec.DecodeError as exc:
        raise Damaged(f"{_META}: {exc}") from None
    if set(meta.files) != _TABLE_FILES or set(content.rows) != set(TABLES):
        raise Damaged(f"{_META}: checksums for {sorted(meta.files)}, rows of {sorted(content.rows)}")
    return Entry(str(folder), content.metadata, content.warnings, content.rows, meta.files)


def _discard(path: Path) -> None:
    """Take a damaged entry out of its key's place at once (so the next store can write there and no
    reader meets it half deleted), then delete it."""
    aside = path.with_name(f".{path.name}-damaged-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return  # another process removed it first
    except OSError:
        aside = path
    try:
        _remove(aside)
    except OSError as exc:
        log.warning("cannot delete the damaged store entry %s: %s", aside, exc)


def _remove(path: Path) -> None:
    """Delete a file, or a folder with what it holds, without following symlinks; folders are made
    readable first (ours, but perhaps chmod'ed)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return
    path.chmod(0o700)
    for child in path.iterdir():
        _remove(child)
    path.rmdir()


def sweep(store: str, older_than_s: float = STALE_S) -> int:
    """Delete what writers killed mid-write left in the store: entries and item files still under their
    temporary dot-names (and entries put aside as damaged), untouched for `older_than_s`. How many."""
    swept = 0
    now = time.time()
    for name in _listdir(store):
        if not _TEMPORARY.match(name):
            continue
        path = Path(store) / name
        try:
            if now - path.lstat().st_mtime < older_than_s:
                continue  # perhaps being written now
            _remove(path)
            swept += 1
        except OSError:  # gone meanwhile, or not ours to delete
            pass
    return swept


def write_entry(store: str, key: str, tables: TraceTables) -> Entry:
    """Write `tables` as the entry for `key` (or keep the one another process wrote meanwhile)
    and open it; raises OSError (or whatever writing raised) when it cannot."""
    from .frames import frame_batch

    root = Path(store)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        files, checked = {}, {}
        for name in TABLES:
            path = tmp / f"{name}.arrow"
            batch = frame_batch(getattr(tables, name))
            with _EntryFile(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), read_back=str(path)) as sink:
                with pa.ipc.new_file(sink, batch.schema) as writer:
                    writer.write_batch(batch)
                st = sink.finish()
            files[path.name] = _FileCheck(size=st.st_size, crc32=sink.crc32)
            checked[path.name] = FileId.of(st)
        rows = {name: len(getattr(tables, name)) for name in TABLES}
        content = msgspec.json.encode(_Content(metadata=tables.metadata, warnings=tables.warnings, rows=rows))
        meta = _Meta(files=files, content_crc32=zlib.crc32(content), content=msgspec.Raw(content))
        (tmp / _META).write_bytes(msgspec.json.encode(meta))
        final = root / key
        if os.path.lexists(final):  # another process wrote it meanwhile
            _remove(tmp)
        else:
            os.replace(tmp, final)
            # A rename keeps the files' inodes and times: what was checked here still is.
            return Entry(str(final), tables.metadata, list(tables.warnings), rows, files, checked)
    except BaseException:
        if tmp.exists():
            _remove(tmp)
        raise
    entry = open_entry(store, key)
    if entry is None:
        raise Damaged("the entry another process wrote is damaged")
    return entry
