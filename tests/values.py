"""assert_identical: two values equal and of the same types all the way down, as what the trace's
store writes must read back (a tuple is no list, np.int64 no int, a frame keeps its dtypes)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd


def assert_identical(a: Any, b: Any, path: str = "value") -> None:
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), path
        if a.dtype == object:
            assert_identical(a.tolist(), b.tolist(), path)
        else:
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), path
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True, check_column_type=True, check_categorical=True)
        assert a.columns.dtype == b.columns.dtype, path
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_identical(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            assert_identical(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, (path, a, b)
