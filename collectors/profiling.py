"""A profiler set up the way profboard reads best, user annotations, text tables and a chrome
trace export that works after the profiler's own handler has saved the trace."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
from pathlib import Path
from typing import Any, TextIO

import torch
from torch.profiler import ProfilerActivity, _ExperimentalConfig, profile, record_function, schedule, tensorboard_trace_handler


def worker_name() -> str | None:
    """`rank<N>` inside a distributed job, else None (the handler then uses `<host>_<pid>`)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return f"rank{torch.distributed.get_rank()}"
    rank = os.environ.get("RANK")
    return f"rank{rank}" if rank is not None and rank.isdigit() else None


def make_profiler(logdir: str | os.PathLike, run: str, *, wait: int = 1, warmup: int = 1, active: int = 3,
                  repeat: int = 1, record_shapes: bool = True, profile_memory: bool = True, with_stack: bool = True,
                  with_modules: bool = True, with_flops: bool = True, gzip: bool = True,
                  activities: list[ProfilerActivity] | None = None, sync_events: bool = False) -> profile:
    """A `torch.profiler.profile` that writes `logdir/run/<worker>.<time>.pt.trace.json[.gz]`,
    one file per `active` window, through `tensorboard_trace_handler`. Call `prof.step()` once
    per training step. CUDA is profiled when available. Each trace names its host (`hostname`).
    The paths written are kept in `prof.profboard_traces` (export_trace reads them). `sync_events`
    records CUDA synchronizations as events of their own (category `cuda_sync`: which stream or event
    the host or a stream waited on), which the critical path of a step follows."""
    folder = Path(logdir) / run
    folder.mkdir(parents=True, exist_ok=True)
    if activities is None:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    handler = tensorboard_trace_handler(str(folder), worker_name=worker_name(), use_gzip=gzip)
    written: list[Path] = []

    def on_trace_ready(prof: profile) -> None:
        before = set(folder.iterdir())
        handler(prof)
        written.extend(sorted(set(folder.iterdir()) - before))

    prof = profile(activities=activities,
                   schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
                   on_trace_ready=on_trace_ready, record_shapes=record_shapes, profile_memory=profile_memory,
                   with_stack=with_stack, with_modules=with_modules, with_flops=with_flops,
                   **({"experimental_config": _ExperimentalConfig(enable_cuda_sync_events=True)} if sync_events else {}))
    # The machine, for the Distributed view's topology: rank<N> worker names do not say which ranks
    # share a host. Newer PyTorch also writes it (`host_name`); older versions do not.
    prof.preset_metadata_json("hostname", json.dumps(socket.gethostname()))
    prof.profboard_traces = written  # type: ignore[attr-defined]
    return prof


def marked(name: str) -> record_function:
    """A user annotation shown on the Trace view and in the operator tables:
    `with marked("data"): ...`, or `@marked("loss")` on a function."""
    return record_function(name)


def export_trace(prof: profile, path: str | os.PathLike) -> Path:
    """Write the profile's chrome trace to `path` (gzip when it ends in .gz). When the
    profiler's handler already saved it (torch refuses a second save: "Trace is already
    saved"), the handler's newest file is copied instead."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        target = path.with_suffix("") if path.suffix == ".gz" else path
        prof.export_chrome_trace(str(target))
        if target != path:
            with open(target, "rb") as src, gzip.open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
            target.unlink()
        return path
    except RuntimeError as err:
        if "already saved" not in str(err):
            raise
    saved = getattr(prof, "profboard_traces", None)
    if not saved:
        raise RuntimeError("the profiler's handler already saved this trace and it is not known where: "
                           "make the profiler with profboard.collectors.make_profiler, or export before "
                           "the handler runs") from None
    _copy_trace(saved[-1], path)
    return path


def _copy_trace(source: Path, path: Path) -> None:
    opener_in = gzip.open if source.suffix == ".gz" else open
    opener_out = gzip.open if path.suffix == ".gz" else open
    with opener_in(source, "rb") as src, opener_out(path, "wb") as dst:
        shutil.copyfileobj(src, dst)


# Python frames and module ranges that with_stack records: not operators, and the outermost
# (the interpreter's, the test runner's) would fill any top-N table.
_NOT_AN_OPERATOR = re.compile(r"^(?:<built-in |nn\.Module: |.*\(\d+\): )")


def _operators(averages: Any) -> Any:
    """The key averages without Python frames (filtered in place: the list keeps its settings)."""
    averages[:] = [a for a in averages if not _NOT_AN_OPERATOR.match(a.key)]
    return averages


def print_top_tables(prof: profile, n: int = 15, file: TextIO | None = None) -> str:
    """Print (to `file`, default stdout) and return the top `n` operators by device time
    (when a device was profiled), by CPU time, and by CPU time per input shape."""
    averages = _operators(prof.key_averages())
    has_device = any(getattr(a, "device_time_total", 0) > 0 for a in averages)
    parts: list[tuple[str, Any, str]] = []
    if has_device:
        parts.append(("Top operators by device time", averages, "device_time_total"))
    parts.append(("Top operators by CPU time", averages, "cpu_time_total"))
    parts.append(("Top operators by input shape (CPU time)", _operators(prof.key_averages(group_by_input_shape=True)),
                  "cpu_time_total"))
    text = "\n".join(f"{title}\n{table.table(sort_by=key, row_limit=n)}" for title, table, key in parts)
    print(text, file=file)
    return text
