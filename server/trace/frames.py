"""A table of a trace's store entry (server/trace/entry.py) as one Arrow record batch, and back as a pandas
frame whose columns are views on the mapped file: numeric columns and categorical codes are not copied;
only the categories become Python strings. Kept apart from the entry's layout and checks, which the
server uses to open stored traces and read their items without pandas (server/items.py).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .decode import decode_trace
from .entry import TABLES, Damaged
from .tables import build_tables


def read_frame(name: str, data: pa.Buffer) -> pd.DataFrame:
    """A table's frame whose columns are views on `data`; raises Damaged when its columns are not the
    parser's."""
    reader = pa.ipc.open_file(data)
    if reader.num_record_batches != 1:
        raise Damaged(f"{name}.arrow: {reader.num_record_batches} batches, not one")
    batch = reader.get_batch(0)
    expected = _expected_columns()[name]
    columns = {}
    for column, array in zip(batch.schema.names, batch.columns):
        dtype = dict(expected).get(column)
        columns[column] = _column(name, column, array, dtype)
    found = [(c, str(v.dtype)) for c, v in columns.items()]
    if found != [(c, d) for c, d in expected]:
        raise Damaged(f"{name}.arrow: {_column_mismatch(found, expected)}")
    # One block per column: a frame built from a dict keeps its arrays (views on the mapped file)
    # instead of stacking same-dtype columns into a copy.
    return pd.DataFrame(columns, copy=False)


def _column(table: str, name: str, array: pa.Array, dtype: str | None) -> Any:
    if pa.types.is_dictionary(array.type):
        indices, dictionary = array.indices, array.dictionary
        if not pa.types.is_integer(indices.type) or not pa.types.is_large_string(dictionary.type):
            raise Damaged(f"{table}.arrow: {name} is a dictionary of {array.type}")
        # The codes as written (-1 under the nulls), read off the buffer rather than converted.
        codes = np.frombuffer(indices.buffers()[1], dtype=indices.type.to_pandas_dtype(),
                              count=len(indices), offset=indices.offset * indices.type.byte_width)
        if len(codes) and (codes.min() < -1 or codes.max() >= len(dictionary)):
            raise Damaged(f"{table}.arrow: {name} has codes outside its categories")
        categories = pd.Index(dictionary.to_numpy(zero_copy_only=False), dtype=object)
        return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(categories), validate=False)
    if not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type) or pa.types.is_boolean(array.type)):
        raise Damaged(f"{table}.arrow: {name} is {array.type}")
    if array.null_count:
        raise Damaged(f"{table}.arrow: {name} has nulls")
    # Bools are bits in Arrow: the only columns copied.
    return array.to_numpy(zero_copy_only=not pa.types.is_boolean(array.type))


def frame_batch(frame: pd.DataFrame) -> pa.RecordBatch:
    """The table as one record batch: numbers as they are, categoricals as dictionaries of large strings."""
    arrays = []
    for column in frame.columns:
        values = frame[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            codes = np.asarray(values.array.codes)
            categories = pa.array(np.asarray(values.cat.categories, dtype=object), type=pa.large_string())
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), categories))
        else:
            arrays.append(pa.array(values.to_numpy()))
    return pa.RecordBatch.from_arrays(arrays, names=[str(c) for c in frame.columns])


def _columns(frame: pd.DataFrame) -> list[tuple[str, str]]:
    return [(str(name), str(dtype)) for name, dtype in frame.dtypes.items()]


def _column_mismatch(found: list[tuple[str, str]], expected: list[tuple[str, str]]) -> str:
    have, want = dict(found), dict(expected)
    parts = [f"missing columns {[c for c in want if c not in have]}",
             f"unexpected columns {[c for c in have if c not in want]}",
             f"wrong dtypes {[f'{c}: {have[c]}, not {d}' for c, d in want.items() if have.get(c, d) != d]}"]
    return "; ".join(p for p in parts if not p.endswith("[]")) or "columns out of order"


@functools.cache
def _expected_columns() -> dict[str, list[tuple[str, str]]]:
    """Columns and dtypes of each table as the parser makes them, taken from the tables of an
    empty trace so that they follow the parser."""
    empty = build_tables(decode_trace(b'{"traceEvents": []}'))
    return {name: _columns(getattr(empty, name)) for name in TABLES}
