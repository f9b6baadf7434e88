"""The native scanner (server/trace/_scan.c, scan.py) gives a piece exactly the columns msgspec's typed
decode and columns.read_piece give it, and gives up (None) on every piece that path reads differently
from plain JSON, so that such pieces keep their lenient reading."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pandas as pd

from profboard.server.trace import parallel, scan
from profboard.server.trace.columns import ARG_DTYPES, Absent, Encoded, PieceColumns, read_piece
from profboard.server.trace.decode import decode_events, find_events
from profboard.server.trace.parallel import cut_points, read_text
from profboard.server.trace.parse import parse_trace_bytes

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "fixtures"
TRACES = sorted(p for root in (REPO / "examples", REPO / "tests" / "data", SHARED) if root.is_dir()
                for p in root.rglob("*.pt.trace.json*"))


def _column(value: Any, dtype: str | None) -> tuple:
    """A column as (kind, its values per row), absent columns spelled out as every row absent."""
    if isinstance(value, Absent):
        if dtype == "str":
            return ("texts", [None] * value.n)
        value = np.full(value.n, -1 if dtype == "int" else np.nan)
    if isinstance(value, Encoded):
        return ("texts", [None if c < 0 else value.values[c] for c in value.codes.tolist()])
    value = np.asarray(value)
    return ("numbers", value.dtype.kind, value.tobytes())


def _spelled_out(cols: PieceColumns) -> dict:
    tables = {t: {k: _column(v, ARG_DTYPES.get(k) if t == "x" else None) for k, v in getattr(cols, t).items()}
              for t in ("x", "mem", "flow")}
    return {**tables, "counter": {k: [repr(v) for v in values] for k, values in cols.counter.items()},
            **{k: getattr(cols, k) for k in ("count", "lenient", "skipped", "repaired", "unpaired_begin_end",
                                             "processes", "threads")}}


def _pieces(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    found = find_events(data)
    assert found is not None, path
    _, start, end = found
    array = memoryview(data)[start:end]
    return [b"[" + bytes(array[a:b]) + b"]" for a, b in cut_points(lambda a, b: array[a:b], len(array), 1 << 20)]


def test_the_install_builds_the_scanner():
    """make test installs profboard as a user would: with a C compiler at hand the scanner is built, so
    the tests below compare it rather than skip."""
    assert scan.available()


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_piece_of_a_real_trace_scans_to_what_the_typed_decode_reads(path):
    for text in _pieces(path):
        scanned = scan.scan_piece(text)
        assert scanned is not None, "a plain Kineto piece was not read by the scanner"
        assert _spelled_out(scanned) == _spelled_out(read_piece(decode_events(text)))


def _event(**fields: Any) -> dict:
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2, **fields}


# Pieces the scanner reads: each must come out as read_piece reads it.
READ_ALIKE = {
    "escapes and non-ASCII": json.dumps([_event(name='a "quoted"\\ name\n\t/\u00e9\u4e2d'), _event(name="é")]),
    "non-ASCII as UTF-8": json.dumps([_event(name="résumé ✓")], ensure_ascii=False),
    "ids as ints, texts, big ints and null": json.dumps(
        [_event(pid="host", tid=2**70), _event(pid=None), _event(pid=-0, tid="7")]),
    "flows, bp absent, null or given": json.dumps(
        [{"ph": "s", "cat": "ac2g", "id": 5, "pid": 0, "tid": 1, "ts": 1},
         {"ph": "f", "cat": "ac2g", "id": "5", "pid": 0, "tid": 1, "ts": 2, "bp": "e"},
         {"ph": "t", "cat": "fwdbwd", "id": None, "pid": 0, "tid": 1, "ts": 3, "bp": None}]),
    "the last of a key given twice": '[{"ph": "i", "ph": "X", "cat": "cpu_op", "ts": 1, "dur": 1, "ts": 3,'
                                     ' "args": {"External id": 4, "External id": 9}}]',
    "args every kind reads or not": json.dumps([
        _event(cat="kernel", args={"correlation": 3, "grid": [1, 2, 3], "block": None, "Input Dims": [[1]],
                                   "External id": 7, "Python id": 9}),
        _event(cat="cpu_op", args={"correlation": 3, "Input Dims": [[2, 3], []], "Input type": ["float", ""],
                                   "Call stack": "a.py(1): f", "Sequence number": 5, "Process Group Name": 0}),
        _event(cat="mystery", args={"correlation": 4, "Python parent id": None, "Process Group Name": "pg",
                                    "blocks per SM": 1.5, "est. achieved occupancy %": 50}),
        _event(cat="python_function", args={"Python id": 3, "Python parent id": None, "Python module id": 1}),
        _event(cat="cuda_runtime", args={"correlation": 3, "device": 0, "stream": 7, "grid": [1]})]),
    "spellings of PyTorch 1.x": json.dumps([
        _event(cat="cpu_op", args={"external id": 3, "Input dims": [[4]]}),
        _event(cat="cpu_op", args={"External id": 5, "Input Dims": [[5]], "Input dims": [[6]]})]),
    "numbers of every form": json.dumps(
        [_event(ts=t, dur=d) for t, d in ((1e5, 0), (1.5e-3, 2.5E+2), (-0.0, 1), (123456789012345678, 1),
                                          (5432469947939.005, 161.334), (0.1, 0.30000000000000004))]),
    "memory, counters, metadata, begin/end, unknown kinds": json.dumps([
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 5, "s": "t",
         "args": {"Device Type": 1, "Device Id": 0, "Addr": 123, "Bytes": 512, "Total Allocated": 1024,
                  "Total Reserved": 2048.0}},
        {"ph": "i", "name": "other", "pid": 1, "ts": 6},
        {"ph": "C", "name": "load", "pid": 1, "ts": 7, "args": {"GPU 0": 5, "note": "x", "flag": True}},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 2, "args": {"sort_index": 3}},
        {"ph": "M", "name": "process_labels", "pid": "1", "args": {"labels": "GPU 0"}},
        {"ph": "B", "name": "b", "pid": 1, "ts": 1}, {"ph": "E", "pid": 1, "ts": 2},
        {"ph": "Q", "pid": 1}, {}]),
    "an empty array": "[]",
    "whitespace everywhere": ' [ \n\t{ "ph" :"X" ,\r\n "ts":1 , "dur" : 2 , "args" : { } } ,{ } ] \n',
    "unknown values of any shape": json.dumps(
        [_event(extra={"a": [1, [2, {"b": None}], True, False, -1.5e3]}, args={"Concrete Inputs": ["", "1"],
                                                                               "x": {"y": [[[]]]}})]),
}

# Pieces the typed decode reads differently from plain JSON (it fails, or reads leniently), or that
# the scanner leaves to it: each must give None, and read_text must still give read_piece's columns.
LEFT_TO_MSGSPEC = {
    "text that is not UTF-8 in a name": b'[{"ph": "X", "name": "a\xff", "ts": 1, "dur": 1}]',
    "an escaped surrogate": b'[{"ph": "X", "name": "\\ud83d\\ude00", "ts": 1, "dur": 1}]',
    "a control character in a text": b'[{"ph": "X", "name": "a\x01", "ts": 1, "dur": 1}]',
    "a trailing comma": b'[{"ph": "X", "ts": 1, "dur": 1},]',
    "a leading zero": b'[{"ph": "X", "ts": 01, "dur": 1}]',
    "ts null": b'[{"ph": "X", "ts": null, "dur": 1}]',
    "args null": b'[{"ph": "X", "ts": 1, "dur": 1, "args": null}]',
    "args twice": b'[{"ph": "X", "ts": 1, "dur": 1, "args": {"correlation": 1}, "args": {"device": 2}}]',
    "a float where an int goes": b'[{"ph": "X", "ts": 1, "dur": 1, "args": {"correlation": 1.0}}]',
    "an int beyond 64 bits where an int goes": b'[{"ph": "X", "ts": 1, "dur": 1, "args": {"device": 9223372036854775808}}]',
    "a number out of range": b'[{"ph": "X", "ts": 1e400, "dur": 1}]',
    "a key spelled with escapes": b'[{"ph": "X", "ts": 1, "dur": 1, "args": {"\\u0063orrelation": 5}}]',
    "a text where a number goes": b'[{"ph": "X", "ts": "1", "dur": 1}]',
    "a float id": b'[{"ph": "s", "id": 1.5, "ts": 1}]',
    "an element that is not an object": b'[{"ph": "X", "ts": 1, "dur": 1}, 5]',
    "characters after the array": b'[{"ph": "X", "ts": 1, "dur": 1}] x',
    "a grid of texts": b'[{"ph": "X", "ts": 1, "dur": 1, "args": {"grid": ["1"]}}]',
    "deep nesting": b'[{"ph": "X", "ts": 1, "dur": 1, "x": ' + b"[" * 100 + b"]" * 100 + b"}]",
    "cut short": b'[{"ph": "X", "ts": 1, "dur": 1}, {"ph": "X", "ts": 2',
}


@pytest.mark.parametrize("case", READ_ALIKE)
def test_a_piece_the_scanner_reads_has_the_columns_of_the_typed_decode(case):
    text = READ_ALIKE[case].encode()
    scanned = scan.scan_piece(text)
    assert scanned is not None
    assert _spelled_out(scanned) == _spelled_out(read_piece(decode_events(text)))


@pytest.mark.parametrize("case", LEFT_TO_MSGSPEC)
def test_a_piece_the_typed_decode_reads_otherwise_is_left_to_it(case):
    text = LEFT_TO_MSGSPEC[case]
    assert scan.scan_piece(text) is None
    try:
        expected = _spelled_out(read_piece(decode_events(text)))
    except Exception as exc:  # noqa: BLE001 (invalid JSON: read_text must fail the same way)
        with pytest.raises(type(exc)):
            read_text(text)
    else:
        assert _spelled_out(read_text(text)) == expected


def test_decimal_numbers_convert_to_the_nearest_double():
    """The scanner converts short decimals by one exact division or multiplication and the rest in full;
    both must give the double nearest the decimal, as Python's float() does."""
    rng = random.Random(7)
    texts = ["0.1", "1e22", "1e23", "9007199254740993", "9007199254740993.0", "123456789012345678",
             "5e-324", "2.2250738585072014e-308", "1.7976931348623157e308", "4.35", "0.000001"]
    for _ in range(3000):
        digits = str(rng.randrange(1, 10 ** rng.randint(1, 19)))
        point = rng.randint(0, len(digits))
        texts.append(f"{digits[:point] or '0'}.{digits[point:] or '0'}e{rng.randint(-30, 30)}")
        texts.append(f"-{digits[:point] or '0'}.{digits[point:] or '0'}")
    events = [{"ph": "X", "dur": 1, "ts": 0} for _ in texts]
    text = json.dumps(events)
    for t in texts:
        text = text.replace('"ts": 0}', f'"ts": {t}}}', 1)
    scanned = scan.scan_piece(text.encode())
    assert scanned is not None
    assert scanned.x["ts"].tolist() == [float(t) for t in texts]


@pytest.mark.parametrize("path", sorted((REPO / "examples" / "logdir").glob("*/*.pt.trace.json.gz"))[:3],
                         ids=lambda p: p.parent.name)
def test_a_real_trace_has_the_tables_the_python_reader_gives_it(path, monkeypatch):
    """The pieces' columns joined (tables.py): categories in the same order, every column alike."""
    data = gzip.decompress(path.read_bytes())
    monkeypatch.setattr(parallel, "PIECE_BYTES", 64 << 10)  # many pieces, each scanned
    scanned = parse_trace_bytes(data)
    monkeypatch.setattr(parallel, "scan_piece", lambda text: None)
    read = parse_trace_bytes(data)
    for name in ("events", "memory", "flows", "counters"):
        a, b = getattr(scanned, name), getattr(read, name)
        pd.testing.assert_frame_equal(a, b, check_exact=True, check_categorical=True)
        for column in a.columns:
            if isinstance(a[column].dtype, pd.CategoricalDtype):
                assert a[column].cat.categories.tolist() == b[column].cat.categories.tolist(), (name, column)
    assert (scanned.metadata, scanned.warnings) == (read.metadata, read.warnings)


def test_damaged_pieces_are_read_as_the_typed_decode_reads_them_or_left_to_it():
    """Real events with bytes replaced, deleted or inserted at random (tokens that break JSON, strings,
    numbers or types): wherever the scanner reads the piece, msgspec's path reads it too, alike."""
    rng = random.Random(2026)
    data = gzip.decompress(next((REPO / "examples" / "logdir").glob("*/*.pt.trace.json.gz")).read_bytes())
    start = data.index(b"[", data.index(b'"traceEvents"'))
    base = data[start:start + 6000]
    base = base[:base.rfind(b"},") + 1] + b"]"
    tokens = [b'"', b"\\", b"\\ud800", b",", b"]", b"}", b"{", b":", b"null", b"true", b"1.5", b"1e400", b"\xff",
              b"\x01", b" ", b"9223372036854775808", b'"x"', b"-", b".", b'"args"', b'"ts"', b'"correlation"', b"[]"]
    read = 0
    for _ in range(600):
        text = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text))
            if rng.random() < 0.5:
                text[at:at + rng.randint(0, 3)] = rng.choice(tokens)
            else:
                del text[at:at + rng.randint(1, 4)]
        scanned = scan.scan_piece(bytes(text))
        if scanned is None:
            continue
        read += 1
        assert _spelled_out(scanned) == _spelled_out(read_piece(decode_events(bytes(text)))), bytes(text)
    assert read > 50  # the scanner still reads those a change left valid
