"""Stopping the real `profboard`: Ctrl-C (SIGINT) and SIGTERM end it within 2 s, also while a big trace
is loading, and leave nothing behind: not the loaders, not their decode helpers, not the resource
tracker of their semaphores. A loader mid-load used to hold the server up until the load was done (a
minute on a 1 GB trace), since Python's exit waits for a process pool's running tasks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from processes import free_port, living, process_tree, stop_process
from synth import big_trace

httpx = pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

STOP_WITHIN_S = 2.0
TRACE_BYTES = 60 * 10**6  # about 4 s of loading on a 2-core machine, and big enough for decode helpers


@pytest.fixture(scope="module")
def big_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logdir = tmp_path_factory.mktemp("big_logdir")
    (logdir / "run").mkdir()
    (logdir / "run" / "worker0.1.pt.trace.json").write_bytes(big_trace(TRACE_BYTES))
    return logdir


def _loading(base: str) -> bool:
    try:
        runs = httpx.get(f"{base}/api/runs", timeout=5).json()["runs"]
    except httpx.TransportError:
        return False
    return bool(runs) and runs[0]["status"] == "loading"


def _start_server(logdir: Path, tmp_path: Path) -> tuple[subprocess.Popen, int, Path]:
    """The real `profboard` on `logdir`, in a session of its own, its output in a log file."""
    port = free_port()
    log = tmp_path / "profboard.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "profboard.server.cli", "--logdir", str(logdir),
                                   "--port", str(port), "--cache-dir", str(tmp_path / "cache")],
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return server, port, log


# Ctrl-C in a terminal signals the whole foreground process group; `kill` and `docker stop` the server alone.
HOW = {"ctrl-c": (signal.SIGINT, True), "sigint": (signal.SIGINT, False), "sigterm": (signal.SIGTERM, False)}


@pytest.mark.parametrize("how", HOW)
def test_server_stops_within_2s_while_a_big_trace_loads(big_logdir: Path, tmp_path: Path, how: str):
    from profboard.server.trace.parallel import helper_count

    sig, whole_group = HOW[how]
    server, port, log = _start_server(big_logdir, tmp_path)
    tree: list[int] = []
    try:
        # The server, the resource tracker, a loader and its helpers, which it starts as it takes the file.
        wanted = 3 + helper_count()
        deadline = time.monotonic() + 60
        while len(tree := process_tree(server.pid)) < wanted or not _loading(f"http://127.0.0.1:{port}"):
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no loader with helpers at work after 60 s: {tree}\n{log.read_text()}"
            time.sleep(0.05)
        started = time.monotonic()
        if whole_group:
            os.killpg(server.pid, sig)
        else:
            server.send_signal(sig)
        while living(tree) and time.monotonic() - started < STOP_WITHIN_S:
            server.poll()  # reaps the server once it exits
            time.sleep(0.02)
        left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120] for pid in living(tree)}
        assert not left, f"still running {STOP_WITHIN_S} s after {how}: {left}"
        assert server.wait(timeout=1) == 0
    finally:
        stop_process(server)
        for pid in living(tree):  # what this test started and did not end
            os.kill(pid, signal.SIGKILL)
    text = log.read_text()
    assert "Traceback" not in text and "leaked" not in text, text


def test_one_trace_is_loaded_by_one_loader(big_logdir: Path, tmp_path: Path):
    """The server starts a loader before its own imports; a load that comes while that loader still starts
    waits for it, instead of making the pool start a second one, which imported for a second on the core
    the parse needed and then idled."""
    from profboard.server.trace.parallel import helper_count

    server, port, log = _start_server(big_logdir, tmp_path)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while True:
            seen.update(process_tree(server.pid))
            runs = []
            try:
                runs = httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=5).json()["runs"]
            except httpx.TransportError:
                pass
            if runs and runs[0]["status"] != "loading":
                break
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        assert runs[0]["status"] == "ready", runs
        # The server, the resource tracker, one loader and its helpers.
        assert len(seen) == 3 + helper_count(), {
            pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:160] for pid in living(sorted(seen))}
    finally:
        stop_process(server)
