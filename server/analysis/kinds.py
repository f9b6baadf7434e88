"""Tests on event kinds (the events table's small-integer `kind` column)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..trace.schema import Kind


def of_kinds(kind: np.ndarray, kinds: Iterable[Kind]) -> np.ndarray:
    """Per row: whether its kind is one of `kinds` (np.isin's answer: one comparison per kind, where
    np.isin sorts or builds a table, three times slower on a trace's 2 M rows)."""
    out = np.zeros(len(kind), dtype=bool)
    for k in kinds:
        out |= kind == k
    return out
