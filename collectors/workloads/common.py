"""What every workload shares: the device, the profiled loop, and the line it reports."""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ..memory import snapshot_memory
from ..profiling import make_profiler, print_top_tables
from ..throughput import ThroughputMeter


@dataclass(frozen=True)
class Options:
    logdir: Path
    device: str  # "cuda" or "cpu"
    steps: int  # active (recorded) steps per span
    repeat: int  # spans
    warmup_steps: int  # untimed steps before the profiler starts (compilation, autotuning)
    tables: bool  # print the top-operator tables
    snapshot: bool = False  # dump an allocator snapshot of two steps after profiling
    sync_events: bool = False  # record CUDA synchronizations as trace events (make_profiler)

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"


def options(args: argparse.Namespace) -> Options:
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available (use --device cpu)")
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    return Options(Path(args.logdir), device, args.steps, args.repeat, args.warmup_steps, args.tables,
                   getattr(args, "snapshot", False), getattr(args, "sync_events", False))


# (wait, warmup) steps of the profiler's schedule before each active window.
WAIT, WARMUP = 1, 1


def profiled_run(opts: Options, run: str, step: Callable[[], Any], samples: int, tokens: int = 0,
                 wait: int = WAIT, warmup: int = WARMUP, **profiler: Any) -> dict[str, Any]:
    """Run `step` (one training step) for the profiler's whole schedule, after
    `opts.warmup_steps` untimed ones, writing `logdir/run`; returns what it measured.
    `profiler` overrides make_profiler's keywords (e.g. with_stack=False)."""
    for _ in range(opts.warmup_steps):
        step()
    prof = make_profiler(opts.logdir, run, wait=wait, warmup=warmup, active=opts.steps, repeat=opts.repeat,
                         sync_events=opts.sync_events, **profiler)
    meter = ThroughputMeter(warmup=0, prof=prof)
    started = time.perf_counter()
    with prof:
        meter.start()
        for _ in range((wait + warmup + opts.steps) * opts.repeat):
            step()
            prof.step()
            meter.step(samples, tokens)
    if opts.cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    if opts.tables:
        print_top_tables(prof, n=10)
    files = [str(p) for p in prof.profboard_traces]
    if opts.snapshot:
        files += _snapshot(opts.logdir / run, step)
    print(f"{run}: {len(files)} trace file(s) in {opts.logdir / run} ({seconds:.1f} s); {meter.report()}",
          file=sys.stderr)
    return {"run": run, "files": files, "seconds": seconds, "throughput": meter.summary()}


SNAPSHOT_STEPS = 2


def _snapshot(folder: Path, step: Callable[[], Any]) -> list[str]:
    """Record SNAPSHOT_STEPS more steps' allocations (outside the profiler, so the trace keeps its
    timing) into a gzipped snapshot in `folder`; the path, or nothing without CUDA."""
    raw = folder / "memory_snapshot.pickle"
    with snapshot_memory(raw) as path:
        if path is None:  # no CUDA: snapshot_memory has warned
            return []
        for _ in range(SNAPSHOT_STEPS):
            step()
    packed = raw.with_name(raw.name + ".gz")
    packed.write_bytes(gzip.compress(raw.read_bytes()))
    raw.unlink()
    return [str(packed)]


def autocast(opts: Options, amp: str):
    """bf16 autocast on the workload's device, or a no-op context."""
    return torch.autocast(opts.device, dtype=torch.bfloat16, enabled=amp == "bf16")
