"""A value as Arrow arrays and JSON, never pickle: how derived data is kept in a trace's store entry.

A value is written as one Arrow IPC file: its shape is JSON in the schema's metadata, its arrays are
the file's columns. Only an allowlist of types is written or read: None, bool, int, float (NaN and
infinities included), str, list, tuple, dict (any keys of these types), numpy arrays (bool, integers,
floats, any shape; object arrays of strings and None, or of other allowed values), numpy scalars,
pandas DataFrames with a RangeIndex (numeric, bool, object and categorical columns), and the
dataclasses the caller names. Anything else is refused when writing (CodecError), and an unknown
tag, class or dtype when reading: reading a file runs no code of the file's choosing, so a store on
shared storage written by another machine can at worst hold wrong numbers (which checksums catch
when they come from damage).

JSON tags are objects with one key starting with "$": {"$f": "nan"} a non-finite float, {"$t": [..]}
a tuple, {"$d": [[k, v], ..]} a dict whose keys are not all plain strings, {"$a": i, "dtype": d,
"shape": s} column i as an array, {"$o": [..], "shape": s} an object array of other values,
{"$s": dtype, "v": x} a numpy scalar, {"$df": ..} a DataFrame, {"$cat": ..} a categorical column, {"$str": i} a column of pandas' str dtype,
{"$c": name, "fields": {..}} a dataclass. A dict with a key starting with "$" is written as "$d".

Arrays are read back zero-copy: each is the only element of a large_list column of a one-row
batch, so its values are a slice of the (memory-mapped) file. Bools are stored as uint8.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Mapping

import msgspec
import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd

# Bump when the encoding changes: it is part of every stored item's version.
CODEC_VERSION = 1

_METADATA_KEY = b"profboard"
_NUMERIC = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                      "float32", "float64"})
# Column labels and categories: strings (object or pandas' str) or numbers.
_LABEL_DTYPES = frozenset({"object", "str", "int64", "float64"})
_SCALARS = {name: np.dtype(name).type for name in (*_NUMERIC, "bool")}


class CodecError(ValueError):
    """A value outside the allowlist (writing) or a file that is not one of ours (reading)."""


def _pandas() -> Any:
    """pandas, imported where a value is written or a DataFrame read: the server reads a stored trace's
    overview and views without it (server/items.py)."""
    import pandas

    return pandas


class _Encoder:
    def __init__(self, classes: Mapping[str, type]) -> None:
        self.classes = classes
        self.arrays: list[pa.Array] = []
        self.pd = _pandas()

    def array(self, values: pa.Array) -> int:
        self.arrays.append(pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values))
        return len(self.arrays) - 1

    def value(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, np.generic):
            return self.scalar(v)
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"$f": repr(v)}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, tuple):
            return {"$t": [self.value(x) for x in v]}
        if isinstance(v, dict):
            if all(isinstance(k, str) and not k.startswith("$") for k in v):
                return {k: self.value(x) for k, x in v.items()}
            return {"$d": [[self.value(k), self.value(x)] for k, x in v.items()]}
        if isinstance(v, np.ndarray):
            return self.ndarray(v)
        if isinstance(v, self.pd.DataFrame):
            return self.frame(v)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            name = type(v).__name__
            if self.classes.get(name) is not type(v):
                raise CodecError(f"class {type(v).__qualname__} is not in the codec's allowlist")
            return {"$c": name, "fields": {f.name: self.value(getattr(v, f.name)) for f in dataclasses.fields(v)}}
        raise CodecError(f"cannot store a value of type {type(v).__qualname__}")

    def scalar(self, v: np.generic) -> Any:
        name = v.dtype.name
        if name not in _SCALARS:
            raise CodecError(f"cannot store a numpy scalar of dtype {name}")
        return {"$s": name, "v": self.value(v.item())}

    def ndarray(self, v: np.ndarray) -> Any:
        shape = list(v.shape)
        flat = np.ascontiguousarray(v).reshape(-1)
        name = v.dtype.name
        if name == "bool":
            return {"$a": self.array(pa.array(flat.view(np.uint8))), "dtype": "bool", "shape": shape}
        if name in _NUMERIC:
            return {"$a": self.array(pa.array(flat)), "dtype": name, "shape": shape}
        if name == "object":
            if all(x is None or type(x) is str for x in flat):
                return {"$a": self.array(pa.array(flat, type=pa.large_string())), "dtype": "str", "shape": shape}
            return {"$o": [self.value(x) for x in flat], "shape": shape}
        raise CodecError(f"cannot store an array of dtype {v.dtype}")

    def frame(self, v: pd.DataFrame) -> Any:
        index = v.index
        if not isinstance(index, self.pd.RangeIndex):
            raise CodecError(f"cannot store a DataFrame indexed by {type(index).__name__}")
        if not v.columns.is_unique:
            raise CodecError("cannot store a DataFrame with repeated column labels")
        return {"$df": {"columns": self.labels(v.columns),
                        "data": [self.column(v.iloc[:, i]) for i in range(v.shape[1])],
                        "index": self.labels(index)}}

    def labels(self, index: pd.Index) -> Any:
        if isinstance(index, self.pd.RangeIndex):
            return {"range": [index.start, index.stop, index.step]}
        dtype = str(index.dtype)
        if dtype not in _LABEL_DTYPES:
            raise CodecError(f"cannot store labels of dtype {dtype}")
        return {"values": [self.value(x) for x in index.tolist()], "dtype": dtype}

    def column(self, s: pd.Series) -> Any:
        dtype = s.dtype
        if isinstance(dtype, self.pd.CategoricalDtype):
            return {"$cat": self.ndarray(np.asarray(s.array.codes)), "categories": self.labels(dtype.categories),
                    "ordered": bool(dtype.ordered)}
        if str(dtype) == "str":  # pandas' own strings: missing values are NaN
            text = s.to_numpy(dtype=object, na_value=None)
            return {"$str": self.array(pa.array(text, type=pa.large_string())), "length": len(text)}
        if not isinstance(dtype, np.dtype):
            raise CodecError(f"cannot store a column of dtype {dtype}")
        return self.ndarray(s.to_numpy())


class _Decoder:
    def __init__(self, classes: Mapping[str, type], columns: list[pa.Array]) -> None:
        self.classes = classes
        self.columns = columns

    def value(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict):
            return v
        tag = next((k for k in v if k.startswith("$")), None)  # plain dicts have no "$" keys
        if tag is not None:
            return self.tagged(tag, v)
        return {k: self.value(x) for k, x in v.items()}

    def tagged(self, tag: str, v: dict) -> Any:
        if tag == "$f":
            text = v["$f"]
            if text not in ("nan", "inf", "-inf"):
                raise CodecError(f"not a float: {text!r}")
            return float(text)
        if tag == "$t":
            return tuple(self.value(x) for x in v["$t"])
        if tag == "$d":
            return {_hashable(self.value(k)): self.value(x) for k, x in v["$d"]}
        if tag == "$a":
            return self.ndarray(v)
        if tag == "$o":
            out = np.empty(len(v["$o"]), dtype=object)
            out[:] = [self.value(x) for x in v["$o"]]
            return out.reshape(v["shape"])
        if tag == "$s":
            scalar = _SCALARS.get(v["$s"])
            if scalar is None:
                raise CodecError(f"not a scalar dtype: {v['$s']!r}")
            return scalar(self.value(v["v"]))
        if tag == "$df":
            return self.frame(v["$df"])
        if tag == "$c":
            cls = self.classes.get(v["$c"])
            if cls is None:
                raise CodecError(f"class {v['$c']!r} is not in the codec's allowlist")
            return cls(**{k: self.value(x) for k, x in v["fields"].items()})
        raise CodecError(f"unknown tag {tag!r}")

    def ndarray(self, v: dict) -> np.ndarray:
        column = self.columns[v["$a"]]
        if not isinstance(column, pa.LargeListArray) or len(column) != 1:
            raise CodecError(f"column {v['$a']} is not an array column")
        values = column.flatten()
        dtype = v["dtype"]
        if dtype == "str":
            if not pa.types.is_large_string(values.type):
                raise CodecError(f"column {v['$a']} holds {values.type}, not text")
            out = values.to_numpy(zero_copy_only=False)
        elif dtype == "bool" or dtype in _NUMERIC:
            stored = "uint8" if dtype == "bool" else dtype
            if values.type != pa.from_numpy_dtype(np.dtype(stored)) or values.null_count:
                raise CodecError(f"column {v['$a']} holds {values.type}, not {dtype}")
            out = values.to_numpy(zero_copy_only=True)
            if dtype == "bool":
                out = out.view(np.bool_)
        else:
            raise CodecError(f"not an array dtype: {dtype!r}")
        return out.reshape(v["shape"])

    def frame(self, v: dict) -> pd.DataFrame:
        pd = _pandas()
        index = self.labels(v["index"])
        if not isinstance(index, pd.RangeIndex):
            raise CodecError("a frame not indexed by a range")
        columns = self.labels(v["columns"])
        data = [self.column(c, len(index)) for c in v["data"]]
        if len(set(columns)) != len(columns) or len(columns) != len(data):
            raise CodecError("frame columns do not match their data")
        # One block per column: a frame built from a dict of arrays keeps them as they are (views
        # on the mapped file) instead of stacking same-dtype columns into a copy.
        frame = pd.DataFrame(dict(zip(columns, data)), index=index, copy=False)
        frame.columns = columns
        return frame

    def labels(self, v: dict) -> pd.Index:
        pd = _pandas()
        if "range" in v:
            return pd.RangeIndex(*v["range"])
        if v["dtype"] not in _LABEL_DTYPES:
            raise CodecError(f"not a labels dtype: {v['dtype']!r}")
        return pd.Index([self.value(x) for x in v["values"]], dtype=v["dtype"])

    def column(self, v: dict, length: int) -> Any:
        pd = _pandas()
        if "$cat" in v:
            codes = self.ndarray(v["$cat"])
            index = self.labels(v["categories"])
            if len(codes) and (codes.min() < -1 or codes.max() >= len(index)):
                raise CodecError("category codes out of range")
            values: Any = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(index, ordered=v["ordered"]),
                                                    validate=False)
        elif "$str" in v:
            values = pd.array(self.ndarray({"$a": v["$str"], "dtype": "str", "shape": [v["length"]]}), dtype="str")
        else:
            values = self.value(v)
        if len(values) != length:
            raise CodecError("a column of another length than its frame")
        return values


def _hashable(key: Any) -> Any:
    if isinstance(key, (list, dict, np.ndarray)):
        raise CodecError("a dict key that cannot be one")
    return key


def to_batch(value: Any, classes: Mapping[str, type]) -> pa.RecordBatch:
    """`value` as a one-row batch: its arrays as columns, its shape as JSON in the schema metadata."""
    encoder = _Encoder(classes)
    doc = msgspec.json.encode(encoder.value(value))
    names = [f"a{i}" for i in range(len(encoder.arrays))]
    schema = pa.schema([pa.field(n, a.type) for n, a in zip(names, encoder.arrays)], metadata={_METADATA_KEY: doc})
    if not encoder.arrays:
        return pa.RecordBatch.from_pylist([], schema=schema)
    return pa.RecordBatch.from_arrays(encoder.arrays, schema=schema)


def from_batch(batch: pa.RecordBatch, classes: Mapping[str, type]) -> Any:
    """The value `to_batch` wrote; arrays are views on the batch's buffers. Raises CodecError (or
    msgspec's DecodeError, KeyError, TypeError) on anything it did not write."""
    metadata = batch.schema.metadata or {}
    if _METADATA_KEY not in metadata:
        raise CodecError("not a stored value (no profboard metadata)")
    doc = msgspec.json.decode(metadata[_METADATA_KEY])
    return _Decoder(classes, list(batch.columns)).value(doc)


def write_value(sink: Any, value: Any, classes: Mapping[str, type]) -> None:
    """Write `value` as an Arrow IPC file to `sink` (a path or a writable file)."""
    batch = to_batch(value, classes)
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)


def read_value(data: pa.Buffer, classes: Mapping[str, type]) -> Any:
    """The value in an Arrow IPC file's bytes (e.g. a memory-mapped buffer), arrays zero-copy."""
    reader = pa.ipc.open_file(data)
    if reader.num_record_batches != 1:
        raise CodecError(f"{reader.num_record_batches} batches, not one")
    return from_batch(reader.get_batch(0), classes)
