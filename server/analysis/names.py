"""Tests on event names, evaluated once per distinct name and broadcast to every row."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd


def name_mask(names: pd.Series, predicate: Callable[[str], bool]) -> np.ndarray:
    """Per row of a categorical name column: the predicate's answer (False for absent names)."""
    flags = np.array([predicate(str(c)) for c in names.cat.categories], dtype=bool)
    codes = names.cat.codes.to_numpy()
    if len(flags) == 0:
        return np.zeros(len(codes), dtype=bool)
    return np.where(codes >= 0, flags[np.maximum(codes, 0)], False)
