"""How many bytes a value holds in this process: what the memory budget charges for a trace's tables,
items and memoised answers (server/provider.py), and the order a loader stores items in (server/derived.py)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:
    import pandas


def held_bytes(value: Any) -> int:
    """Bytes a value holds in this process: arrays over memory of their own (not views on a mapped
    file, which is the OS's), Python objects by their size, walking containers (dataclasses too: a
    trace's tables are one)."""
    seen: dict[int, Any] = {}  # holding what it saw, so that no id is reused meanwhile

    def size(v: Any) -> int:
        if id(v) in seen:
            return 0
        seen[id(v)] = v
        if isinstance(v, np.ndarray):
            return _array_bytes(v) + (sum(size(x) for x in v.ravel()) if v.dtype == object else 0)
        if type(v).__module__.partition(".")[0] == "pandas":  # "pandas" itself for its public classes
            held = _pandas_bytes(v, size)
            if held is not None:
                return held
        if isinstance(v, dict):
            return sys.getsizeof(v) + sum(size(k) + size(x) for k, x in v.items())
        if isinstance(v, (list, tuple, set)):
            return sys.getsizeof(v) + sum(size(x) for x in v)
        if hasattr(v, "__dataclass_fields__"):
            return sys.getsizeof(v) + sum(size(getattr(v, f)) for f in v.__dataclass_fields__)
        return sys.getsizeof(v)

    return size(value)


def _pandas_bytes(v: Any, size: Callable[[Any], int]) -> int | None:
    """What a pandas frame or array holds (None: another pandas object). pandas is imported here, for a
    value of its own, not above: the server charges a stored overview before pandas is in the process
    (server/items.py); and an import, unlike a look into sys.modules, waits while another thread is
    still importing it."""
    import pandas as pd

    if isinstance(v, pd.DataFrame):
        return sum(size(_values(v.iloc[:, i], pd)) for i in range(v.shape[1]))
    if isinstance(v, pd.Categorical):
        return _array_bytes(v._codes) + int(v.categories.memory_usage(deep=True))
    if isinstance(v, pd.api.extensions.ExtensionArray):
        return int(v.nbytes)
    return None


def _values(column: pandas.Series, pd: Any) -> Any:
    return column.array if isinstance(column.dtype, pd.CategoricalDtype) or not isinstance(column.dtype, np.dtype) \
        else column.to_numpy()


def _array_bytes(array: np.ndarray) -> int:
    base = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    # A chain that ends in another object's buffer (an Arrow buffer over a mapped file) holds no memory of its own.
    return int(array.nbytes) if isinstance(base, np.ndarray) else 0
