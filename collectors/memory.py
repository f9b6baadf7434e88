"""A CUDA allocator snapshot around a block of code, for profboard's Memory Snapshot view."""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch


@contextmanager
def snapshot_memory(path: str | os.PathLike, max_entries: int = 100_000, stacks: str = "python"
                    ) -> Iterator[Path | None]:
    """Record the allocator's history while the block runs, then dump a snapshot pickle to
    `path` (put it in a run's folder: profboard shows it beside the traces). `max_entries`
    bounds the history kept; `stacks` is "python" or "all" (C++ frames too, slower).
    Without CUDA there is no allocator to record: warns and yields None."""
    if not torch.cuda.is_available():
        warnings.warn("snapshot_memory: CUDA is not available, no snapshot is written", stacklevel=3)
        yield None
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks=stacks)
    try:
        yield path
    finally:
        try:
            torch.cuda.memory._dump_snapshot(str(path))
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
