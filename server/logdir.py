"""Discovery of runs, workers and spans in a logdir (a local path or any fsspec URL).

- A run is a folder holding `*.pt.trace.json` or `*.pt.trace.json.gz` files; its name is
  the folder's path relative to the logdir (the logdir itself is named after its basename).
- A file `<worker>.<timestamp>.pt.trace.json[.gz]` belongs to `worker`; a file with no
  timestamp (`<worker>.pt.trace.json`) too.
- A worker's files, ordered by timestamp as a number, are its spans "1", "2", ...
  (the reference plugin sorted them as strings, so span 10 came before span 9).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

import fsspec

_TRACE_FILE = re.compile(r"^(?P<worker>.+?)(?:\.(?P<stamp>\d+))?\.pt\.trace\.json(?:\.gz)?$")


@dataclass(frozen=True)
class TraceFile:
    path: str  # as fsspec understands it (a URL for remote stores)
    size: int
    mtime: float
    worker: str
    stamp: int | None


@dataclass(frozen=True)
class Run:
    name: str
    workers: dict[str, tuple[TraceFile, ...]]  # worker -> files in span order

    def spans(self, worker: str) -> list[str]:
        return [str(i + 1) for i in range(len(self.workers.get(worker, ())))]

    def file(self, worker: str, span: str) -> TraceFile | None:
        files = self.workers.get(worker, ())
        if span.isdigit() and 1 <= int(span) <= len(files):
            return files[int(span) - 1]
        return None


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
            return hash(str(value)) & 0xFFFFFFFF
    return 0.0


def discover(logdir: str) -> dict[str, Run]:
    """All runs under `logdir`, keyed by run name, sorted by name."""
    fs, root = fsspec.core.url_to_fs(logdir)
    root = root.rstrip("/") or "/"
    found = fs.find(root, detail=True)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    by_run: dict[str, dict[str, list[TraceFile]]] = {}
    for path, info in found.items():
        if info.get("type", "file") != "file":
            continue
        folder, filename = posixpath.split(path)
        parsed = parse_trace_name(filename)
        if parsed is None:
            continue
        worker, stamp = parsed
        rel = posixpath.relpath(folder, root)
        run = posixpath.basename(root) if rel == "." else rel
        url = path if protocol in ("file", "local") else fs.unstrip_protocol(path)
        trace = TraceFile(url, int(info.get("size") or 0), _mtime(info), worker, stamp)
        by_run.setdefault(run, {}).setdefault(worker, []).append(trace)
    runs = {}
    for name in sorted(by_run):
        workers = {w: tuple(sorted(files, key=lambda f: (f.stamp is None, f.stamp or 0, f.path)))
                   for w, files in sorted(by_run[name].items())}
        runs[name] = Run(name, workers)
    return runs
