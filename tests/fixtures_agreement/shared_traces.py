"""The shared fixture traces (`../shared/fixtures`), each read once per test run.

A test takes a trace through the session-scoped `fixture_trace` fixture (conftest.py), parametrised
indirectly by `every_trace(...)`, `first_trace(...)` or `over(traces(...))`. pytest then runs every
test of one trace together, across modules, so each trace is parsed, analysed and json-loaded once,
and only one is held at a time: the 110 MB trace's JSON takes about 0.6 GB as Python objects.
"""

from __future__ import annotations

import gzip
import json
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures"
T = TypeVar("T")
# the runs recorded with PyTorch 2.x
TORCH2_RUNS = ("h100/compile_graph_breaks", "h100/compile_resnet18", "h100/loss_sync_after", "h100/loss_sync_before",
               "h100/resnet50_fp32", "h200x4/ddp_resnet50", "big/gpt_big_bf16")


def _span_order(path: Path) -> tuple[str, int]:
    worker, stamp = path.name.split(".")[:2]
    return worker, int(stamp)


def traces(*runs: str, first_only: bool = False) -> list:
    """A param for each trace file of these runs (`group/run` under FIXTURES), or for the first of each
    run only; ids `group/run/worker/span`. Empty when none is there."""
    out = []
    for run in runs:
        files = sorted((FIXTURES / run).glob("*.pt.trace.json*"), key=_span_order)
        spans: dict[str, int] = {}
        for path in files[:1] if first_only else files:
            worker = path.name.split(".")[0]
            spans[worker] = spans.get(worker, 0) + 1
            out.append(pytest.param(path, id=f"{run}/{worker}/{spans[worker]}"))
    return out


def over(params: list) -> pytest.MarkDecorator:
    """Parametrises `fixture_trace` with these traces; the tests skip when there are none."""
    skipped = pytest.param(None, marks=pytest.mark.skip(reason=f"fixture traces not found under {FIXTURES}"))
    return pytest.mark.parametrize("fixture_trace", params or [skipped], indirect=True)


def every_trace(*runs: str) -> pytest.MarkDecorator:
    return over(traces(*runs))


def first_trace(*runs: str) -> pytest.MarkDecorator:
    return over(traces(*runs, first_only=True))


class FixtureTrace:
    """One trace file and what tests compute from it, each computed on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._derived: dict[Callable, Any] = {}

    @property
    def run(self) -> str:
        """`group/run`, as `every_trace` takes it."""
        return f"{self.path.parent.parent.name}/{self.path.parent.name}"

    def derived(self, compute: Callable[[FixtureTrace], T]) -> T:
        """`compute(self)`, once: for what a test module works out from the trace."""
        if compute not in self._derived:
            self._derived[compute] = compute(self)
        return self._derived[compute]

    @cached_property
    def raw(self) -> dict:
        """The JSON document, as plain Python objects."""
        with gzip.open(self.path) if self.path.suffix == ".gz" else open(self.path, "rb") as f:
            return json.load(f)

    @cached_property
    def tables(self):
        from profboard.server.trace.load import load_trace

        stat = self.path.stat()
        return load_trace(str(self.path), stat.st_size, stat.st_mtime, cache_dir=None)

    @cached_property
    def tree(self):
        from profboard.server.analysis.optree import build_op_tree

        return build_op_tree(self.tables.events)

    @cached_property
    def overview(self) -> dict:
        from profboard.server.analysis.overview import overview

        return overview(self.tables)
