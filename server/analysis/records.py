"""Plain JSON-safe values for analysis results: no NaN, no numpy scalars, sensible precision."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def clean(key: str, value: Any) -> Any:
    """NaN becomes None; times keep nanosecond precision (what traces record), ratios six digits."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            return None
        return round(value, 6 if key.endswith("_ratio") else 3)
    return value


def clean_row(row: dict[str, Any]) -> dict[str, Any]:
    return {key: clean(key, value) for key, value in row.items()}
