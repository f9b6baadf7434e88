"""Each loaded snapshot lives in a process of its own, where its analyses run.

Unpickling runs in C holding the GIL, and on hostile input it can be neither stopped nor
bounded from inside the process: a 100-byte pickle whose dict key is a pair of pairs nested
40 deep hashes for hours, a key nested a million deep crashes the interpreter, and one byte
of pickle can become 200 bytes of empty set. So a snapshot is read, unpickled and checked
(unpickle.py), then analysed, in a child process that limits itself before each step:

- processor time (RLIMIT_CPU; the kernel stops the process past it): CPU_SECONDS plus one
  second per CPU_BYTES_PER_SECOND of pickle, per step (reading, loading, each analysis);
- memory (RLIMIT_DATA; allocations fail past it): while reading, the size limit plus room
  for inflating; from then on MEMORY_PER_BYTE times the pickle's size plus MEMORY_BASE.

bench/snapshot.py's 1M-entry synthetic snapshot (55 MiB of pickle) takes its process 2.8 s of
processor time to start, load and check, 0.8 s more for the first timeline, and 480 MiB of
memory (8.7 times the pickle) once analysed; the limits leave several times that. The
server's thread only waits on a pipe, with the GIL released, and reads the answers with the
restricted unpickler: they are plain data, so nothing the child sends can run code in the server.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import pickle
import signal
import threading
import time
import traceback
from typing import Any, Callable

from ..settings import Settings
from .errors import NotASnapshot, SnapshotError, SnapshotTooLarge, UnsafeSnapshot
from .history import DeviceHistory, build_history, segment_devices
from .sites import SiteOrder, top_sites
from .state import allocator_state
from .summary import summary
from .timeline import active_timeline
from .unpickle import parse_snapshot, plain_loads, read_snapshot

try:
    import resource
except ImportError:  # Windows: no limits of its own; the server's wait for each answer still ends
    resource = None

log = logging.getLogger("profboard")
_REFUSALS = {cls.__name__: cls for cls in (NotASnapshot, SnapshotTooLarge, UnsafeSnapshot)}

CPU_SECONDS = Settings.snapshot_cpu_seconds
CPU_BYTES_PER_SECOND = 4 << 20
MEMORY_PER_BYTE = 32
MEMORY_BASE = 256 << 20
_READ_ROOM = 64 << 20  # inflating steps and read blocks on top of the size limit
_WALL_FACTOR = 4  # a child waiting on I/O uses no processor time; the server gives up after this many budgets
_TOO_SLOW = ("refused: it took more processor time than a snapshot of its size may ({:.0f} s plus 1 s per "
             f"{CPU_BYTES_PER_SECOND >> 20} MiB of pickle); a pickle built to be slow to load?")


class AnalysisFailed(SnapshotError):
    """An analysis raised on this snapshot (a bug, logged); the snapshot stays loaded."""


class Unavailable(SnapshotError):
    """No process to answer: closed to make room for another snapshot, or none could be started.
    Nothing is wrong with the file; ask again."""


class Loaded:
    """A snapshot in the child process, with each device's history built once."""

    def __init__(self, snap: dict[str, Any], nbytes: int) -> None:
        self.snap = snap
        self.nbytes = nbytes  # the pickle's size, inflated
        self.histories: dict[int, DeviceHistory] = {}

    def history(self, device: int) -> DeviceHistory:
        if device not in self.histories:
            self.histories[device] = build_history(self.snap, device)
        return self.histories[device]

    def devices(self) -> list[int]:
        return segment_devices(self.snap)

    def entries(self, device: int) -> int:
        return len(self.history(device).entries)

    def summary(self) -> dict[str, Any]:
        return summary(self.snap)

    def timeline(self, device: int, max_allocations: int, max_points: int) -> dict[str, Any]:
        return active_timeline(self.snap, device, max_allocations, max_points, history=self.history(device))

    def state(self, device: int, at: int | None) -> dict[str, Any]:
        return allocator_state(self.snap, device, at, history=self.history(device))

    def sites(self, device: int | None, n: int, by: SiteOrder) -> dict[str, Any]:
        devices = self.devices() if device is None else [device]
        return top_sites(self.snap, device, n, by, histories={d: self.history(d) for d in devices})


def _cpu_budget(cpu_seconds: float, nbytes: int) -> float:
    return cpu_seconds + nbytes / CPU_BYTES_PER_SECOND


def _set_soft(kind: str, value: int) -> None:
    if resource is not None:
        limit = getattr(resource, kind)
        hard = resource.getrlimit(limit)[1]
        resource.setrlimit(limit, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))


def _limit_cpu(seconds: float) -> None:
    _set_soft("RLIMIT_CPU", math.ceil(time.process_time() + seconds))


def _limit_memory(more: int) -> None:
    try:
        with open("/proc/self/status") as status:
            data_kb = next(int(line.split()[1]) for line in status if line.startswith("VmData:"))
    except (OSError, StopIteration):
        return  # not Linux: RLIMIT_DATA would not count mmap'ed memory anyway
    _set_soft("RLIMIT_DATA", data_kb * 1024 + more)


def _send(conn: Any, *message: Any) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _load(path: str, size: int, max_bytes: int, cpu_seconds: float) -> Loaded:
    _limit_memory(max_bytes + _READ_ROOM)
    _limit_cpu(_cpu_budget(cpu_seconds, size))
    data = read_snapshot(path, max_bytes)
    nbytes = len(data)
    _limit_memory(MEMORY_PER_BYTE * nbytes + MEMORY_BASE)
    _limit_cpu(_cpu_budget(cpu_seconds, nbytes))
    return Loaded(parse_snapshot(data), nbytes)


def _run(conn: Any, work: Callable[[], Any]) -> Any:
    """`work()`, or None once why it failed is sent."""
    try:
        return work()
    except SnapshotError as exc:
        _send(conn, "refused", type(exc).__name__, str(exc))
    except MemoryError:
        _send(conn, "refused", "SnapshotTooLarge",
              f"refused: it needs more memory than a snapshot of its size may ({MEMORY_PER_BYTE} times its pickle); "
              "a pickle built to take much more memory than its size?")
    except Exception as exc:  # noqa: BLE001 - a bug in an analysis: reported, the snapshot stays loaded
        _send(conn, "failed", f"{type(exc).__name__}: {str(exc)[:200]}", traceback.format_exc())
    return None


def _serve(conn: Any, path: str, size: int, max_bytes: int, cpu_seconds: float) -> None:
    """The child: load the snapshot, send its pickle's size, then answer calls until the pipe closes."""
    _set_soft("RLIMIT_CORE", 0)  # a stopped child leaves no core file behind
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle; it closes this process
    loaded = _run(conn, lambda: _load(path, size, max_bytes, cpu_seconds))
    if loaded is None:
        return
    _send(conn, "ok", loaded.nbytes)
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            return
        _limit_cpu(_cpu_budget(cpu_seconds, loaded.nbytes))
        _run(conn, lambda: _send(conn, "ok", method(loaded, *args)))


class SnapshotProcess:
    """The server's side of one child process: starts it, waits for the load, forwards calls.

    Raises SnapshotError when the file is refused (its message says why), including when the
    child is stopped by its limits or crashes.
    """

    def __init__(self, path: str, size: int, max_bytes: int, cpu_seconds: float = CPU_SECONDS) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, theirs = context.Pipe()
        self._process = context.Process(target=_serve, args=(theirs, path, size, max_bytes, cpu_seconds),
                                        name="profboard-snapshot", daemon=True)
        self._lock = threading.Lock()
        self._closed = False
        self._cpu_seconds = cpu_seconds
        try:
            self._process.start()
        except OSError as exc:  # out of processes or memory for one
            raise Unavailable(f"could not start a process to read it ({exc}); ask again") from None
        finally:
            theirs.close()
        try:
            # The pickle's size is unknown until the child has read it: wait as long as the largest may take.
            self.nbytes: int = self._answer(_cpu_budget(cpu_seconds, size) + _cpu_budget(cpu_seconds, max_bytes))
        except BaseException:
            self.close()
            raise

    def call(self, method: Callable[..., Any], *args: Any) -> Any:
        """`method(loaded, *args)` run in the child (a method of Loaded), returning its plain-data result."""
        with self._lock:
            if self._closed:
                raise Unavailable("this snapshot was unloaded to make room for another; ask again")
            try:
                self._conn.send((method, args))
            except OSError:
                raise self._ended() from None
            return self._answer(_cpu_budget(self._cpu_seconds, self.nbytes))

    def close(self) -> None:
        """Stop the child, once any call in progress has its answer."""
        with self._lock:
            self._closed = True
            self._conn.close()
            if self._process.is_alive():
                self._process.kill()
            self._process.join(5)

    def _answer(self, cpu_budget: float) -> Any:
        wall = _WALL_FACTOR * cpu_budget + 30
        try:
            if not self._conn.poll(wall):
                self._process.kill()
                raise SnapshotTooLarge(f"refused: no answer within {wall:.0f} s (is the file's storage hanging?)")
            kind, *rest = plain_loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            raise self._ended() from None
        except UnsafeSnapshot as exc:  # an analysis returned something other than plain data: a bug
            log.error("a memory snapshot analysis answered with more than plain data: %s", exc)
            raise AnalysisFailed("could not analyse this snapshot (its answer was not plain data)") from None
        if kind == "ok":
            return rest[0]
        if kind == "refused":
            name, message = rest
            raise _REFUSALS.get(name, SnapshotError)(message)
        message, trace = rest
        log.error("analysis failed on a memory snapshot: %s", trace)
        raise AnalysisFailed(f"could not analyse this snapshot ({message})")

    def _ended(self) -> SnapshotError:
        self._process.join(5)
        code = self._process.exitcode
        if code is None or code >= 0:  # an exit of its own (it could not start, say) is no fault of the file
            return Unavailable(f"the process reading it ended (exit status {code}); ask again")
        if -code == getattr(signal, "SIGXCPU", None):
            return SnapshotTooLarge(_TOO_SLOW.format(self._cpu_seconds))
        if -code == getattr(signal, "SIGKILL", None):
            return SnapshotTooLarge("refused: the process reading it was killed (the machine out of memory?)")
        name = next((s.name for s in signal.Signals if s.value == -code), str(-code))
        return NotASnapshot(f"refused: the process reading it crashed (signal {name}); a pickle built to crash "
                            "its reader?")
