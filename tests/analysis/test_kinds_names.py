"""Masks on the events table's kind and name columns (server/analysis/kinds.py, names.py): the same
answers as the plain numpy/pandas ways they replace, absent names included."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from profboard.server.analysis.kinds import of_kinds
from profboard.server.analysis.names import name_mask, names_at
from profboard.server.trace.schema import DEVICE_KINDS, HOST_OP_KINDS, LAUNCH_KINDS, Kind

KIND_SETS = [(), (Kind.KERNEL,), LAUNCH_KINDS, DEVICE_KINDS, HOST_OP_KINDS, tuple(Kind)]


@pytest.mark.parametrize("kinds", KIND_SETS, ids=lambda ks: "+".join(k.name for k in ks) or "none")
def test_of_kinds_is_isin(kinds):
    kind = np.random.default_rng(0).integers(0, len(Kind), 500).astype(np.int8)
    assert of_kinds(kind, kinds).tolist() == np.isin(kind, kinds).tolist()


def _names() -> pd.Series:
    # "b" never occurs (an unused category); row 3 has no name (code -1).
    return pd.Series(pd.Categorical(["a", "c", "a", None, "c:x"], categories=["a", "b", "c", "c:x"]))


def test_name_mask_answers_per_row_and_false_without_a_name():
    assert name_mask(_names(), lambda n: n.startswith("c")).tolist() == [False, True, False, False, True]
    assert name_mask(_names(), lambda n: True).tolist() == [True, True, True, False, True]


def test_name_mask_of_a_column_without_categories():
    empty = pd.Series(pd.Categorical([None, None], categories=[]))
    assert name_mask(empty, lambda n: True).tolist() == [False, False]


@pytest.mark.parametrize("rows", [[], [0], [4, 3, 1, 1], list(itertools.chain(range(5), range(5)))])
def test_names_at_is_the_column_at_those_rows(rows):
    names = _names()
    got = names_at(names, np.array(rows, dtype=np.int64))
    assert got.dtype == object
    assert [str(v) for v in got] == [str(v) for v in names.to_numpy()[rows]]
