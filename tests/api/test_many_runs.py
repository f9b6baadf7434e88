"""A logdir of thousands of runs: /api/runs lists every run at once while they load in the background,
the run a request asks for loads before the runs queued ahead of it, and once all have loaded the
loader processes leave (an idle server holds little memory) until there is work again."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from processes import living, process_tree
from synth import big_trace
from profboard.server import loading, store
from profboard.server.app import create_app
from profboard.server.settings import Settings

REPO = Path(__file__).resolve().parents[2]
SMALL_TRACE = REPO / "examples/logdir/loss_sync_after/vm_471.1796155657212980565.pt.trace.json.gz"


def _many_runs(logdir: Path, count: int) -> list[str]:
    """`count` runs, each a hard link (a copy across file systems) of one small trace; their names in order."""
    names = [f"run{i:04d}" for i in range(count)]
    for name in names:
        (logdir / name).mkdir(parents=True)
        try:
            os.link(SMALL_TRACE, logdir / name / SMALL_TRACE.name)
        except OSError:
            shutil.copy(SMALL_TRACE, logdir / name / SMALL_TRACE.name)
    return names


def _wait_until_loaded(client: TestClient, count: int) -> None:
    deadline = time.monotonic() + 60
    while (runs := client.get("/api/runs").json()["runs"]) and (
            len(runs) < count or any(r["status"] == "loading" for r in runs)):
        assert time.monotonic() < deadline, "not loaded in 60 s"
        time.sleep(0.05)


def _client(logdir: Path, tmp_path: Path, **settings) -> TestClient:
    app = create_app(Settings(logdir=str(logdir), cache_dir=str(tmp_path / "cache"), rescan_seconds=3600, **settings))
    return TestClient(app, base_url="http://localhost")


def test_runs_lists_2000_runs_at_once_while_they_load(tmp_path: Path):
    names = _many_runs(tmp_path / "logdir", 2000)
    with _client(tmp_path / "logdir", tmp_path) as client:
        runs = client.get("/api/runs").json()["runs"]
        assert [r["name"] for r in runs] == names
        assert sum(r["status"] == "loading" for r in runs) > 1900, "loading goes on in the background"


def test_the_run_asked_for_loads_before_the_runs_queued_ahead_of_it(tmp_path: Path):
    names = _many_runs(tmp_path / "logdir", 30)
    with _client(tmp_path / "logdir", tmp_path, load_workers=1) as client:
        assert client.get("/api/overview", params={"run": names[-1]}).status_code == 409  # still queued
        deadline = time.monotonic() + 60
        while (runs := {r["name"]: r["status"] for r in client.get("/api/runs").json()["runs"]})[names[-1]] == "loading":
            assert time.monotonic() < deadline, "the last run did not load in 60 s"
            time.sleep(0.01)
    ready = [name for name, status in runs.items() if status != "loading"]
    # In discovery order it would have loaded last, after 29 others; asked for, it goes next, after the
    # load under way when it was asked for (and the next, or two, while this test looked).
    assert runs[names[-1]] == "ready" and len(ready) <= 4, ready


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_idle_loaders_leave_and_new_files_bring_them_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(store, "LOADERS_IDLE_S", 0.2)
    names = _many_runs(tmp_path / "logdir", 3)
    # A file big enough for decode helpers: a loader with helpers waited for them forever when it left.
    (tmp_path / "logdir" / names[0] / "big.1.pt.trace.json").write_bytes(big_trace(loading.BIG_FILE_BYTES))
    before = set(process_tree(os.getpid()))
    with _client(tmp_path / "logdir", tmp_path) as client:
        _wait_until_loaded(client, len(names))
        # This process's new descendants: the loaders, their helpers, and the resource tracker if it was
        # not running yet.
        started = [pid for pid in process_tree(os.getpid()) if pid not in before and pid != os.getpid()]
        loaders = [pid for pid in started if b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(loaders) > 2, f"no loader, or no helper, ran: {loaders}"
        deadline = time.monotonic() + 10
        while living(loaders):
            assert time.monotonic() < deadline, f"still running 10 s after the last load: {living(loaders)}"
            time.sleep(0.05)
        _many_runs(tmp_path / "more", 1)
        shutil.move(tmp_path / "more" / "run0000", tmp_path / "logdir" / "new_run")
        client.app.state.store.rescan()
        _wait_until_loaded(client, len(names) + 1)
        assert {r["name"]: r["status"] for r in client.get("/api/runs").json()["runs"]}["new_run"] == "ready"


def test_a_load_that_cannot_start_fails_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    names = _many_runs(tmp_path / "logdir", 3)
    start = store.TraceStore._start

    def refuse_the_first(self: store.TraceStore, fs: store.FileState, *args) -> None:
        if f"/{names[0]}/" in fs.file.path:
            raise OSError(12, "Cannot allocate memory")  # as when no process can be forked
        start(self, fs, *args)

    monkeypatch.setattr(store.TraceStore, "_start", refuse_the_first)
    with _client(tmp_path / "logdir", tmp_path, load_workers=1) as client:
        _wait_until_loaded(client, len(names))  # with one loader, the others wait for the one that failed
        runs = {r["name"]: r for r in client.get("/api/runs").json()["runs"]}
    assert [runs[name]["status"] for name in names] == ["error", "ready", "ready"]
    assert "could not start a process to load this trace (OSError" in runs[names[0]]["error"]


def test_big_parses_take_turns_while_small_loads_go_beside_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Two ranks of a big trace parsed at once each took twice as long on two cores, and the first overview
    # came after 10 s instead of 6 s (store.ALONE_BYTES). Here "big" is 4 MB, and the cores hold one at a time.
    monkeypatch.setattr(store, "ALONE_BYTES", 4 << 20)
    monkeypatch.setattr(store, "_parses_at_once", lambda: 1)
    logdir = tmp_path / "logdir"
    (logdir / "job").mkdir(parents=True)
    for rank in range(3):
        (logdir / "job" / f"rank{rank}.1.pt.trace.json").write_bytes(big_trace(4 << 20))
    small = _many_runs(logdir, 2)
    running = {True: 0, False: 0}  # loads under way: big parses, others
    seen: list[dict[bool, int]] = []  # at each start, with that load
    start, loaded = store.TraceStore._start, store.TraceStore._loaded

    def starting(self: store.TraceStore, fs: store.FileState, entry, alone: bool) -> None:
        assert alone == ("/job/" in fs.file.path)
        running[alone] += 1
        seen.append(dict(running))
        start(self, fs, entry, alone)

    def done(self: store.TraceStore, alone: bool) -> None:
        running[alone] -= 1
        loaded(self, alone)

    monkeypatch.setattr(store.TraceStore, "_start", starting)
    monkeypatch.setattr(store.TraceStore, "_loaded", done)
    with _client(logdir, tmp_path, load_workers=2) as client:
        _wait_until_loaded(client, 3)
        statuses = {r["name"]: r["status"] for r in client.get("/api/runs").json()["runs"]}
    assert statuses == {"job": "ready", **{name: "ready" for name in small}}
    assert len(seen) == 5 and all(counts[True] <= 1 for counts in seen), seen
    # The small runs did not wait for the big parses to end: one loaded beside one of them.
    assert any(counts[True] == 1 and counts[False] >= 1 for counts in seen), seen
