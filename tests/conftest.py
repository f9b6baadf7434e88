"""Helpers shared by the test folders: where the fixture traces are, and profboard in-process or as the real command.

- `FIXTURES`, `require_fixture`, `fixtures_dir`: `<repo>/../shared/fixtures` (read-only). Only agreement
  tests (comparisons with the reference plugin or with the shared traces) use it; they skip when it is absent.
  Every other test runs on data the repository ships (examples/logdir, tests/data, tests/synth.py).
- `start_app(logdir)`: `create_app` with its real store and loader processes, answered through Starlette's
  TestClient (no port, no process to start). Most API tests use it; an unhandled error in a handler fails
  the test that sent the request.
- `start_server(logdir, tmp_path)`: the real `profboard` command on a free 127.0.0.1 port, for the smoke
  tests and for what needs a process of its own (signals, sockets, command-line flags).

Both wait until no run is loading and return an object whose `get()` fails the test on any answer that
carries a Python traceback or a 500. Everything started is stopped at the end of the session at the latest.

(tests/browser/conftest.py has its own `server` fixture; these names do not clash with it.)
"""

from __future__ import annotations

import logging
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


# The groups that take longest (`make test`'s --durations on 2 cores: tens of seconds each), slowest first. Handed
# out last, as xdist's order (most tests first) had them, one kept a worker busy for a minute after
# the other had finished.
SLOWEST_FIRST = ["fixtures_agreement", "tests/api/test_remote.py", "tests/index/test_index.py",
                 "tests/collectors/test_workloads.py", "tests/api/test_connections.py", "tests/api/test_shutdown.py"]


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under pytest-xdist with `--dist loadgroup` (make test): a module's tests run together on one
    worker, as its module fixtures expect (a module split over two workers sets them up twice; the
    collectors' fixture alone costs 25 s), and all the shared-fixture agreement tests run on one
    worker, so each shared trace is read once per run (tests/fixtures_agreement/shared_traces.py);
    the slowest groups are handed out first (SLOWEST_FIRST).

    A scheduler rather than xdist_group marks: xdist 3.8 puts a test's group into its node id, which
    pytest 9.2 no longer lets a plugin change, so the marks were silently ignored."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            return "fixtures_agreement" if module.startswith("tests/fixtures_agreement/") else module

        def _assign_work_unit(self, node) -> None:
            # xdist hands out the modules with the most tests first; the slowest go before them
            for scope in SLOWEST_FIRST:
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
                    break
            super()._assign_work_unit(node)

    return ByModule(config, log)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {FIXTURES}")
    return FIXTURES


class Served:
    """What API tests ask of a profboard, whichever way it runs: `get`, `runs`, `wait_until_loaded`."""

    logdir: Path
    cache_dir: Path | None

    def _request(self, path: str, params: dict | None, timeout: float):
        raise NotImplementedError

    def _check_alive(self) -> None:
        """Fails the test when the server is gone."""

    def log(self) -> str:
        raise NotImplementedError

    def get(self, path: str, params: dict | None = None, *, timeout: float = 30.0):
        """GET `path`; fails the test if the answer shows a traceback or is a 500."""
        response = self._request(path, params, timeout)
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
            self._check_alive()
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
                pytest.fail(f"runs not loaded after {timeout:.0f}s ({last}); log:\n{self.log()}")
            time.sleep(0.1)


@dataclass
class Server(Served):
    """The real `profboard` command."""

    base: str
    process: subprocess.Popen
    log_path: Path
    logdir: Path
    cache_dir: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _request(self, path: str, params: dict | None, timeout: float):
        import httpx

        return httpx.get(self.base + path, params=params, timeout=timeout)

    def _check_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"profboard exited with {self.process.returncode}:\n{self.log()}")

    def stop(self) -> None:
        stop_process(self.process)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


class App(Served):
    """`create_app(Settings(...))` in this process, through a TestClient on http://localhost (the app checks
    the Host header). `log()` holds what the profboard logger said while it ran (other apps' lines
    included, when several run at once)."""

    def __init__(self, settings, logdir: Path, cache_dir: Path | None) -> None:
        from fastapi.testclient import TestClient

        from profboard.server.app import create_app

        self.settings, self.logdir, self.cache_dir = settings, logdir, cache_dir
        self.app = create_app(settings)
        self.client = TestClient(self.app, base_url="http://localhost")
        self._records = _Records()
        logging.getLogger("profboard").addHandler(self._records)
        self.client.__enter__()  # runs the lifespan: the store starts its first scan
        self.running = True

    def log(self) -> str:
        return "\n".join(self._records.lines)

    def _request(self, path: str, params: dict | None, timeout: float):
        return self.client.get(path, params=params, follow_redirects=False)  # as httpx.get does

    def stop(self) -> None:
        if self.running:
            self.running = False
            self.client.__exit__(None, None, None)
            logging.getLogger("profboard").removeHandler(self._records)


@pytest.fixture(scope="session")
def start_app() -> Callable[..., App]:
    """`start_app(logdir, expect=(), timeout=60, cache_dir=None, **settings)`: a loaded in-process app
    serving `logdir`; `settings` are further `Settings` fields. No rescans unless `rescan_seconds` is
    given, so a test's logdir holds still. Stop it when done (module fixtures do); the session stops
    whatever is left."""
    from profboard.server.settings import Settings

    started: list[App] = []

    def start(logdir: Path, *, expect: Iterable[str] = (), timeout: float = 60.0, cache_dir: Path | None = None,
              **settings) -> App:
        settings.setdefault("rescan_seconds", 3600.0)
        app = App(Settings(logdir=str(logdir), cache_dir=cache_dir and str(cache_dir), **settings),
                  Path(logdir), cache_dir)
        started.append(app)
        app.wait_until_loaded(expect, timeout)
        return app

    yield start
    for app in started:
        app.stop()


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
