"""Discovery of runs, workers and spans in a logdir (a local path or any fsspec URL).

- A run is a folder holding `*.pt.trace.json` or `*.pt.trace.json.gz` files; its name is
  the folder's path relative to the logdir (the logdir itself is named after its basename).
  Local symlinks to folders or files are followed (people link runs into a logdir), and the
  scan says when one leaves the logdir; links to the logdir itself or a folder above it, and
  into /proc, /sys or /dev, are not followed (see `_local_files`).
- A file `<worker>.<timestamp>.pt.trace.json[.gz]` belongs to `worker`; a file with no
  timestamp (`<worker>.pt.trace.json`) too.
- A worker's files, ordered by timestamp as a number, are its spans "1", "2", ...
  (the reference plugin sorted them as strings, so span 10 came before span 9).
- CUDA allocator snapshots (`*.pickle`, `*.pickle.gz`, `*snapshot*.pkl`) in a folder belong to
  that folder's run; a folder holding only snapshots is a run too.
- Remote stores (s3://, gs://, az://, hdfs://, through the matching fsspec package) are listed
  afresh on every discovery: fsspec keeps listings in a cache that would hide new files.
  Credentials and endpoints come from the store's own environment variables (AWS_*, ...),
  fsspec's `FSSPEC_<PROTOCOL>_<OPTION>` variables, or `apply_storage_options`.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import stat
import zlib
from dataclasses import dataclass
from datetime import datetime

import fsspec
import fsspec.config
from fsspec.implementations.local import LocalFileSystem

_TRACE_FILE = re.compile(r"^(?P<worker>.+?)(?:\.(?P<stamp>\d+))?\.pt\.trace\.json(?:\.gz)?$")
_SNAPSHOT_FILE = re.compile(r"^(?:.+\.pickle(?:\.gz)?|.*snapshot.*\.pkl(?:\.gz)?)$", re.IGNORECASE)


@dataclass(frozen=True)
class TraceFile:
    path: str  # as fsspec understands it (a URL for remote stores)
    size: int
    mtime: float
    worker: str
    stamp: int | None


@dataclass(frozen=True)
class SnapshotFile:
    path: str
    size: int
    mtime: float
    name: str  # the file name, which picks it in the API


@dataclass(frozen=True)
class Run:
    name: str
    workers: dict[str, tuple[TraceFile, ...]]  # worker -> files in span order
    snapshots: tuple[SnapshotFile, ...] = ()  # by name

    def snapshot(self, name: str) -> SnapshotFile | None:
        return next((f for f in self.snapshots if f.name == name), None)

    def spans(self, worker: str) -> list[str]:
        return [str(i + 1) for i in range(len(self.workers.get(worker, ())))]

    def file(self, worker: str, span: str) -> TraceFile | None:
        files = self.workers.get(worker, ())
        if span.isdigit() and 1 <= int(span) <= len(files):
            return files[int(span) - 1]
        return None


def readable(text: str) -> str:
    """`text` from the file system as valid Unicode for ids and messages: bytes of a name that are
    not UTF-8 (which Python keeps as lone surrogates, and JSON cannot carry) become `\\xNN`."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def parse_trace_name(filename: str) -> tuple[str, int | None] | None:
    """(worker, timestamp) of a trace file name, or None if it is not a trace file."""
    match = _TRACE_FILE.match(filename)
    if not match:
        return None
    stamp = match.group("stamp")
    return match.group("worker"), int(stamp) if stamp is not None else None


def _mtime(info: dict) -> float:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return float(value.timestamp())
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
        try:  # GCS gives ISO 8601 text
            return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
        except ValueError:
            # Stable across processes and restarts (hash() is salted): it is part of the cache key.
            return float(zlib.crc32(str(value).encode()))
    return 0.0


# System folders whose files are not data (a link to /proc/self/environ reads the process's environment).
_SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")
# Entries one scan looks at, at most: a link to a huge folder must not stall the server's start.
MAX_SCAN_ENTRIES = 500_000


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _not_followed(target: str, real_root: str) -> str | None:
    """Why a link to `target` is not followed, or None when it may be."""
    if _within(real_root, target):
        return "it holds the logdir itself"
    if any(_within(target, system) for system in _SYSTEM_FOLDERS):
        return "a system folder, not data"
    return None


def _local_files(root: str, notes: list[str]):
    """(path, size, mtime) of the trace and snapshot files under a local folder.

    Links are followed once (people link runs into a logdir), except links to the logdir or a
    folder above it (the whole disk) and into system folders; a file reached through a link
    that leaves the logdir is read, and `notes` says so. The logdir's own entries are walked
    before linked folders, and the walk stops after MAX_SCAN_ENTRIES entries."""
    real_root = os.path.realpath(root)
    # (folder, its real path, the link that leads outside, if any); a folder's real path is its parent's
    # and its name unless it was reached through a link: resolving each one took most of a scan.
    own: list[tuple[str, str, str | None]] = [(root, real_root, None)]
    linked: list[tuple[str, str, str | None]] = []
    seen: set[str] = set()
    noted: set[str] = set()
    entries = 0
    while own or linked:
        folder, real, via = own.pop() if own else linked.pop()
        if real in seen:  # a link cycle, or a folder linked twice
            continue
        seen.add(real)
        try:
            listing = list(os.scandir(folder))
        except OSError:  # unreadable, or removed meanwhile
            continue
        for entry in listing:
            entries += 1
            if entries > MAX_SCAN_ENTRIES:
                notes.append(f"the scan stopped after {MAX_SCAN_ENTRIES:,} files and folders; "
                             "runs beyond them are not listed (point --logdir at a smaller folder)")
                return
            path, link, st = entry.path, via, None
            if entry.is_symlink():
                target = os.path.realpath(path)
                why = _not_followed(target, real_root)
                if why is not None:
                    notes.append(f"{os.path.relpath(path, root)} links to {target}: not followed ({why})")
                    continue
                if link is None and not _within(target, real_root):
                    link = f"{os.path.relpath(path, root)} links to {target}, outside the logdir"
                try:
                    st = os.stat(path)
                except OSError:  # dangling link, or removed meanwhile
                    continue
                is_dir, real_path = stat.S_ISDIR(st.st_mode), target
            else:  # the folder listing tells a folder from a file: no stat for files that are not traces
                is_dir, real_path = entry.is_dir(follow_symlinks=False), os.path.join(real, entry.name)
            if is_dir:
                (own if link is None else linked).append((path, real_path, link))
            elif parse_trace_name(entry.name) is not None or _SNAPSHOT_FILE.match(entry.name):
                try:
                    st = st or entry.stat(follow_symlinks=False)
                except OSError:  # removed meanwhile
                    continue
                if link is not None and link not in noted:
                    noted.add(link)
                    notes.append(f"{link}: read from there")
                yield path, st.st_size, st.st_mtime


def _remote_files(fs, root: str, logdir: str) -> list[tuple[str, int, float]]:
    """(URL, size, mtime) of every object under `root`; a missing bucket or prefix is an error."""
    # Listings are cached per filesystem instance (and fsspec reuses instances): drop them so
    # that files written since the last scan are seen.
    fs.invalidate_cache()
    found = fs.find(root, detail=True)
    files = [(fs.unstrip_protocol(path), int(info.get("size") or 0), _mtime(info))
             for path, info in found.items() if info.get("type", "file") == "file"]
    if not files and not fs.exists(root):
        # Object stores have no folders: an empty prefix and a mistyped one look alike.
        raise FileNotFoundError(f"nothing found at {display_url(logdir)} (no such bucket, container or prefix, "
                                "or no access to it)")
    return files


def is_remote(logdir: str) -> bool:
    """Whether `logdir` is a URL of a remote store rather than a local folder."""
    return fsspec.core.split_protocol(logdir)[0] not in (None, "file", "local")


def display_url(url: str) -> str:
    """`url` with any password in it masked, for messages and logs."""
    return re.sub(r"^([a-zA-Z][\w+.-]*://[^/@:]*):[^/@]*@", r"\1:***@", url)


_OPTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Options that are plainly secrets: a command line is readable by every user of the machine.
_SECRET_OPTION = re.compile(r"secret|password|account_key|sas_token|connection_string|session_token", re.I)


def apply_storage_options(logdir: str, options: list[str]) -> None:
    """Pass `KEY=VALUE` options to the fsspec filesystem of `logdir`'s protocol, in this process and
    the loader processes it spawns (through fsspec's `FSSPEC_<PROTOCOL>_<KEY>` variables). A value
    that parses as JSON is used as such (`anon=true`, `client_kwargs={...}`). Raises ValueError
    with a user-facing message on a malformed or secret option."""
    if not options:
        return
    protocol, _ = fsspec.core.split_protocol(logdir)
    if not is_remote(logdir):
        raise ValueError("--storage-option applies to remote logdirs (s3://, gs://, az://, ...) only")
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not _OPTION_NAME.match(key):
            raise ValueError(f"--storage-option takes KEY=VALUE, got {option.split('=')[0]!r}...")
        if _SECRET_OPTION.search(key):
            raise ValueError(f"--storage-option {key}: pass secrets through environment variables "
                             f"(e.g. FSSPEC_{protocol.upper()}_{key.upper()} or the store's own, such as "
                             "AWS_SECRET_ACCESS_KEY), not the command line, which other users can read")
        os.environ[f"FSSPEC_{protocol.upper()}_{key.upper()}"] = value
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        fsspec.config.conf.setdefault(protocol, {})[key.lower()] = parsed


def discover(logdir: str, notes: list[str] | None = None) -> dict[str, Run]:
    """All runs under `logdir`, keyed by run name, sorted by name. What the scan should tell the
    user (links it followed out of the logdir or did not follow, a scan cut short) is appended
    to `notes`."""
    fs, root = fsspec.core.url_to_fs(logdir)
    local = isinstance(fs, LocalFileSystem)
    root = root.rstrip("/") or "/"
    if local and not os.path.isdir(root):
        raise FileNotFoundError(f"no such folder: {root}")
    files = _local_files(root, notes if notes is not None else []) if local else _remote_files(fs, root, logdir)
    root_name = posixpath.basename(root)
    by_run: dict[str, dict[str, list[TraceFile]]] = {}
    snapshots: dict[str, list[SnapshotFile]] = {}
    for path, size, mtime in files:
        base = posixpath.basename(path)
        parsed = parse_trace_name(base)
        if parsed is None and not _SNAPSHOT_FILE.match(base):
            continue
        folder = posixpath.dirname(path)
        if local:  # the walk joined each path onto root: cut it off (relpath took a third of a scan)
            folder_rel = "." if folder == root else folder[len(root.rstrip("/")) + 1:]
        else:
            folder_rel = posixpath.relpath(fs._strip_protocol(folder), root)
        # Names are ids in URLs and JSON; paths stay as the file system has them, for opening.
        run = readable(root_name if folder_rel == "." else folder_rel)
        if parsed is None:
            snapshots.setdefault(run, []).append(SnapshotFile(path, size, mtime, readable(base)))
            continue
        worker, stamp = readable(parsed[0]), parsed[1]
        by_run.setdefault(run, {}).setdefault(worker, []).append(TraceFile(path, size, mtime, worker, stamp))
    runs = {}
    for name in sorted(set(by_run) | set(snapshots)):
        workers = {w: tuple(sorted(files, key=lambda f: (f.stamp is None, f.stamp or 0, f.path)))
                   for w, files in sorted(by_run.get(name, {}).items())}
        runs[name] = Run(name, workers, tuple(sorted(snapshots.get(name, []), key=lambda f: f.name)))
    if notes is not None:
        notes[:] = [readable(note) for note in notes]
    return runs
