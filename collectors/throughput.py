"""Samples (and tokens) per second over the profiled window and over the whole run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Union

import torch
from torch.profiler import ProfilerAction, profile

_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
Mark = Union[float, "torch.cuda.Event"]


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
class _Step:
    end: Mark
    samples: int
    tokens: int
    recorded: bool  # whether the profiler recorded this step


@dataclass
class ThroughputMeter:
    """Call `start()` before the first step and `step(samples, tokens=0)` at the very end of
    each (after `prof.step()`).

    The first `warmup` steps are left out (compilation, cuDNN autotuning, allocator growth).
    With `prof`, the steps the profiler recorded are also counted apart: profiling slows them,
    so the two rates together show its overhead. On CUDA a step's end is a CUDA event, so step
    times are the device's and the meter adds no host-device synchronisation to the steps (it
    waits for the device only when asked for its numbers)."""

    warmup: int = 2
    prof: profile | None = None
    clock: Callable[[], float] = time.perf_counter
    _start: Mark | None = field(default=None, init=False)
    _steps: list[_Step] = field(default_factory=list, init=False)
    _recording: bool = field(default=False, init=False)  # whether the step now running is recorded

    def start(self) -> None:
        """Mark the first step's start (else the first step only starts the clock)."""
        self._start = self._mark()
        self._recording = self._profiler_records()

    def step(self, samples: int, tokens: int = 0) -> None:
        self._steps.append(_Step(self._mark(), samples, tokens, self._recording))
        self._recording = self._profiler_records()

    def summary(self) -> dict[str, Any]:
        """`epoch` and `profiled`: steps, samples, tokens, seconds and the per-second rates."""
        epoch, profiled = _Tally(), _Tally()
        previous = self._start
        for index, step in enumerate(self._steps):
            if previous is not None and index >= self.warmup:
                seconds = _seconds(previous, step.end)
                epoch.add(step.samples, step.tokens, seconds)
                if step.recorded:
                    profiled.add(step.samples, step.tokens, seconds)
            previous = step.end
        return {"warmup_steps": self.warmup, "epoch": epoch.rates(), "profiled": profiled.rates()}

    def report(self) -> str:
        """The summary as one line per window."""
        summary = self.summary()
        lines = []
        for name, rates in (("all steps", summary["epoch"]), ("profiled", summary["profiled"])):
            if not rates["steps"]:
                continue
            line = f"{name}: {rates['steps']} steps, {rates['samples_per_s']:,.1f} samples/s"
            if rates["tokens_per_s"]:
                line += f", {rates['tokens_per_s']:,.0f} tokens/s"
            lines.append(line)
        return "\n".join(lines) or "no steps measured (still in warm-up)"

    def _mark(self) -> Mark:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return self.clock()

    def _profiler_records(self) -> bool:
        return self.prof is not None and self.prof.current_action in _RECORDING


def _seconds(start: Mark, end: Mark) -> float:
    if isinstance(start, float) and isinstance(end, float):
        return end - start
    if isinstance(start, float) or isinstance(end, float):
        raise RuntimeError("ThroughputMeter: CUDA started between two steps; call start() once it is in use")
    end.synchronize()
    return start.elapsed_time(end) / 1000.0
