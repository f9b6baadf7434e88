"""Servers for the browser tests: a real `profboard` on a logdir, until every run is loaded; and
a static one for the web app's modules alone."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterable, Iterator

import pytest

from processes import free_port, stop_process

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def serving(logdir: Path, cache_dir: Path, log_path: Path, expected: Iterable[str] = (),
            timeout_s: float = 120) -> Iterator[str]:
    """Starts `profboard` on `logdir`, yields its base URL once the `expected` runs (and every
    other) are no longer loading, and stops it afterwards."""
    port = free_port()
    command = [sys.executable, "-m", "profboard.server.cli", "--logdir", str(logdir), "--host", "127.0.0.1",
               "--port", str(port), "--cache-dir", str(cache_dir)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    wanted = set(expected)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"profboard exited with {process.returncode}:\n{log_path.read_text(errors='replace')}")
            try:
                with urllib.request.urlopen(f"{base}/api/runs", timeout=10) as response:
                    runs = json.load(response)["runs"]
                if runs and wanted <= {r["name"] for r in runs} and all(r["status"] != "loading" for r in runs):
                    break
            except (urllib.error.URLError, ConnectionError, OSError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"runs not ready after {timeout_s:.0f} s:\n{log_path.read_text(errors='replace')}")
            time.sleep(0.2)
        yield base
    finally:
        stop_process(process)


BLANK_PAGE = b"<!doctype html><html><head><title>profboard modules</title></head><body></body></html>"


class _StaticHandler(SimpleHTTPRequestHandler):
    """Files under /static; a blank page anywhere else, from which the modules are imported."""

    def do_GET(self) -> None:
        if self.path.startswith("/static/"):
            super().do_GET()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(BLANK_PAGE)))
        self.end_headers()
        self.wfile.write(BLANK_PAGE)

    def log_message(self, *args) -> None:
        pass


@contextmanager
def serving_static() -> Iterator[str]:
    """Serves web/static as /static on a free 127.0.0.1 port (no logdir, nothing to load); yields
    its base URL."""
    handler = partial(_StaticHandler, directory=str(REPO / "web"))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
