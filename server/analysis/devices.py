"""Which GPU a device event ran on: its `device` arg, or on old traces its process id."""

from __future__ import annotations

import numpy as np
import pandas as pd


def device_of_kernels(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per device event at `rows` of the events table: the GPU it ran on (reading only the two
    columns: a frame of the rows would copy every column)."""
    device = events["device"].to_numpy()[rows]
    missing = device < 0
    if missing.any():
        # Old traces without args.device: the GPU's pid is its index.
        pids = pd.to_numeric(events["pid"].iloc[rows].astype(str), errors="coerce").to_numpy()
        device = np.where(missing & np.isfinite(pids), np.nan_to_num(pids, nan=-1), device).astype(np.int64)
    return device
