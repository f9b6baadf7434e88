"""Helpers shared by the test folders: where the fixture traces are, and a real `profboard` server.

- `fixtures_dir`: `<repo>/../shared/fixtures` (read-only); tests that need it skip when it is absent.
- `start_server(logdir, tmp_path)`: starts the real `profboard` command on a free 127.0.0.1 port,
  waits until no run is loading, and returns a `Server` whose `get()` fails the test on any
  answer that carries a Python traceback or a 500. Every server it started is stopped at the
  end of the session.

(tests/browser/conftest.py has its own `server` fixture; these names do not clash with it.)
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import pytest

from processes import free_port, stop_process

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"


def require_fixture(relative: str) -> Path:
    """Path of a fixture file or folder under FIXTURES; skips the test when it is absent."""
    path = FIXTURES / relative
    if not path.exists():
        pytest.skip(f"fixture {relative} not found under {FIXTURES} (the shared fixtures are not installed here)")
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {FIXTURES}")
    return FIXTURES


@dataclass
class Server:
    base: str
    process: subprocess.Popen
    log_path: Path
    logdir: Path
    cache_dir: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str, params: dict | None = None, *, timeout: float = 30.0):
        """GET `path`; fails the test if the answer shows a traceback or is a 500."""
        import httpx

        response = httpx.get(self.base + path, params=params, timeout=timeout)
        assert "Traceback" not in response.text, f"GET {path} {params} answered with a traceback:\n{response.text}"
        assert response.status_code < 500, f"GET {path} {params} -> {response.status_code}: {response.text}"
        return response

    def runs(self) -> dict[str, dict]:
        return {r["name"]: r for r in self.get("/api/runs").json()["runs"]}

    def wait_until_loaded(self, expect: Iterable[str] = (), timeout: float = 60.0) -> dict[str, dict]:
        """Poll /api/runs until every run in `expect` is listed and no run is loading."""
        import httpx

        expect = set(expect)
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"profboard exited with {self.process.returncode}:\n{self.log()}")
            try:
                runs = self.runs()
                loading = sorted(n for n, r in runs.items() if r["status"] == "loading")
                missing = sorted(expect - set(runs))
                if not loading and not missing:
                    return runs
                last = f"loading: {loading}, not listed yet: {missing}"
            except (httpx.TransportError, ValueError, KeyError) as exc:
                last = repr(exc)
            if time.monotonic() > deadline:
                pytest.fail(f"runs not loaded after {timeout:.0f}s ({last}); server log:\n{self.log()}")
            time.sleep(0.2)

    def stop(self) -> None:
        stop_process(self.process)


@pytest.fixture(scope="session")
def start_server() -> Callable[..., Server]:
    """`start_server(logdir, tmp_path, expect=(), timeout=60, cache_dir=None)`: a loaded `profboard` serving `logdir`.

    Its log and (unless `cache_dir` is given) its parse cache go under `tmp_path`.
    """
    started: list[Server] = []

    def start(logdir: Path, tmp_path: Path, *, expect: Iterable[str] = (), timeout: float = 60.0,
              cache_dir: Path | None = None, extra_args: Iterable[str] = ()) -> Server:
        port = free_port()
        cache = cache_dir or tmp_path / "cache"
        cache.mkdir(parents=True, exist_ok=True)
        log_path = tmp_path / "profboard.log"
        command = [sys.executable, "-m", "profboard.server.cli", "--logdir", str(logdir),
                   "--port", str(port), "--cache-dir", str(cache), *extra_args]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        server = Server(f"http://127.0.0.1:{port}", process, log_path, Path(logdir), Path(cache))
        started.append(server)
        server.wait_until_loaded(expect, timeout)
        return server

    yield start
    for server in started:
        server.stop()
