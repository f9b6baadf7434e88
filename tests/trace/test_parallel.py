"""Reading a trace in pieces, on helper processes (server/trace/parallel.py), gives exactly the
tables a one-process load of the whole array gives: on the repository's real traces, on
synthetic ones, on damaged and odd ones, on one whose strings hold the cut pattern, and when a
helper dies. Rows that start at the same time keep the order of a one-process load."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from profboard.server.trace import decode, load, parallel, read
from profboard.server.trace.decode import decode_trace
from profboard.server.trace.parse import parse_trace_bytes, parse_trace_file
from profboard.server.trace.tables import build_tables
from synth import Trace, legacy_training, to_bytes

REPO = Path(__file__).resolve().parents[2]
REAL = sorted([*REPO.glob("examples/logdir/*/*.pt.trace.json.gz"), *REPO.glob("tests/data/*/*/*.pt.trace.json.gz")])


@pytest.fixture(scope="module")
def helpers():
    started = parallel.Helpers.start(1)
    yield started
    started.pool.shutdown()


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of a few KB, so that small traces are cut into many."""
    monkeypatch.setattr(parallel, "PIECE_BYTES", 4096)


def cut_in_a_few_dozen(monkeypatch, data: bytes) -> None:
    """Pieces of a 40th of the trace's event array: a few dozen pieces, each holding many kinds of events,
    are cut and joined as thousands would be (4 KB pieces of the real traces took a minute and a half)."""
    monkeypatch.setattr(parallel, "PIECE_BYTES", len(decode.locate_events(data).array) // 40)


@pytest.fixture(params=["whole", "chunked"])
def read_chunk(request, monkeypatch):
    """Both orders of a one-process load: the whole array read at once, or (as for an array over
    WHOLE_DECODE_BYTES) CHUNK_EVENTS at a time, here a few events so that chunks end inside pieces."""
    if request.param == "chunked":
        monkeypatch.setattr(decode, "WHOLE_DECODE_BYTES", 0)
        monkeypatch.setattr(decode, "CHUNK_EVENTS", 7)
    return request.param


def one_piece(data: bytes):
    """The tables of a one-process load that reads the whole array as one piece."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parallel, "PIECE_BYTES", 1 << 40)
        return build_tables(decode_trace(data))


def assert_same(a, b) -> None:
    for name in ("events", "memory", "flows", "counters"):
        x, y = getattr(a, name), getattr(b, name)
        pd.testing.assert_frame_equal(x, y, check_exact=True, check_categorical=True)
        for column in x.columns:
            if isinstance(x[column].dtype, pd.CategoricalDtype):  # same categories in the same order
                assert x[column].cat.categories.tolist() == y[column].cat.categories.tolist(), (name, column)
    assert a.metadata == b.metadata
    assert a.warnings == b.warnings


def cut(array: bytes | memoryview, piece_bytes: int) -> list[tuple[int, int]]:
    return parallel.cut_points(lambda start, stop: array[start:stop], len(array), piece_bytes)


def pieces_of(data: bytes) -> int:
    located = decode.locate_events(data)
    return len(cut(located.array, parallel.PIECE_BYTES)) if located else 0


@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parent.name}/{p.name.split('.')[0]}")
def test_a_real_trace_comes_out_the_same(helpers, read_chunk, monkeypatch, path):
    data = gzip.decompress(path.read_bytes())
    cut_in_a_few_dozen(monkeypatch, data)
    assert pieces_of(data) > 20
    assert_same(one_piece(data), parse_trace_bytes(data, helpers=helpers))


def test_events_that_start_together_keep_the_order_of_one_process(helpers, small_pieces, monkeypatch):
    """A one-process load read events CHUNK_EVENTS at a time, grouped them by category in order
    of first appearance in the chunk, then sorted them by start (stable); pieces must not change
    that order. Here ops a1, a2 and kernel k start at 5: grouped, the ops come first."""
    t = Trace()
    t.op("a1", 5, 1)
    t.kernel("k", 5, 1)
    t.op("a2", 5, 1)
    for i in range(300):  # enough for several pieces
        t.op("filler", 10 + i, 1)
    data = to_bytes(t.build())
    assert parse_trace_bytes(data, helpers=helpers).events["name"].tolist()[:3] == ["a1", "a2", "k"]
    # chunks of two events: [a1, k] then [a2, ...], so k comes before a2
    monkeypatch.setattr(decode, "WHOLE_DECODE_BYTES", 0)
    monkeypatch.setattr(decode, "CHUNK_EVENTS", 2)
    assert parse_trace_bytes(data, helpers=helpers).events["name"].tolist()[:3] == ["a1", "k", "a2"]


def event(**fields):
    base = {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 1}
    base.update(fields)
    return base


def busy(*odd: dict) -> list:
    """Ops, kernels, flows, memory records and counters in many pieces, with `odd` events among them."""
    t = legacy_training(4) if len(odd) % 2 else Trace()
    for i in range(150):
        t.op("aten::mm" if i % 3 else "aten::add", i * 10, 5 + i % 4)
        t.launch(i * 10 + 1, 2, i * 10 + 4, 3, flow=True)
        if i % 10 == 0:
            t.memory(i * 10 + 2, 256, 0x1000 + i, 256 * i, 1 << 20)
            t.add({"ph": "C", "name": "util", "pid": 0, "ts": i * 10, "args": {"value": i / 150}})
            t.add({"ph": "M", "name": "thread_name", "pid": 1000, "tid": i, "args": {"name": f"t{i}"}})
        if i % 37 == 0:
            t.events.extend(odd)
    return t.build()["traceEvents"]


HOSTILE = {
    "wrong-types": busy(event(name=123, ts=5), event(name="ok", cat=None, ts=6),
                        event(name="big", args={"External id": 2**70}, ts=7)),
    "not-objects": busy(42, "text", None, ["an", "array"]),
    "bad-ts-dur": busy(event(name="neg", dur=-5), event(name="no-ts", ts=None), {"ph": "X", "name": "no-dur", "ts": 3}),
    "begin-end": busy({"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 0}, {"ph": "E", "pid": 1, "tid": 1, "ts": 1}),
    "string-ids": busy(event(name="a", pid="1000", tid="7"), event(name="b", pid=1000, tid=7, ts=2)),
    "memory-beyond-int64": busy({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5,
                                 "args": {"Addr": 2**64, "Bytes": 512}}),
    "long-names": busy(event(name="aten::" + "x" * 20_000, ts=1), event(name="aten::" + "x" * 20_001, ts=2)),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_odd_events_come_out_the_same(helpers, small_pieces, read_chunk, case):
    data = to_bytes({"traceEvents": HOSTILE[case]})
    assert pieces_of(data) > 20
    assert_same(one_piece(data), parse_trace_bytes(data, helpers=helpers))


@pytest.mark.parametrize("case", ["nan-tokens", "not-utf8", "lone-surrogate", "cut-short", "bare-array",
                                  "bare-array-cut-short", "events-key-twice"])
def test_damaged_documents_come_out_the_same(helpers, small_pieces, read_chunk, case):
    """Damage that only a pass over the whole document finds (decode.py) is found when it lies
    in a piece far into the array too."""
    events = busy()
    late = len(events) * 3 // 4
    events[late] = event(name="MARK", ts=5)
    data = to_bytes({"traceEvents": events, "traceName": "x"})
    data = {
        "nan-tokens": lambda d: d.replace(b'"MARK", "pid": 1, "tid": 1, "ts": 5, "dur": 1',
                                          b'"MARK", "pid": 1, "tid": 1, "ts": 5, "dur": NaN'),
        "not-utf8": lambda d: d.replace(b"MARK", b"b\xff\xfec"),
        "lone-surrogate": lambda d: d.replace(b"MARK", rb"b\ud800c"),
        "cut-short": lambda d: d[:d.index(b"MARK") + 40],
        "bare-array": lambda d: to_bytes(events),
        "bare-array-cut-short": lambda d: to_bytes(events)[:-200],
        "events-key-twice": lambda d: d[:-1] + b', "traceEvents": [' + json.dumps(event(name="last")).encode() + b"]}",
    }[case](data)
    assert pieces_of(data) > 20 or case in ("cut-short", "bare-array-cut-short")
    assert_same(one_piece(data), parse_trace_bytes(data, helpers=helpers))


def test_a_string_holding_the_cut_pattern_is_read_at_true_event_boundaries(helpers, small_pieces, read_chunk,
                                                                          monkeypatch):
    split = []
    monkeypatch.setattr(parallel, "split_events", lambda array: split.append(1) or decode.split_events(array))
    data = to_bytes({"traceEvents": [event(name='weird"}, {"name', ts=i) for i in range(400)] + busy()})
    assert pieces_of(data) > 20
    assert_same(one_piece(data), parse_trace_bytes(data, helpers=helpers))
    assert split


@pytest.fixture
def file_pieces(monkeypatch):
    """Files of any size are read a piece at a time from the file."""
    monkeypatch.setattr(read, "FILE_PIECES_MIN_BYTES", 0)


@pytest.mark.parametrize("case", ["real", "bare-array", "odd", "cut-pattern-in-a-string", "nan-tokens", "cut-short"])
def test_a_file_read_a_piece_at_a_time_comes_out_the_same(helpers, small_pieces, file_pieces, read_chunk, tmp_path,
                                                          monkeypatch, case):
    """Pieces of a big local file are read from it by the process that decodes them; a file that
    is not plainly shaped or not valid JSON is read whole instead."""
    events = busy(event(name=123, ts=5), 42)
    data = {
        "real": lambda: gzip.decompress(REAL[0].read_bytes()),
        "bare-array": lambda: to_bytes(events),
        "odd": lambda: to_bytes({"traceEvents": events, "traceName": "x"}),
        "cut-pattern-in-a-string": lambda: to_bytes({"traceEvents": [event(name='a"}, {"b', ts=i) for i in range(400)]}),
        "nan-tokens": lambda: to_bytes({"traceEvents": events}).replace(b'"ts":5,', b'"ts":NaN,'),
        "cut-short": lambda: to_bytes({"traceEvents": events})[:-300],
    }[case]()
    if case == "real":
        cut_in_a_few_dozen(monkeypatch, data)
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(data)
    file = read.open_trace_file(str(path))
    assert file is not None
    plainly_shaped = case in ("real", "bare-array", "odd")
    assert (parse_trace_file(file, helpers=helpers) is not None) == plainly_shaped
    assert_same(one_piece(data), load.parse_trace(str(path), helpers=helpers))


def test_a_file_changed_while_it_is_read_is_read_again_whole(helpers, small_pieces, file_pieces, tmp_path):
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(to_bytes({"traceEvents": busy()}))
    file = read.open_trace_file(str(path))
    with path.open("ab") as grown:
        grown.write(b" ")
    with pytest.raises(read.FileChanged):
        file.read(0, 10)
    assert parse_trace_file(file, helpers=helpers) is None
    assert_same(one_piece(path.read_bytes()), load.parse_trace(str(path), helpers=helpers))


def test_cut_points_cover_the_array_between_its_brackets():
    array = b' [ {"a": 1},\n {"b": 2} ,{"c": [3, {"d": 4}]}\n ] '
    pieces = cut(array, 1)
    assert [array[s:e].strip() for s, e in pieces] == [b'{"a": 1}', b'{"b": 2}', b'{"c": [3, {"d": 4}]}']
    assert cut(b"[]", 1) == [(1, 1)]
    assert cut(b'{"not": "an array"}', 1) == []
    # only JSON whitespace: a form feed between events is not valid JSON, so no cut there
    assert cut(b'[{"a": 1},\x0c{"b": 2}]', 1) == [(1, 19)]


def test_a_dead_helper_means_one_process_not_a_failed_load(small_pieces):
    dying = parallel.Helpers.start(1)
    dying.pool.submit(int).result()  # the helper is up
    for process in list(dying.pool._processes.values()):  # no public handle on the processes
        process.kill()
        process.join()
    data = to_bytes({"traceEvents": busy()})
    try:
        split = parse_trace_bytes(data, helpers=dying)
    finally:
        dying.pool.shutdown()
    assert dying.broken
    assert_same(one_piece(data), split)


@pytest.fixture
def two_threads(monkeypatch):
    """Pieces read by two threads of this process, as a load without helpers on two cores reads them."""
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    threads = []
    read_on_threads = parallel._read_on_threads
    monkeypatch.setattr(parallel, "_read_on_threads", lambda *a: threads.append(a[1]) or read_on_threads(*a))
    return threads


@pytest.mark.parametrize("path", REAL[:2], ids=lambda p: f"{p.parent.name}/{p.name.split('.')[0]}")
def test_pieces_read_on_threads_come_out_the_same(two_threads, read_chunk, monkeypatch, path):
    data = gzip.decompress(path.read_bytes())
    cut_in_a_few_dozen(monkeypatch, data)
    assert_same(one_piece(data), parse_trace_bytes(data))
    assert two_threads == [2]


@pytest.mark.parametrize("case", ["not-utf8", "nan-tokens"])
def test_damage_found_on_threads_is_handled_as_in_one_thread(two_threads, small_pieces, case):
    """A piece read leniently (text that is not UTF-8) or not valid JSON (NaN: the document is then read
    whole by decode_trace) on one of the threads."""
    events = busy()
    events[len(events) // 2] = event(name="MARK", ts=5, dur="DUR")
    data = to_bytes({"traceEvents": events})
    data = data.replace(b"MARK", b"b\xff\xfec") if case == "not-utf8" else data.replace(b'"DUR"', b"NaN")
    assert_same(one_piece(data), parse_trace_bytes(data))
    assert two_threads
