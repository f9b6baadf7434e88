"""Decoding one trace on several processes (server/trace/parallel.py) gives exactly the tables a
one-process load gives: on a real trace, on one whose strings hold the cut pattern, and on one
with unreadable events in a piece."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from profboard.server.trace import parallel
from profboard.server.trace.decode import decode_trace
from profboard.server.trace.tables import build_tables
from synth import Trace, to_bytes

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures"
# the demo's resnet50_fp32, and the shared fixture's when ../shared is there
REAL = [pytest.param(REPO / "examples/logdir/resnet50_fp32", id="demo"),
        pytest.param(FIXTURES / "h100/resnet50_fp32", id="shared",
                     marks=pytest.mark.skipif(not (FIXTURES / "h100/resnet50_fp32").is_dir(),
                                              reason=f"fixture traces not found under {FIXTURES}"))]


@pytest.fixture(scope="module")
def helpers():
    started = parallel.Helpers.start(1)
    yield started
    started.pool.shutdown()


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of a few KB, so that small traces are cut into many."""
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "PIECE_BYTES", 4096)


def both(data: bytes, helpers):
    serial = build_tables(decode_trace(data))
    pieces = parallel.cut_points(memoryview(decode_trace(data).array), parallel.PIECE_BYTES)
    return serial, parallel.build_tables_parallel(decode_trace(data), helpers), len(pieces)


def assert_same(a, b) -> None:
    for name in ("events", "memory", "flows", "counters"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_categorical=True)
    assert a.metadata == b.metadata
    assert a.warnings == b.warnings


@pytest.mark.parametrize("run", REAL)
def test_a_real_trace_comes_out_the_same(helpers, small_pieces, run):
    data = gzip.decompress(sorted(run.glob("*.pt.trace.json.gz"))[0].read_bytes())
    serial, split, pieces = both(data, helpers)
    assert pieces > 100
    assert_same(serial, split)
    assert len(split.events) > 10_000 and len(split.memory) and len(split.flows)


def test_a_string_holding_the_cut_pattern_falls_back_to_one_process(helpers, small_pieces):
    t = Trace()
    for i in range(400):
        t.op("aten::mm" if i % 7 else 'weird"}, {"name', i * 10, 5)
    serial, split, pieces = both(to_bytes(t.build()), helpers)
    assert pieces > 2
    assert_same(serial, split)


def test_unreadable_events_in_pieces_are_counted_once_across_pieces(helpers, small_pieces):
    t = Trace()
    for i in range(400):
        t.op("aten::add", i * 10, 5)
        if i % 50 == 0:
            t.add({"ph": "X", "name": ["not", "a", "name"], "ts": {"bad": 1}, "dur": 1, "pid": 1, "tid": 1})
            t.add(["not", "an", "event"])
    serial, split, pieces = both(to_bytes(t.build()), helpers)
    assert pieces > 2
    assert_same(serial, split)
    assert "8 events could not be read and were skipped" in split.warnings
    assert "8 complete events had a missing, NaN or negative ts/dur and were skipped" in split.warnings


def test_cut_points_cover_the_array_between_its_brackets():
    array = b' [ {"a": 1},\n {"b": 2} ,{"c": [3, {"d": 4}]}\n ] '
    pieces = parallel.cut_points(array, 1)
    assert [array[s:e].strip() for s, e in pieces] == [b'{"a": 1}', b'{"b": 2}', b'{"c": [3, {"d": 4}]}']
    assert parallel.cut_points(b"[]", 1) == [(1, 1)]
    assert parallel.cut_points(b'{"not": "an array"}', 1) == []


def test_a_dead_helper_means_one_process_not_a_failed_load(small_pieces):
    dying = parallel.Helpers.start(1)
    dying.pool.submit(int).result()  # the helper is up
    for process in list(dying.pool._processes.values()):  # no public handle on the processes
        process.kill()
        process.join()
    t = Trace()
    for i in range(400):
        t.op("aten::mm", i * 10, 5)
    data = to_bytes(t.build())
    try:
        split = parallel.build_tables_parallel(decode_trace(data), dying)
    finally:
        dying.pool.shutdown()
    assert dying.broken
    assert_same(build_tables(decode_trace(data)), split)
