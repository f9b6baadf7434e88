"""A real `profboard` server on one trace, for the benchmarks, and latency statistics."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, float, bytes]:
    """Status, seconds and body of one GET."""
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            body = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        status, body = exc.code, b""
    return status, time.perf_counter() - t, body


@contextmanager
def serve(trace: Path, ready_path: str = "/api/overview?run=run", timeout_s: float = 120) -> Iterator[tuple[str, float, int]]:
    """Starts `profboard` on a logdir holding only `trace` (run "run", empty cache; a folder's
    traces, e.g. one per rank, make that run's workers); yields the base URL, the seconds from
    start to the first 200 on `ready_path`, and the server's pid."""
    files = sorted(trace.glob("*.pt.trace.json*")) if trace.is_dir() else [trace]
    with tempfile.TemporaryDirectory() as logdir, tempfile.TemporaryDirectory() as cache:
        (Path(logdir) / "run").mkdir()
        for file in files:
            os.symlink(file, Path(logdir) / "run" / file.name)
        base = f"http://127.0.0.1:{free_port()}"
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "profboard.server.cli", "--logdir", logdir,
                                 "--port", base.rsplit(":", 1)[1], "--cache-dir", cache],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                try:
                    status = get(base + ready_path)[0]
                except OSError:
                    status = 0
                if status == 200:
                    break
                if time.perf_counter() - t0 > timeout_s:
                    raise RuntimeError(f"server did not answer {ready_path} in {timeout_s:.0f} s")
                time.sleep(0.05)
            yield base, time.perf_counter() - t0, proc.pid
        finally:
            proc.terminate()
            proc.wait(10)


def percentiles(seconds: list[float]) -> dict[str, float]:
    """p50 and p95 in milliseconds (nearest rank)."""
    ordered = sorted(seconds)
    return {"p50_ms": 1000 * statistics.median(ordered),
            "p95_ms": 1000 * ordered[max(0, -(-len(ordered) * 95 // 100) - 1)]}


def peak_rss_bytes(pid: int) -> int:
    """A live process's peak resident memory (Linux), 0 where it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
