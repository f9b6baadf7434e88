"""Tests on event names, evaluated once per distinct name and broadcast to every row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable

import numpy as np
import pandas as pd
import re2


def name_mask(names: pd.Series, predicate: Callable[[str], bool]) -> np.ndarray:
    """Per row of a categorical name column: the predicate's answer (False for absent names)."""
    flags = np.array([predicate(str(c)) for c in names.cat.categories] + [False], dtype=bool)
    return flags[names.cat.codes.to_numpy()]  # code -1 (no name) reads the last flag, False


def names_at(names: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The names at `rows` of a categorical name column (NaN where absent), as an object array;
    the column's own to_numpy() would first make an object per row of the trace."""
    return np.asarray(names.array[rows], dtype=object)


class BadPattern(ValueError):
    """A regular expression that RE2 cannot compile; the message says why."""


def _re2_options():
    options = re2.Options()
    options.case_sensitive = False
    options.never_nl = True  # a match never runs from one name into the next (see regex_mask)
    options.log_errors = False
    return options


def regex_mask(texts: Sequence[str], pattern: str) -> np.ndarray:
    """Per text: whether the regular expression `pattern` (case-insensitive; `^` and `$` at each
    text's start and end) matches part of it. Raises BadPattern.

    RE2 runs in time linear in the text whatever the pattern, so no pattern can hold the server
    (Python's `re` backtracks: `(a*)*b` takes exponential time). RE2 has no backreferences or
    lookaround. The texts are searched as one newline-joined buffer, resuming after each hit at
    the next text, so the work is one pass plus one call per matching text."""
    try:
        compiled = re2.compile(b"(?m)" + pattern.encode("utf-8", "surrogatepass"), _re2_options())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else b""
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise BadPattern(text or "not a valid pattern") from None
    if compiled.search(b"") is not None:  # matches the empty text: part of every text
        return np.ones(len(texts), dtype=bool)
    hits = np.zeros(len(texts), dtype=bool)
    # Texts holding a newline (rare) are searched one by one: the joined buffer separates by it.
    single = [i for i, t in enumerate(texts) if "\n" in t]
    for i in single:
        hits[i] = compiled.search(texts[i].encode("utf-8", "surrogatepass")) is not None
    rest = np.setdiff1d(np.arange(len(texts)), single) if single else np.arange(len(texts))
    encoded = [texts[i].encode("utf-8", "surrogatepass") for i in rest]
    starts = np.cumsum([0] + [len(e) + 1 for e in encoded], dtype=np.int64)
    joined = b"\n".join(encoded)
    pos = 0
    while (match := compiled.search(joined, pos)) is not None:
        index = int(np.searchsorted(starts, match.start(), side="right")) - 1
        hits[rest[index]] = True
        pos = int(starts[index + 1])
    return hits
