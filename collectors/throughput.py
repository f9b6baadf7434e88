"""Samples (and tokens) per second over the profiled window and over the whole run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.profiler import ProfilerAction, profile

_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


@dataclass
class _Tally:
    steps: int = 0
    samples: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def add(self, samples: int, tokens: int, seconds: float) -> None:
        self.steps += 1
        self.samples += samples
        self.tokens += tokens
        self.seconds += seconds

    def rates(self) -> dict[str, Any]:
        per_s = (lambda n: n / self.seconds) if self.seconds > 0 else (lambda n: None)
        return {"steps": self.steps, "samples": self.samples, "tokens": self.tokens, "seconds": self.seconds,
                "samples_per_s": per_s(self.samples), "tokens_per_s": per_s(self.tokens) if self.tokens else None}


@dataclass
class ThroughputMeter:
    """Call `start()` before the first step and `step(samples, tokens=0)` at the very end of
    each (after `prof.step()`).

    The first `warmup` steps are left out (compilation, cuDNN autotuning, allocator growth).
    With `prof`, the steps the profiler recorded are also counted apart: profiling slows them,
    so the two rates together show its overhead. On CUDA each step's end is synchronised, so
    a step's time is the device's, not the time to queue its kernels."""

    warmup: int = 2
    prof: profile | None = None
    clock: Callable[[], float] = time.perf_counter
    epoch: _Tally = field(default_factory=_Tally, init=False)
    profiled: _Tally = field(default_factory=_Tally, init=False)
    _seen: int = field(default=0, init=False)
    _last: float | None = field(default=None, init=False)
    _recording: bool = field(default=False, init=False)  # whether the step now running is recorded

    def start(self) -> None:
        """Mark the first step's start (else the first step only starts the clock)."""
        self._sync()
        self._last = self.clock()
        self._recording = self._profiler_records()

    def step(self, samples: int, tokens: int = 0) -> None:
        self._sync()
        now = self.clock()
        if self._last is not None and self._seen >= self.warmup:
            self.epoch.add(samples, tokens, now - self._last)
            if self._recording:
                self.profiled.add(samples, tokens, now - self._last)
        self._seen += 1
        self._last = now
        self._recording = self._profiler_records()

    def _profiler_records(self) -> bool:
        return self.prof is not None and self.prof.current_action in _RECORDING

    def summary(self) -> dict[str, Any]:
        """`epoch` and `profiled`: steps, samples, tokens, seconds and the per-second rates."""
        return {"warmup_steps": self.warmup, "epoch": self.epoch.rates(), "profiled": self.profiled.rates()}

    def report(self) -> str:
        """The summary as one line per window."""
        lines = []
        for name, rates in (("all steps", self.summary()["epoch"]), ("profiled", self.summary()["profiled"])):
            if not rates["steps"]:
                continue
            line = f"{name}: {rates['steps']} steps, {rates['samples_per_s']:,.1f} samples/s"
            if rates["tokens_per_s"]:
                line += f", {rates['tokens_per_s']:,.0f} tokens/s"
            lines.append(line)
        return "\n".join(lines) or "no steps measured (still in warm-up)"

    @staticmethod
    def _sync() -> None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
