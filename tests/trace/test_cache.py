"""The on-disk parse cache (server/trace/cache.py, load.py): hits, misses and damaged entries."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from profboard.server.analysis.overview import overview
from profboard.server.trace import load as load_module
from profboard.server.trace.cache import cache_key
from profboard.server.trace.load import load_trace
from synth import Trace, to_bytes, write_trace

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
    assert cache_key(path, size, mtime) != cache_key(*trace_file)


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


def test_one_entry_per_key_and_no_temporary_leftovers(tmp_path, trace_file):
    cache = tmp_path / "cache"
    load_trace(*trace_file, cache_dir=str(cache))
    load_trace(*trace_file, cache_dir=str(cache))
    assert [p.name for p in cache.iterdir()] == [cache_key(*trace_file)]


def test_damaged_entry_is_a_miss(tmp_path, trace_file, monkeypatch):
    cache = tmp_path / "cache"
    first = load_trace(*trace_file, cache_dir=str(cache))
    (cache / cache_key(*trace_file) / "events.arrow").write_bytes(b"not arrow")
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

