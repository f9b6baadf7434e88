"""Idle and slow clients must not lock others out (issue 21 item 9).

Against the real `profboard` command (one test runs uvicorn in-process to hold a handler open):
- 1,100 silent connections under a 1024 open-file limit: a fresh GET /api/runs still answers in 2 s;
- the soft open-file limit is raised to the hard one at start;
- a connection that sends nothing, trickles its request head a byte at a time or never finishes its
  body is closed after --idle-timeout, and others are answered meanwhile;
- at --max-connections a new connection closes the longest-idle one, never one being answered;
- a response the client stops reading is dropped; legitimate traffic is left alone: keep-alive,
  a download read slowly, a handler that takes longer than the timeout.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import resource
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from processes import free_port, stop_process

httpx = pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")

REPO = Path(__file__).resolve().parents[2]
SMALL_RUN = REPO / "tests/data/h200x2/ddp_straggler_rank1"
TIMEOUT = 1.5  # --idle-timeout for these servers, in seconds
BIG_BYTES = 32 << 20  # larger than loopback's socket buffers, so a client that stops reading stalls the server
TOKEN = "connections-test-token"


def _raise_own_file_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"needs {wanted} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small run, and `big` whose one trace is BIG_BYTES (a real trace padded with whitespace)."""
    root = tmp_path_factory.mktemp("connections_logdir")
    small = root / SMALL_RUN.name
    small.mkdir()
    for trace in SMALL_RUN.glob("*.pt.trace.json.gz"):
        (small / trace.name).write_bytes(trace.read_bytes())
    (root / "big").mkdir()
    text = gzip.decompress(next(SMALL_RUN.glob("*.pt.trace.json.gz")).read_bytes())
    (root / "big" / "worker0.1.pt.trace.json").write_bytes(text + b" " * (BIG_BYTES - len(text)))
    return root


class Served:
    def __init__(self, process: subprocess.Popen, port: int, log_path: Path):
        self.process, self.port, self.log_path = process, port, log_path
        self.base = f"http://127.0.0.1:{port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=5)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"} if TOKEN in self.process.args else {}

    def request_head(self, method: str, target: str, *headers: str) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{self.port}", *headers,
                 *(f"{name}: {value}" for name, value in self.auth.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def timed_runs(self) -> float:
        """Seconds a fresh client takes to get /api/runs; fails the test past 2 s."""
        start = time.monotonic()
        try:
            response = httpx.get(self.base + "/api/runs", headers=self.auth, timeout=2)
        except httpx.TimeoutException:
            pytest.fail(f"GET /api/runs took over 2 s; server log:\n{self.log()[-3000:]}")
        assert response.status_code == 200, response.text
        return time.monotonic() - start


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Served]]:
    """`serve(logdir, *args, nofile=(soft, hard))`: a loaded `profboard` started with those open-file limits."""
    started: list[Served] = []
    cache = tmp_path_factory.mktemp("connections_cache")  # shared: each trace is parsed once

    def start(logdir: Path, *args: str, nofile: tuple[int, int] | None = None) -> Served:
        tmp = tmp_path_factory.mktemp("connections_server")
        port = free_port()
        command = [sys.executable, "-m", "profboard.server.cli", "--logdir", str(logdir), "--port", str(port),
                   "--cache-dir", str(cache), *args]
        with open(tmp / "profboard.log", "wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                                       preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile))
                                       if nofile else None)
        served = Served(process, port, tmp / "profboard.log")
        started.append(served)
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"profboard exited with {process.returncode}:\n{served.log()}"
            try:
                headers = {"Authorization": f"Bearer {TOKEN}"}
                runs = httpx.get(served.base + "/api/runs", headers=headers, timeout=5).json()["runs"]
                if runs and all(r["status"] != "loading" for r in runs):
                    return served
            except (httpx.TransportError, ValueError, KeyError):
                pass
            assert time.monotonic() < deadline, f"not loaded after 60 s:\n{served.log()}"
            time.sleep(0.2)

    yield start
    for served in started:
        stop_process(served.process)


@pytest.fixture(scope="module")
def server(serve, logdir) -> Served:
    """The server most tests share: short timeouts, and a token so that /login reads a request body."""
    return serve(logdir, "--idle-timeout", str(TIMEOUT), "--token", TOKEN)


@pytest.fixture(scope="module")
def capped(serve, logdir) -> Served:
    """Started with a soft open-file limit of 1024 under a higher hard one, and --max-connections 40."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return serve(logdir, "--max-connections", "40", nofile=(1024 if hard > 1024 else hard, hard))


def _readable(sock: socket.socket, timeout: float) -> bool:
    poller = select.poll()  # not select.select: this process holds descriptors above 1024
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def seconds_until_closed(sock: socket.socket, limit: float, trickle: bytes = b"") -> float | None:
    """Seconds until the server closes `sock` (None if still open after `limit`), sending one byte of
    `trickle` every 0.1 s meanwhile and discarding whatever the server sends."""
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < limit:
        if trickle:
            try:
                sock.send(trickle[:1])
            except OSError:  # broken pipe or reset: closed
                return elapsed
            trickle = trickle[1:]
        if _readable(sock, 0.1):
            try:
                if not sock.recv(1 << 16):
                    return time.monotonic() - start
            except OSError:
                return time.monotonic() - start
    return None


def is_open(sock: socket.socket) -> bool:
    """True if the server has not closed `sock` (nothing to read, no end of stream)."""
    if not _readable(sock, 0):
        return True
    try:
        return bool(sock.recv(1 << 16, socket.MSG_PEEK))
    except OSError:
        return False


def test_runs_answer_beside_1100_idle_connections(serve, logdir):
    # Hard limit 1024 too: raising the soft limit cannot help, the connection cap must.
    _raise_own_file_limit(1300)
    served = serve(logdir, nofile=(1024, 1024))
    idle = [socket.socket() for _ in range(1100)]
    try:
        for sock in idle:
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", served.port))
        time.sleep(0.5)
        for _ in range(3):
            served.timed_runs()
        assert "out of system resource" not in served.log()
    finally:
        for sock in idle:
            sock.close()


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc/<pid>/limits")
def test_open_file_limit_raised_at_start(capped):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip(f"the hard open-file limit is {hard}: nothing to raise to")
    line = next(line for line in Path(f"/proc/{capped.process.pid}/limits").read_text().splitlines()
                if line.startswith("Max open files"))
    # Raised to the hard limit, or to 65536 where that is higher: plenty, and accepted everywhere.
    assert int(line.split()[3]) == min(hard, 65536), line


def test_silent_connection_closed_after_idle_timeout(server):
    sock = server.connect()
    try:
        closed = seconds_until_closed(sock, TIMEOUT + 2)
        assert closed is not None, f"a connection that sent nothing is still open after {TIMEOUT + 2} s"
        assert closed > TIMEOUT - 0.2
    finally:
        sock.close()


def test_trickled_head_closed_after_idle_timeout(server):
    # Slowloris: a byte of the head every 0.1 s never completes it, and must not extend the deadline.
    head = server.request_head("GET", "/api/runs", "X-Pad: " + "a" * 200)
    sock = server.connect()
    answered: list[float] = []
    other = threading.Thread(target=lambda: answered.append(server.timed_runs()))
    try:
        other.start()
        closed = seconds_until_closed(sock, TIMEOUT + 2, trickle=head)
        other.join()
        assert closed is not None, f"a trickled request head is still open after {TIMEOUT + 2} s"
        assert answered and answered[0] < 2
    finally:
        sock.close()


@pytest.mark.parametrize("target", ["/api/runs", "/login"],
                         ids=["answered_without_reading_body", "handler_reads_body"])
def test_unfinished_body_closed_after_idle_timeout(server, target):
    # /login waits for the body; /api/runs answers 405 and uvicorn drains the body.
    head = server.request_head("POST", target, "Content-Type: application/x-www-form-urlencoded",
                               "Content-Length: 1000")
    for trickle in (b"", b"token=" + b"x" * 100):  # stalled, then trickled
        sock = server.connect()
        try:
            sock.sendall(head + b"tok")
            closed = seconds_until_closed(sock, TIMEOUT + 2, trickle=trickle)
            assert closed is not None, f"a request body never finished is still open after {TIMEOUT + 2} s"
            server.timed_runs()
        finally:
            sock.close()


def test_keep_alive_serves_several_requests_then_closes(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        sockets = []
        for _ in range(3):
            conn.request("GET", "/api/runs", headers=server.auth)
            response = conn.getresponse()
            assert response.status == 200 and response.read()
            sockets.append(conn.sock)
            time.sleep(TIMEOUT / 3)
        assert sockets[0] is sockets[1] is sockets[2], "the connection was not kept alive"
        assert seconds_until_closed(conn.sock, TIMEOUT + 2) is not None
    finally:
        conn.close()


def test_connection_cap_closes_longest_idle_not_busy(capped):
    busy = capped.connect()  # a download the client has not read yet: busy, not idle
    busy.sendall(capped.request_head("GET", "/api/trace/raw?run=big", "Connection: close"))
    time.sleep(0.3)
    old = [capped.connect() for _ in range(39)]
    time.sleep(0.3)
    new = [capped.connect() for _ in range(10)]
    try:
        capped.timed_runs()
        time.sleep(0.3)
        # 10 new connections and timed_runs' one, at the cap: the 10 or 11 longest-idle ones went.
        assert not any(is_open(sock) for sock in old[:10]), "the longest-idle connections were not closed"
        assert all(is_open(sock) for sock in old[11:] + new), "a newer connection was closed"
        received = 0
        while chunk := busy.recv(1 << 20):
            received += len(chunk)
        assert received > BIG_BYTES, "the download was cut"
    finally:
        for sock in [busy, *old, *new]:
            sock.close()


def test_unread_download_dropped(server):
    sock = server.connect()
    try:
        sock.sendall(server.request_head("GET", "/api/trace/raw?run=big", "Connection: close"))
        time.sleep(2 * TIMEOUT + 1)  # the server's buffers fill, then nothing moves for over TIMEOUT
        received = 0
        try:
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        except ConnectionResetError:
            pass
        assert received < BIG_BYTES, "a response nobody read was kept open"
    finally:
        sock.close()


def test_slowly_read_download_completes(server):
    # Read at 10 MiB/s: about 3 s, twice TIMEOUT, with steady progress.
    rate = 10 << 20
    sock = server.connect()
    try:
        sock.sendall(server.request_head("GET", "/api/trace/raw?run=big", "Connection: close"))
        received, start = 0, time.monotonic()
        while chunk := sock.recv(1 << 16):
            received += len(chunk)
            time.sleep(max(0.0, received / rate - (time.monotonic() - start)))
        assert received > BIG_BYTES
    finally:
        sock.close()


@contextlib.contextmanager
def guarded_uvicorn(app, idle_timeout: float, max_connections: int) -> Iterator[int]:
    """Run `app` on uvicorn with this module's guard, in a thread; yields the port."""
    import uvicorn

    from profboard.server.connections import server_options

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning",
                            **server_options(idle_timeout, max_connections))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


async def _answer(send, body: bytes) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def test_slow_handler_is_not_idle():
    """A request whose handler outlasts the timeout is answered, even when the cap is reached meanwhile."""
    import asyncio

    async def slow_app(scope, receive, send):
        await asyncio.sleep(1.0)
        await _answer(send, b"done")

    with guarded_uvicorn(slow_app, idle_timeout=0.3, max_connections=4) as port:
        results: list[int] = []

        def fetch() -> None:
            results.append(httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code)

        fetches = [threading.Thread(target=fetch) for _ in range(3)]
        for fetch_thread in fetches:
            fetch_thread.start()
        time.sleep(0.2)
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]  # the cap closes these
        for fetch_thread in fetches:
            fetch_thread.join()
        assert results == [200, 200, 200]
        for sock in idle:
            sock.close()


def test_request_not_yet_read_is_not_idle():
    """Under a flood asyncio accepts a batch of connections before reading any: a request that has arrived
    but not been read must survive the batch's evictions."""

    async def app(scope, receive, send):
        if scope["path"] == "/block":
            time.sleep(0.5)  # holds the event loop, as a burst of accepts does
        await _answer(send, b"ok")

    with guarded_uvicorn(app, idle_timeout=5, max_connections=10) as port:
        blocker = threading.Thread(target=lambda: httpx.get(f"http://127.0.0.1:{port}/block", timeout=5))
        blocker.start()
        time.sleep(0.1)
        request = socket.create_connection(("127.0.0.1", port), timeout=5)
        request.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        flood = [socket.create_connection(("127.0.0.1", port)) for _ in range(30)]  # accepted after it, idle
        try:
            answer = b""
            while chunk := request.recv(1 << 16):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok"), answer
        except ConnectionResetError:
            pytest.fail("the request was closed as idle before it was read")
        finally:
            blocker.join()
            for sock in [request, *flood]:
                sock.close()
