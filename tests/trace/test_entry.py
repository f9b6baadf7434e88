"""The on-disk parse cache (server/trace/cache.py, load.py): hits, misses and damaged entries."""

from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import json
import logging
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable
from unittest.mock import ANY

import pandas as pd
import pytest

from profboard.server.analysis.overview import overview
from profboard.server.items import Derivation
from profboard.server.trace import entry as entry_module
from profboard.server.trace import load as load_module
from profboard.server.trace.entry import STALE_S, open_entry, sweep, write_entry
from profboard.server.trace.keys import entry_key
from profboard.server.trace.load import load_trace
from profboard.server.trace.tables import TraceTables
from synth import Trace, to_bytes, write_trace
from values import assert_identical

FRAMES = ("events", "memory", "flows", "counters")


def rich_trace() -> dict:
    t = Trace()
    t.device(0)
    t.step(1, 0, 100, gpu=(30, 60))
    t.op("aten::mm", 10, 20, input_dims=[[2, 3], [3, 4]])
    t.launch(20, 5, 30, 40, flow=True, blocks_per_sm=0.5, occupancy=40)
    t.python("train.py(3): step", 0, 100, python_id=1)
    t.memory(12, 512, 0x1000, 512, 2 << 20)
    t.add({"ph": "C", "name": "counter", "pid": 1, "ts": 5, "args": {"a": 1.5}})
    return t.build()


def assert_same_tables(a, b) -> None:
    """Equal to the dtype: categories included (object, as the parser makes them; pandas 3 would
    read them back from Arrow as `str`, which analyses turn into numpy arrays more slowly)."""
    for name in FRAMES:
        fa, fb = getattr(a, name), getattr(b, name)
        assert list(fa.columns) == list(fb.columns), name
        for col in fa.columns:
            assert fa[col].dtype == fb[col].dtype, (name, col, fa[col].dtype, fb[col].dtype)
            if isinstance(fa[col].dtype, pd.CategoricalDtype):
                assert fa[col].cat.categories.dtype == fb[col].cat.categories.dtype == object, (name, col)
        pd.testing.assert_frame_equal(fa, fb)
    assert a.metadata == b.metadata
    assert a.warnings == b.warnings


class Reads:
    """Counts read_trace_bytes calls (a cache hit makes none)."""

    def __init__(self, monkeypatch, fail: bool = False):
        self.calls = 0
        self.fail = fail
        real = load_module.read_trace_bytes

        def counting(path, max_bytes):
            self.calls += 1
            if self.fail:
                raise AssertionError("the trace file was read: expected a cache hit")
            return real(path, max_bytes)

        monkeypatch.setattr(load_module, "read_trace_bytes", counting)


@pytest.fixture
def trace_file(tmp_path):
    path = write_trace(tmp_path / "logdir", "run", "worker0", 1700000000000, rich_trace())
    st = path.stat()
    return str(path), st.st_size, st.st_mtime


def test_second_load_comes_from_cache(tmp_path, trace_file, monkeypatch):
    cache = str(tmp_path / "cache")
    first = load_trace(*trace_file, cache_dir=cache)
    Reads(monkeypatch, fail=True)
    second = load_trace(*trace_file, cache_dir=cache)
    assert_same_tables(first, second)
    assert overview(first) == overview(second)


def test_progress_reaches_one_and_a_hit_reads_nothing(tmp_path, trace_file, monkeypatch):
    cache = str(tmp_path / "cache")
    seen: list[float] = []
    load_trace(*trace_file, cache_dir=cache, on_progress=seen.append)
    assert seen and seen[-1] == pytest.approx(1.0)
    reads = Reads(monkeypatch)
    load_trace(*trace_file, cache_dir=cache)
    assert reads.calls == 0


@pytest.mark.parametrize("change", [
    pytest.param(lambda path, size, mtime: (path, size, mtime + 1.0), id="mtime"),
    pytest.param(lambda path, size, mtime: (path, size + 1, mtime), id="size"),
    pytest.param(lambda path, size, mtime: (path.replace("worker0.", "worker0-copy."), size, mtime), id="path"),
])
def test_changed_identity_is_a_miss(tmp_path, trace_file, monkeypatch, change):
    cache = str(tmp_path / "cache")
    load_trace(*trace_file, cache_dir=cache)
    reads = Reads(monkeypatch)
    path, size, mtime = change(*trace_file)
    if path != trace_file[0]:
        # a different path string for the same bytes (what a moved file looks like)
        os.link(trace_file[0], path)
    load_trace(path, size, mtime, cache_dir=cache)
    assert reads.calls == 1
    assert entry_key(path, size, mtime) != entry_key(*trace_file)


def test_rewritten_file_is_reparsed(tmp_path, monkeypatch):
    cache = str(tmp_path / "cache")
    t = Trace()
    t.step(1, 0, 100)
    path = write_trace(tmp_path, "run", "w", 1, t.build())
    st = path.stat()
    assert len(load_trace(str(path), st.st_size, st.st_mtime, cache_dir=cache).events) == 1
    t.op("aten::mm", 10, 20)
    write_trace(tmp_path, "run", "w", 1, t.build())
    os.utime(path, (st.st_atime, st.st_mtime + 5))
    st = path.stat()
    reads = Reads(monkeypatch)
    assert len(load_trace(str(path), st.st_size, st.st_mtime, cache_dir=cache).events) == 2
    assert reads.calls == 1


def test_without_cache_dir_every_load_reads(trace_file, monkeypatch):
    reads = Reads(monkeypatch)
    load_trace(*trace_file)
    load_trace(*trace_file)
    assert reads.calls == 2


class DirectWrites:
    """Files of a block or more written around the page cache (a staging buffer of one block, so that
    a table's bytes take several flushes and end in a padded one); records the files put in O_DIRECT mode,
    and with `refuse` ("direct" or "write") plays a file system that refuses that mode, or writes in it."""

    def __init__(self, monkeypatch, refuse: str = ""):
        self.direct: list[str] = []
        real_fcntl, real_write = fcntl.fcntl, os.write

        def setting(fd, command, arg=0):
            if command == fcntl.F_SETFL and arg & os.O_DIRECT:
                if refuse == "direct":
                    raise OSError(22, "Invalid argument")
                self.direct.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
            return real_fcntl(fd, command, arg)

        def writing(fd, data):
            if refuse == "write" and real_fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
                raise OSError(22, "Invalid argument")
            return real_write(fd, data)

        monkeypatch.setattr(entry_module, "_STAGE_BYTES", entry_module._BLOCK)
        monkeypatch.setattr(fcntl, "fcntl", setting)
        monkeypatch.setattr(os, "write", writing)


@pytest.mark.skipif(not hasattr(os, "O_DIRECT") or not Path("/proc/self/fd").exists(), reason="Linux's O_DIRECT")
@pytest.mark.parametrize("refuse", ["", "direct", "write"])
def test_files_written_around_the_page_cache_read_back_the_same(tmp_path, trace_file, monkeypatch, refuse):
    parsed = load_trace(*trace_file)
    cache = tmp_path / "cache"
    writes = DirectWrites(monkeypatch, refuse)
    assert_same_tables(load_trace(*trace_file, cache_dir=str(cache)), parsed)
    entry = next(cache.iterdir())
    big = sorted(p.name for p in entry.iterdir() if p.stat().st_size >= entry_module._BLOCK)
    assert "events.arrow" in big
    assert sorted(writes.direct) == ([] if refuse == "direct" else big)
    Reads(monkeypatch, fail=True)
    assert_same_tables(load_trace(*trace_file, cache_dir=str(cache)), parsed)  # the entry, checked and mapped
    # An item big enough to go direct is read back the same, from a new process's view of the entry.
    derivation = Derivation(open_entry(str(cache), entry.name), lambda: parsed, "worker0")
    tree = derivation.get("optree")
    assert (entry / derivation.written["optree"]).stat().st_size >= entry_module._BLOCK
    assert [n for n in writes.direct if n.startswith(".optree-")] == ([] if refuse == "direct" else [ANY])
    again = Derivation(open_entry(str(cache), entry.name), lambda: parsed, "worker0")
    assert again.stored("optree")[0]
    assert_identical(again.get("optree"), tree)


def test_one_entry_per_key_and_no_temporary_leftovers(tmp_path, trace_file):
    cache = tmp_path / "cache"
    load_trace(*trace_file, cache_dir=str(cache))
    load_trace(*trace_file, cache_dir=str(cache))
    assert [p.name for p in cache.iterdir()] == [entry_key(*trace_file)]


def test_what_killed_writers_left_is_swept_once_stale(tmp_path, trace_file):
    cache = tmp_path / "cache"
    load_trace(*trace_file, cache_dir=str(cache))
    key = entry_key(*trace_file)
    left = [cache / f".{key}-k2j4_x1q", cache / f".{'0' * 32}-damaged-1a2b3c4d", cache / ".optree-8sd7f6ab"]
    left[0].mkdir()
    (left[0] / "events.arrow").write_bytes(b"half")
    left[1].mkdir()
    left[2].write_bytes(b"half an item")
    kept = [cache / ".hidden-by-someone-else.txt", cache / ".optree-8sd7f6ab.bak", cache / "notes"]  # not names our writers give
    kept[0].write_text("x")
    kept[1].write_text("x")
    kept[2].mkdir()
    assert sweep(str(cache)) == 0, "a temporary just written may belong to a writer still at work"
    old = os.stat(cache).st_mtime - 2 * STALE_S
    for path in left + kept:
        os.utime(path, (old, old))
    assert sweep(str(cache)) == 3
    assert sorted(p.name for p in cache.iterdir()) == sorted([key, *(p.name for p in kept)])
    assert load_trace(*trace_file, cache_dir=str(cache)) is not None


def test_damaged_entry_is_a_miss(tmp_path, trace_file, monkeypatch):
    cache = tmp_path / "cache"
    first = load_trace(*trace_file, cache_dir=str(cache))
    (cache / entry_key(*trace_file) / "events.arrow").write_bytes(b"not arrow")
    reads = Reads(monkeypatch)
    again = load_trace(*trace_file, cache_dir=str(cache))
    assert reads.calls == 1
    assert_same_tables(first, again)


def test_unwritable_cache_dir_is_not_an_error(tmp_path, trace_file):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    tables = load_trace(*trace_file, cache_dir=str(blocker))
    assert len(tables.events) > 0


def truncated_trace_bytes() -> bytes:
    t = Trace()
    for i in range(5):
        t.op("aten::add", i * 10, 5)
    data = to_bytes(t.build())
    return data[: data.rindex(b'"aten::add"')]


def test_cached_warnings_survive(tmp_path):
    # a truncated trace: the recovery warning must come back from the cache too
    data = truncated_trace_bytes()
    path = write_trace(tmp_path, "run", "w", 1, data, gz=False)
    st = path.stat()
    cache = str(tmp_path / "cache")
    first = load_trace(str(path), st.st_size, st.st_mtime, cache_dir=cache)
    second = load_trace(str(path), st.st_size, st.st_mtime, cache_dir=cache)
    assert any("cut short" in w for w in first.warnings)
    assert second.warnings == first.warnings


# Damaged entries: each is detected, logged with the reason, removed, and rebuilt from the trace.

def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def flip_value(name: str, value: bytes) -> Callable[[Path, TraceTables], None]:
    """Flip one byte of the first place `value` is stored in file `name`: a wrong number, valid Arrow."""
    def corrupt(entry: Path, tables: TraceTables) -> None:
        offset = (entry / name).read_bytes().index(value)
        _flip(entry / name, offset + len(value) - 1)
    return corrupt


def truncate(name: str, keep: float) -> Callable[[Path, TraceTables], None]:
    def corrupt(entry: Path, tables: TraceTables) -> None:
        data = (entry / name).read_bytes()
        (entry / name).write_bytes(data[: int(len(data) * keep)])
    return corrupt


def append(name: str, extra: bytes) -> Callable[[Path, TraceTables], None]:
    return lambda entry, tables: (entry / name).write_bytes((entry / name).read_bytes() + extra)


def edit_meta(edit: Callable[[Any], Any]) -> Callable[[Path, TraceTables], None]:
    """Rewrite meta.json as valid JSON after `edit` (which changes the document in place or returns another)."""
    def corrupt(entry: Path, tables: TraceTables) -> None:
        doc = json.loads((entry / "meta.json").read_bytes())
        new = edit(doc)
        (entry / "meta.json").write_text(json.dumps(doc if new is None else new))
    return corrupt


def _set_key(doc: Any, key: str, value: Any = ...) -> None:
    """Set (or with no value, drop) `key` wherever it occurs in a JSON document."""
    if isinstance(doc, dict):
        if key in doc:
            if value is ...:
                del doc[key]
            else:
                doc[key] = value
        for child in doc.values():
            _set_key(child, key, value)
    elif isinstance(doc, list):
        for child in doc:
            _set_key(child, key, value)


def rewrite_with(change: Callable[[TraceTables], TraceTables]) -> Callable[[Path, TraceTables], None]:
    """Replace the entry with one written from changed tables: a well-formed entry of the wrong shape
    (as a parser whose columns changed without a version bump would leave)."""
    def corrupt(entry: Path, tables: TraceTables) -> None:
        shutil.rmtree(entry)
        write_entry(str(entry.parent), entry.name, change(tables))
        assert entry.is_dir()
    return corrupt


def with_events(edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[TraceTables], TraceTables]:
    return lambda tables: dataclasses.replace(tables, events=edit(tables.events.copy()))


def _remove(name: str) -> Callable[[Path, TraceTables], None]:
    return lambda entry, tables: (entry / name).unlink()


def _empty_folder(entry: Path, tables: TraceTables) -> None:
    shutil.rmtree(entry)
    entry.mkdir()


def _file_for_folder(entry: Path, tables: TraceTables) -> None:
    shutil.rmtree(entry)
    entry.write_bytes(b"not a folder")


def _folder_for_file(entry: Path, tables: TraceTables) -> None:
    (entry / "flows.arrow").unlink()
    (entry / "flows.arrow").mkdir()


def _extra_folder(entry: Path, tables: TraceTables) -> None:
    (entry / "extra").mkdir()
    (entry / "extra" / "file").write_bytes(b"x")


CORRUPTIONS = [
    pytest.param(flip_value("events.arrow", struct.pack("<d", 40.0)), "events.arrow",
                 id="flipped-byte-events-column"),
    pytest.param(flip_value("memory.arrow", struct.pack("<d", 2 << 20)), "memory.arrow",
                 id="flipped-byte-memory-column"),
    pytest.param(flip_value("counters.arrow", struct.pack("<d", 1.5)), "counters.arrow",
                 id="flipped-byte-counters-column"),
    pytest.param(flip_value("flows.arrow", b"ac2g"), "flows.arrow", id="flipped-byte-flows-category"),
    pytest.param(flip_value("meta.json", b"H100"), "meta.json", id="flipped-byte-meta-metadata"),
    pytest.param(truncate("events.arrow", 0.5), "events.arrow", id="truncated-events"),
    pytest.param(truncate("counters.arrow", 0.0), "counters.arrow", id="empty-counters-file"),
    pytest.param(truncate("meta.json", 0.5), "meta.json", id="truncated-meta"),
    pytest.param(truncate("meta.json", 0.0), "meta.json", id="empty-meta"),
    pytest.param(append("memory.arrow", b"\0" * 64), "memory.arrow", id="bytes-appended-to-memory"),
    pytest.param(_remove("events.arrow"), "events.arrow", id="missing-events-file"),
    pytest.param(_remove("meta.json"), "meta.json", id="missing-meta"),
    pytest.param(lambda entry, tables: (entry / "extra.arrow").write_bytes(b"x"), "extra.arrow", id="extra-file"),
    pytest.param(_extra_folder, "extra", id="extra-folder"),
    pytest.param(_folder_for_file, "flows.arrow", id="folder-where-a-file-should-be"),
    pytest.param(_empty_folder, "meta.json", id="empty-entry-folder"),
    pytest.param(_file_for_folder, "not a folder", id="file-where-the-entry-folder-should-be"),
    pytest.param(edit_meta(lambda doc: _set_key(doc, "warnings")), "meta.json", id="meta-without-warnings"),
    pytest.param(edit_meta(lambda doc: _set_key(doc, "metadata")), "meta.json", id="meta-without-metadata"),
    pytest.param(edit_meta(lambda doc: _set_key(doc, "warnings", "oops")), "meta.json", id="meta-warnings-a-string"),
    pytest.param(edit_meta(lambda doc: _set_key(doc, "warnings", [1])), "meta.json", id="meta-warning-a-number"),
    pytest.param(edit_meta(lambda doc: _set_key(doc, "metadata", [])), "meta.json", id="meta-metadata-a-list"),
    pytest.param(edit_meta(lambda doc: [doc]), "meta.json", id="meta-a-list"),
    pytest.param(edit_meta(lambda doc: {**doc, "surprise": 1}), "meta.json", id="meta-unknown-key"),
    pytest.param(lambda entry, tables: (entry / "meta.json").write_bytes(b"\x00\xffgarbage{"), "meta.json",
                 id="meta-garbage"),
    pytest.param(rewrite_with(with_events(lambda e: e.drop(columns=["dur"]))), "dur", id="column-missing"),
    pytest.param(rewrite_with(with_events(lambda e: e.assign(extra=1))), "extra", id="column-extra"),
    pytest.param(rewrite_with(with_events(lambda e: e.assign(dur=e["dur"].astype("int64")))), "dur",
                 id="column-wrong-dtype"),
    pytest.param(rewrite_with(with_events(lambda e: e.assign(name=e["name"].astype(object)))), "name",
                 id="category-stored-as-text"),
    pytest.param(rewrite_with(with_events(lambda e: e[list(reversed(e.columns))])), "events", id="columns-reordered"),
    pytest.param(rewrite_with(lambda t: dataclasses.replace(t, memory=t.events)), "memory",
                 id="frame-of-another-table"),
]


class Loads:
    """Loads a trace through the cache, counting the times the trace file itself is read."""

    def __init__(self, cache: Path, trace_file: tuple[str, int, float], monkeypatch) -> None:
        self.cache, self.trace_file = cache, trace_file
        self.reads = Reads(monkeypatch)

    def load(self) -> tuple[TraceTables, int]:
        self.reads.calls = 0
        tables = load_trace(*self.trace_file, cache_dir=str(self.cache))
        return tables, self.reads.calls


def assert_rebuilt(loads: Loads, fresh: TraceTables, caplog, reason: str) -> None:
    """The damaged entry is not used: the trace is parsed again, the reason is logged, and the entry
    written in its place is a good one (the next load is a hit with the same tables)."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="profboard"):
        again, reads = loads.load()
    assert reads == 1, "a damaged cache entry was used instead of parsing the trace again"
    assert_same_tables(fresh, again)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("profboard")]
    assert any(reason in m for m in messages), (reason, messages)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="profboard"):
        hit, reads = loads.load()
    assert reads == 0, "the entry was not rebuilt"
    assert_same_tables(fresh, hit)
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert [p.name for p in loads.cache.iterdir()] == [entry_key(*loads.trace_file)], "leftovers in the cache folder"


@pytest.mark.parametrize(("corrupt", "reason"), CORRUPTIONS)
def test_damaged_entry_is_detected_and_rebuilt(tmp_path, trace_file, monkeypatch, caplog, corrupt, reason):
    cache = tmp_path / "cache"
    fresh = load_trace(*trace_file)
    load_trace(*trace_file, cache_dir=str(cache))
    corrupt(cache / entry_key(*trace_file), fresh)
    assert_rebuilt(Loads(cache, trace_file, monkeypatch), fresh, caplog, reason)


def test_a_flipped_byte_anywhere_is_caught(tmp_path, trace_file, monkeypatch, caplog):
    # Spread over every file of the entry: Arrow headers, column data, padding, footers and meta.json.
    cache = tmp_path / "cache"
    fresh = load_trace(*trace_file)
    load_trace(*trace_file, cache_dir=str(cache))
    entry = cache / entry_key(*trace_file)
    loads = Loads(cache, trace_file, monkeypatch)
    for name in sorted(p.name for p in entry.iterdir()):
        size = (entry / name).stat().st_size
        for offset in sorted({*range(0, size, max(1, size // 12)), size - 1}):
            _flip(entry / name, offset)
            assert_rebuilt(loads, fresh, caplog, name)


def test_each_meta_key_missing_or_mistyped_is_caught(tmp_path, trace_file, monkeypatch, caplog):
    cache = tmp_path / "cache"
    fresh = load_trace(*trace_file)
    load_trace(*trace_file, cache_dir=str(cache))
    entry = cache / entry_key(*trace_file)
    loads = Loads(cache, trace_file, monkeypatch)
    keys = list(json.loads((entry / "meta.json").read_bytes()))
    for key in keys:
        good = json.loads((entry / "meta.json").read_bytes())
        for wrong in (..., None, "text", 7, 0.5, True, [], {}):
            if wrong is not ... and type(wrong) is type(good[key]):
                continue
            edit_meta(lambda doc: _set_key(doc, key, wrong))(entry, fresh)  # `...` drops the key
            assert_rebuilt(loads, fresh, caplog, "meta.json")


def test_a_symlink_for_the_entry_is_removed_not_followed(tmp_path, trace_file, monkeypatch, caplog):
    cache = tmp_path / "cache"
    fresh = load_trace(*trace_file)
    load_trace(*trace_file, cache_dir=str(cache))
    entry = cache / entry_key(*trace_file)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "meta.json").write_text("{}")
    shutil.rmtree(entry)
    entry.symlink_to(precious)
    assert_rebuilt(Loads(cache, trace_file, monkeypatch), fresh, caplog, "events.arrow")
    assert (precious / "meta.json").read_text() == "{}"


# Unreadable entries. Root reads anything: under root the child loses the capabilities that
# override file modes (dropped from its bounding set, so its exec starts without them).
_UNREADABLE_CHILD = r"""
import json, sys
import pandas as pd
from profboard.server.trace import entry as entry_module
from profboard.server.trace import load as load_module
from profboard.server.trace.load import load_trace

path, size, mtime, cache = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
reads = []
real = load_module.read_trace_bytes
load_module.read_trace_bytes = lambda *a: reads.append(1) or real(*a)
fresh = load_trace(path, size, mtime)
out = []
for _ in range(2):
    reads.clear()
    tables = load_trace(path, size, mtime, cache_dir=cache)
    for name in ("events", "memory", "flows", "counters"):
        pd.testing.assert_frame_equal(getattr(tables, name), getattr(fresh, name))
    assert (tables.metadata, tables.warnings) == (fresh.metadata, fresh.warnings)
    out.append(len(reads))
print(json.dumps(out))
"""


def _without_file_mode_override() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="file modes and capabilities as Linux has them")
@pytest.mark.parametrize("what", ["files", "folder", "meta"])
def test_unreadable_entry_is_rebuilt(tmp_path, trace_file, what):
    cache = tmp_path / "cache"
    load_trace(*trace_file, cache_dir=str(cache))
    entry = cache / entry_key(*trace_file)
    for target in {"files": list(entry.iterdir()), "folder": [entry], "meta": [entry / "meta.json"]}[what]:
        target.chmod(0)
    path, size, mtime = trace_file
    child = subprocess.run([sys.executable, "-c", _UNREADABLE_CHILD, path, str(size), repr(mtime), str(cache)],
                           capture_output=True, text=True,
                           preexec_fn=_without_file_mode_override if os.geteuid() == 0 else None)
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == [1, 0], child.stderr
    assert "Traceback" not in child.stderr
    assert "parsing the trace again" in child.stderr, child.stderr


def test_summary_of_a_damaged_entry_has_the_right_numbers_and_no_traceback(tmp_path, trace_file):
    logdir, cache = str(Path(trace_file[0]).parents[1]), tmp_path / "cache"

    def summary() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "profboard.server.cli", "summary", logdir,
                               "--cache-dir", str(cache), "--json"], capture_output=True, text=True)

    first = summary()
    assert first.returncode == 0, first.stderr
    entry = cache / entry_key(*trace_file)
    for corrupt in (edit_meta(lambda doc: _set_key(doc, "warnings")),
                    flip_value("events.arrow", struct.pack("<d", 40.0))):
        corrupt(entry, None)
        damaged = summary()
        assert damaged.returncode == 0, damaged.stderr
        assert "Traceback" not in damaged.stderr, damaged.stderr
        assert "parsing the trace again" in damaged.stderr, damaged.stderr
        assert json.loads(damaged.stdout) == json.loads(first.stdout)
        again = summary()
        assert (again.returncode, again.stderr, again.stdout) == (0, "", first.stdout)


def test_server_shows_damaged_entries_ready_with_the_right_numbers(tmp_path, start_server):
    # One run per damage, and a clean copy whose answers they must match (a different path: its own entry).
    from profboard.server.logdir import discover

    logdir, cache = tmp_path / "logdir", tmp_path / "cache"
    damages = {
        "no_warnings": edit_meta(lambda doc: _set_key(doc, "warnings")),
        "flipped": flip_value("events.arrow", struct.pack("<d", 40.0)),
        "missing_column": rewrite_with(with_events(lambda e: e.drop(columns=["dur"]))),
        "empty_folder": _empty_folder,
    }
    for run in ["clean", *damages]:
        write_trace(logdir, run, "worker0", 1700000000000, rich_trace())
    for name, run in discover(str(logdir)).items():
        f = run.file("worker0", "1")
        tables = load_trace(f.path, f.size, f.mtime, cache_dir=str(cache))
        if name in damages:
            damages[name](cache / entry_key(f.path, f.size, f.mtime), tables)
    server = start_server(logdir, tmp_path, expect=["clean", *damages], cache_dir=cache)
    try:
        runs = server.runs()
        assert {name: r["status"] for name, r in runs.items()} == {name: "ready" for name in ["clean", *damages]}
        paths = ["overview", "recommendations", "operators", "kernels", "modules", "modules/optree", "memory/curve",
                 "trace/lanes", "trace/window"]
        clean = {path: server.get(f"/api/{path}", {"run": "clean"}) for path in paths}
        assert [p for p, answer in clean.items() if answer.status_code == 200] == paths
        for name in damages:
            assert runs[name]["views"] == runs["clean"]["views"]
            for path in paths:
                answer = server.get(f"/api/{path}", {"run": name})  # fails on a 500
                assert answer.status_code == 200, (name, path, answer.text)
                assert answer.json() == clean[path].json(), (name, path)
        assert "Traceback" not in server.log()
        assert server.log().count("parsing the trace again") == len(damages), server.log()
    finally:
        server.stop()
