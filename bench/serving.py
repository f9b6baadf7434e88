"""A real `profboard` server for the benchmarks: on one trace or a whole logdir, with the memory of its
process tree sampled while it runs, and latency statistics."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

# The tests' process helpers: a free port, and the tree of a process's descendants (Linux /proc).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from processes import free_port, living, process_tree  # noqa: E402,F401 (free_port: for the benchmarks)


def get(url: str, timeout: float = 60) -> tuple[int, float, bytes]:
    """Status, seconds and body of one GET."""
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        status, body = exc.code, b""
    return status, time.perf_counter() - t, body


@contextmanager
def logdir_of(trace: Path) -> Iterator[Path]:
    """A temporary logdir holding `trace` as run "run" (a folder's traces, e.g. one per rank, make that
    run's workers), through symbolic links."""
    trace = trace.resolve()
    files = sorted(trace.glob("*.pt.trace.json*")) if trace.is_dir() else [trace]
    with tempfile.TemporaryDirectory() as logdir:
        (Path(logdir) / "run").mkdir()
        for file in files:
            os.symlink(file, Path(logdir) / "run" / file.name)
        yield Path(logdir)


def tree_memory_bytes(pid: int, descendants: bool = True) -> tuple[int, int]:
    """(resident, anonymous) bytes of `pid` and all its descendants (or `pid` alone), summed (Linux); a
    memory-mapped file's pages count in each process that maps them, anonymous memory holds none."""
    rss = anon = 0
    for member in process_tree(pid) if descendants else [pid]:
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("RssAnon:"):
                    anon += int(line.split()[1]) * 1024
        except OSError:  # gone meanwhile
            pass
    return rss, anon


@dataclass
class Served:
    """A running server: its base URL, the seconds from start to ready, and its process. While it runs,
    a thread samples its process tree's memory every `interval` seconds: `peak_rss_bytes` so far."""

    base: str
    ready_s: float
    process: subprocess.Popen
    peak_rss_bytes: int = 0
    peak_anon_bytes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def pid(self) -> int:
        return self.process.pid

    def sample(self) -> tuple[int, int]:
        rss, anon = tree_memory_bytes(self.pid)
        self.peak_rss_bytes = max(self.peak_rss_bytes, rss)
        self.peak_anon_bytes = max(self.peak_anon_bytes, anon)
        return rss, anon

    def _sampling(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.sample()

    def stop(self, how: int = signal.SIGTERM, timeout_s: float = 30) -> float | None:
        """Send `how` and wait until the whole process tree is gone: the seconds that took (None: it had
        not after `timeout_s`; what is left is killed)."""
        self._stop.set()
        tree = process_tree(self.pid)
        t = time.perf_counter()
        self.process.send_signal(how)
        while living(tree) and time.perf_counter() - t < timeout_s:
            self.process.poll()  # reap the server, so that it stops counting
            time.sleep(0.02)
        took = time.perf_counter() - t
        left = living(tree)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        self.process.wait()
        return None if left else took


@contextmanager
def serve_logdir(logdir: Path, ready: Callable[[str], bool], cache: Path | None = None, timeout_s: float = 300,
                 interval: float = 0.1, stop: int = signal.SIGTERM) -> Iterator[Served]:
    """Starts `profboard` on `logdir` (its cache in `cache`, else an empty temporary folder) and yields it
    once `ready(base_url)` is true, with the seconds from start to then; stops it with `stop` at the end."""
    with tempfile.TemporaryDirectory() as scratch:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        t0 = time.perf_counter()
        log = Path(scratch) / "profboard.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "profboard.server.cli", "--logdir", str(logdir),
                                     "--port", str(port), "--cache-dir", str(cache or f"{scratch}/cache")],
                                    stdout=out, stderr=subprocess.STDOUT)
        served = Served(base, 0.0, proc)
        sampler = threading.Thread(target=served._sampling, args=(interval,), daemon=True)
        sampler.start()
        try:
            while True:
                try:
                    done = ready(base)
                except OSError:
                    done = False
                if done:
                    break
                if proc.poll() is not None:
                    raise RuntimeError(f"the server exited with {proc.returncode} before it was ready; its log "
                                       f"ends:\n{_tail(log)}")
                if time.perf_counter() - t0 > timeout_s:
                    raise RuntimeError(f"server not ready in {timeout_s:.0f} s; its log ends:\n{_tail(log)}")
                time.sleep(0.05)
            served.ready_s = time.perf_counter() - t0
            yield served
        finally:
            if proc.poll() is None:
                served.stop(stop)
            served._stop.set()
            sampler.join()


def _tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def answers(path: str) -> Callable[[str], bool]:
    """A `ready` check: GET `path` answers 200."""
    return lambda base: get(base + path)[0] == 200


@contextmanager
def serve(trace: Path, ready_path: str = "/api/overview?run=run", timeout_s: float = 120) -> Iterator[tuple[str, float, int]]:
    """Starts `profboard` on a logdir holding only `trace` (run "run", empty cache; see logdir_of); yields
    the base URL, the seconds from start to the first 200 on `ready_path`, and the server's pid."""
    with logdir_of(trace) as logdir, serve_logdir(logdir, answers(ready_path), timeout_s=timeout_s) as served:
        yield served.base, served.ready_s, served.pid


def code_version() -> str:
    """The commit measured, with "+dirty" when server/ has uncommitted changes (others edit it)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "server"], cwd=root, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


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
