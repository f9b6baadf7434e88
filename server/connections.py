"""Idle and slow clients must not lock others out.

uvicorn times a connection only between requests, and any byte it receives stops that clock: a
client that connects and sends nothing, or trickles its request a byte at a time, or never finishes
a body, keeps its socket forever. Each holds a file descriptor; once they fill the open-file limit
the server cannot accept anyone. Three guards, used through `server_options()`:

1. Deadlines. A client has `idle_timeout` seconds from connecting, or from the end of the previous
   response, to deliver a complete request (head and body); bytes trickling in do not extend it.
   A response the client stops reading is dropped after the same time without progress. While a
   handler runs or a response flows, nothing is timed: a slow analysis is not idle.
2. A connection cap below the descriptor budget. At the cap, a new connection closes the one that
   has waited longest on its client instead of being refused: all local clients share one address,
   so an attacker's idle sockets would otherwise lock out the user's browser. A connection whose
   request has arrived but not been read yet is not idle (under a flood, asyncio accepts a whole
   batch of sockets before it reads any).
3. The soft RLIMIT_NOFILE raised to the hard limit, so that budget is as large as the system allows.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import struct
from collections import OrderedDict
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

try:  # Unix: to ask a socket how many bytes it holds unread
    import fcntl
    import termios
except ImportError:  # Windows
    fcntl = termios = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

_DEFAULT_MAX_CONNECTIONS = 1000
_MAX_FILE_LIMIT = 65536  # plenty for the cap; some systems refuse a soft limit as high as an unlimited hard one
_RESERVED_FILES = 128  # trace and cache files, loader pipes, logs: about 20 in use when measured
_UNREAD_SCAN = 32  # longest-idle connections looked at for one without unread input


def raise_open_file_limit() -> int | None:
    """Raise this process's soft limit on open files toward its hard limit; return the soft limit in force
    (None where the platform has no such limit)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _MAX_FILE_LIMIT if hard == resource.RLIM_INFINITY else min(hard, _MAX_FILE_LIMIT)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):  # e.g. macOS caps it below the hard limit
            pass
    return None if soft == resource.RLIM_INFINITY else soft


def server_options(idle_timeout: float, max_connections: int | None = None) -> dict[str, Any]:
    """Keyword arguments for `uvicorn.run` / `uvicorn.Config`: the guarded protocol, and an accept backlog
    that fits the open-file limit (raised first) next to the connections."""
    files = raise_open_file_limit() or _MAX_FILE_LIMIT  # no limit (Windows): as much as we would ask for
    spare = max(files - _RESERVED_FILES, 64)
    # asyncio accepts up to `backlog` sockets per pass of its loop, and a few passes go by before the
    # protocol sees them and closes idle ones to make room: leave room for four such bursts.
    backlog = min(max(spare // 8, 16), 2048)
    # A busy connection may hold a file too (a download): two descriptors each.
    budget = max((spare - 4 * backlog) // 2, 8)
    cap = min(_DEFAULT_MAX_CONNECTIONS, budget) if max_connections is None else max_connections
    if cap > budget:
        log.warning("--max-connections %d is more than the open-file limit (%d) leaves room for; using %d",
                    cap, files, budget)
        cap = budget
    guard = _Guard(idle_timeout, cap)
    return {"http": functools.partial(GuardedH11Protocol, guard=guard), "backlog": backlog}


def _unread_bytes(transport: asyncio.Transport) -> int:
    """Bytes received on the transport's socket that nobody has read yet (0 where that cannot be told)."""
    if fcntl is None:
        return 0
    try:
        sock = transport.get_extra_info("socket")
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    except (OSError, AttributeError):  # closed meanwhile
        return 0


class _Guard:
    """What the connections of one server share: the timeout, and which ones wait on their client."""

    def __init__(self, timeout: float, max_connections: int) -> None:
        self.timeout = timeout
        self.max_connections = max_connections
        self.open: set[GuardedH11Protocol] = set()  # accepted and not dropped or lost yet
        self.waiting: OrderedDict[GuardedH11Protocol, None] = OrderedDict()  # longest-waiting first
        self.warned = False

    def make_room(self) -> None:
        while len(self.open) > self.max_connections and self.waiting:
            if not self.warned:
                self.warned = True
                log.warning("%d connections open: closing the longest-idle ones to admit new ones "
                            "(--max-connections)", len(self.open))
            self._longest_idle().drop()

    def _longest_idle(self) -> GuardedH11Protocol:
        candidates = itertools.islice(self.waiting, _UNREAD_SCAN)
        chosen = next((c for c in candidates if not _unread_bytes(c.transport)), next(iter(self.waiting)))
        del self.waiting[chosen]
        return chosen


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the deadlines and the cap of this module."""

    def __init__(self, *args: Any, guard: _Guard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._guard = guard
        self._deadline: asyncio.TimerHandle | None = None
        self._write_check: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._guard.open.add(self)
        self._follow_client(fresh=True)
        self._guard.make_room()  # may close this one, if every other connection is busy

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        if self._write_check is not None:
            self._write_check.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_client(fresh=False)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request
        if self.transport.is_closing():  # the last answer ("Connection: close"): nothing more will be written
            self._watch_writes()
        self._follow_client(fresh=True)

    def pause_writing(self) -> None:
        super().pause_writing()
        self._watch_writes()

    def resume_writing(self) -> None:
        # A dropped connection keeps its check until the rest is sent: its socket lives until then.
        if self._write_check is not None and not self.transport.is_closing():
            self._write_check.cancel()
            self._write_check = None
        super().resume_writing()

    def drop(self, abort: bool = False) -> None:
        """Close now. Response bytes not sent yet still go out while the client reads them, unless `abort`."""
        self._forget()
        if abort:
            self.transport.abort()
            return
        self.transport.close()
        self._watch_writes()

    def _follow_client(self, *, fresh: bool) -> None:
        """Start the deadline when the server starts waiting on the client; stop it once the request is in.

        `fresh`: the server has just accepted or answered, so a wait that starts now gets a new deadline.
        """
        if self not in self._guard.open or self.transport.is_closing():
            return
        # IDLE: no request head yet; SEND_BODY: head in, body not (also after an answer that did not wait for it).
        waiting = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
        if waiting and (fresh or self._deadline is None):
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(self._guard.timeout, self.drop)
            self._guard.waiting[self] = None
            self._guard.waiting.move_to_end(self)
        elif not waiting and self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
            self._guard.waiting.pop(self, None)

    def _watch_writes(self) -> None:
        """Check, `timeout` seconds from now, that the client has read some of what waits for it.

        Only called where the buffer cannot grow meanwhile: writing paused, or the transport closing.
        """
        buffered = self.transport.get_write_buffer_size()
        if buffered and self._write_check is None:
            self._write_check = self.loop.call_later(self._guard.timeout, self._check_writes, buffered)

    def _check_writes(self, buffered: int) -> None:
        self._write_check = None
        if self.transport.get_write_buffer_size() >= buffered:  # the client read nothing for the whole timeout
            self.drop(abort=True)
        else:
            self._watch_writes()

    def _forget(self) -> None:
        """Stop timing this connection and counting it against the cap."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._guard.open.discard(self)
        self._guard.waiting.pop(self, None)
