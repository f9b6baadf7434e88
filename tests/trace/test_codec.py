"""The codec of stored derived data (server/trace/codec.py): exact round trips, zero-copy arrays,
and nothing outside the allowlist written or read."""

from __future__ import annotations

import dataclasses
import math

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from profboard.server.trace import codec
from values import assert_identical


@dataclasses.dataclass(frozen=True)
class Point:
    x: np.ndarray
    label: str


@dataclasses.dataclass
class Other:
    value: int


CLASSES = {"Point": Point}


def round_trip(value):
    sink = pa.BufferOutputStream()
    codec.write_value(sink, value, CLASSES)
    return codec.read_value(sink.getvalue(), CLASSES)


VALUES = [
    pytest.param(None, id="none"),
    pytest.param([True, 0, -(2**70), 1.5, -0.0, "text", ""], id="scalars"),
    pytest.param([math.nan, math.inf, -math.inf], id="non-finite-floats"),
    pytest.param((1, (2, [3]), ()), id="tuples"),
    pytest.param({"a": 1, "b": {"c": [None]}}, id="plain-dict"),
    pytest.param({(0, 1): (2, 3), 4: "four", None: 1.0, "$a": 0}, id="dict-of-other-keys"),
    pytest.param([np.float64(1.25), np.int64(-3), np.bool_(True), np.int8(7), np.float64(math.nan)], id="numpy-scalars"),
    pytest.param(np.array([1.5, math.nan, -math.inf]), id="float-array"),
    pytest.param(np.arange(12, dtype=np.int32).reshape(3, 4), id="2d-array"),
    pytest.param(np.array([True, False, True]), id="bool-array"),
    pytest.param(np.array([], dtype=np.int64), id="empty-array"),
    pytest.param(np.array(["a", None, "ç"], dtype=object), id="text-array"),
    pytest.param(np.array([1, "a", math.nan, None], dtype=object), id="mixed-object-array"),
    pytest.param(Point(np.array([1.0, 2.0]), "p"), id="allowed-dataclass"),
    pytest.param(pd.DataFrame({"n": [1, 2, 3], "x": [0.5, math.nan, 2.0], "ok": [True, False, True],
                               "s": np.array(["a", None, "c"], dtype=object),
                               "c": pd.Categorical(["u", None, "u"], categories=pd.Index(["u", "v"], dtype=object))}),
                 id="frame"),
    pytest.param(pd.DataFrame({"a": [1.0]}).iloc[:0], id="empty-frame"),
    pytest.param(pd.DataFrame(index=pd.RangeIndex(2, 10, 3)), id="frame-without-columns"),
    pytest.param(pd.DataFrame({"s": pd.Series(["a", "b"], dtype="str")}), id="frame-of-pandas-strings"),
]


@pytest.mark.parametrize("value", VALUES)
def test_round_trip_is_exact(value):
    assert_identical(value, round_trip(value))


def test_arrays_are_read_zero_copy():
    sink = pa.BufferOutputStream()
    codec.write_value(sink, {"x": np.arange(1000, dtype=np.float64)}, CLASSES)
    data = sink.getvalue()
    x = codec.read_value(data, CLASSES)["x"]
    inside = np.frombuffer(data, dtype=np.uint8)
    assert np.shares_memory(x, inside)
    assert not x.flags.writeable


@pytest.mark.parametrize("value", [
    pytest.param({1, 2}, id="set"),
    pytest.param(object(), id="object"),
    pytest.param(Other(1), id="dataclass-not-allowed"),
    pytest.param(np.array(["2024-01-01"], dtype="datetime64[D]"), id="datetime-array"),
    pytest.param(np.array([1 + 2j]), id="complex-array"),
    pytest.param(pd.DataFrame({"a": [1]}, index=["x"]), id="frame-with-labels"),
    pytest.param(pd.DataFrame([[1, 2]], columns=["a", "a"]), id="frame-with-repeated-columns"),
    pytest.param(pd.Series([1]), id="series"),
])
def test_values_outside_the_allowlist_are_refused(value):
    with pytest.raises(codec.CodecError):
        codec.write_value(pa.BufferOutputStream(), value, CLASSES)


def forged(doc: object, arrays: list[pa.Array] = ()) -> pa.Buffer:
    """A file as someone else might write it: our layout around any JSON."""
    schema = pa.schema([pa.field(f"a{i}", a.type) for i, a in enumerate(arrays)],
                       metadata={b"profboard": msgspec.json.encode(doc)})
    batch = (pa.RecordBatch.from_arrays(list(arrays), schema=schema) if arrays
             else pa.RecordBatch.from_pylist([], schema=schema))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def one(values: pa.Array) -> pa.Array:
    return pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values)


@pytest.mark.parametrize("doc, arrays", [
    pytest.param({"$c": "Other", "fields": {"value": 1}}, [], id="class-not-allowed"),
    pytest.param({"$c": "os.system", "fields": {}}, [], id="class-by-path"),
    pytest.param({"$x": 1}, [], id="unknown-tag"),
    pytest.param({"$f": "1e999"}, [], id="float-tag-with-a-number"),
    pytest.param({"$s": "object", "v": 1}, [], id="scalar-of-object-dtype"),
    pytest.param({"$a": 0, "dtype": "object", "shape": [1]}, [one(pa.array([1]))], id="array-of-object-dtype"),
    pytest.param({"$a": 0, "dtype": "float64", "shape": [1]}, [one(pa.array([1], pa.int64()))], id="dtype-mismatch"),
    pytest.param({"$a": 0, "dtype": "int64", "shape": [1]}, [one(pa.array([None], pa.int64()))], id="array-with-nulls"),
    pytest.param({"$a": 0, "dtype": "int64", "shape": [1]}, [pa.array([1], pa.int64())], id="not-a-list-column"),
    pytest.param({"$df": {"columns": {"values": ["a"], "dtype": "object"}, "index": {"range": [0, 1, 1]},
                          "data": [{"$cat": {"$a": 0, "dtype": "int8", "shape": [1]},
                                    "categories": {"values": ["x"], "dtype": "object"}, "ordered": False}]}},
                 [one(pa.array([5], pa.int8()))], id="category-code-out-of-range"),
    pytest.param({"$df": {"columns": {"values": ["a"], "dtype": "category"}, "index": {"range": [0, 0, 1]}, "data": []}}, [],
                 id="labels-of-another-dtype"),
])
def test_foreign_files_are_refused(doc, arrays):
    with pytest.raises((codec.CodecError, KeyError, TypeError, ValueError)):
        codec.read_value(forged(doc, arrays), CLASSES)


def test_a_file_without_our_metadata_is_refused():
    sink = pa.BufferOutputStream()
    table = pa.table({"a": [1]})
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(codec.CodecError):
        codec.read_value(sink.getvalue(), CLASSES)
