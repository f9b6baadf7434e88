"""Recommendations: findings about one worker's trace, each with the numbers behind it and the
evidence (time ranges, event ids) that opens the Trace view on the place.

Every rule is a pure function of a `Context` (the trace's tables and the analyses rules share)
returning findings; its thresholds are module constants next to it, and each finding repeats
the thresholds it was judged by. Rules live in `server/analysis/rules/`, one module per topic;
`RULES` lists them. Rules across ranks (`RUN_RULES`) read the run's Distributed view once the
run's other workers are loaded, and add findings to one worker's or add to them, so a worker's
own findings are made once, at load. Each finding says what fixing it would save per step,
and findings are ordered by that saving, largest first (savings.py: how savings are estimated,
the severity bands they set, and which saving includes which).

A finding: `id` (stable), `severity` (high|medium|low), `title` (one line), `detail` (what to
do), `numbers` (the measured values, plain units: us, bytes, 0..1 ratios, counts),
`thresholds` (the bars it was judged by), `evidence` (items with a `kind`, a `label`, and
`start_us`/`end_us` on the trace clock and, where one event is the culprit, its `event_id`),
`saving_us`, `saving_ratio`, `saving_note` and, where another finding's saving covers its
own, `included_in` (that finding's id).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Sequence, TypeVar

import pandas as pd

from ..trace.tables import TraceTables
from .compile import compile_breakdown, compiled_regions
from .launch import launch_overhead
from .idle import Gaps, kernel_gaps
from .optree import OpTree, build_op_tree
from .savings import Saving, by_saving, gpu_gaps, main_gpu, mark_included
from .steps import Steps, host_steps

Finding = dict[str, Any]
T = TypeVar("T")


@dataclass
class Context:
    """What rules read. Shared analyses are computed on first use; the caller passes the trace's
    operator tree when it has it, so that a trace's tree is built once."""

    tables: TraceTables
    steps: Steps
    breakdown: pd.DataFrame  # overview.step_breakdown: per step, time per category
    gpus: list[dict[str, Any]]  # overview.gpu_summary
    tree_of: Callable[[], OpTree] | None = None
    kernel_gaps: dict[int, Gaps] | None = None  # idle.kernel_gaps, when the caller has them
    _once: dict[Callable[[Context], Any], Any] = field(default_factory=dict, init=False, repr=False)

    def once(self, analysis: Callable[[Context], T]) -> T:
        """`analysis(self)`, computed on first use: a rule module's intermediate that several of its
        rules read (each took its share of a big trace's overview)."""
        if analysis not in self._once:
            self._once[analysis] = analysis(self)
        return self._once[analysis]

    @cached_property
    def tree(self) -> OpTree:
        return self.tree_of() if self.tree_of is not None else build_op_tree(self.tables.events)

    @cached_property
    def host_steps(self) -> pd.DataFrame:
        """steps.host_steps: the ProfilerStep ranges as the host recorded them."""
        return host_steps(self.tables.events)

    @cached_property
    def step_time_us(self) -> float:
        """The mean step's length (0 when there are no steps)."""
        return float(self.breakdown["total_us"].mean()) if len(self.breakdown) else 0.0

    @cached_property
    def compiled(self) -> dict[str, Any]:
        """compile.compiled_regions: torch.compile's regions and graph breaks."""
        return compiled_regions(self.tables, self.steps)

    @cached_property
    def compiling(self) -> dict[str, Any]:
        """compile.compile_breakdown: host time torch.compile spent compiling inside the trace (a
        first call's), and its roots."""
        return compile_breakdown(self.tables)

    @cached_property
    def launch(self) -> dict[str, Any]:
        """launch.launch_overhead: GPU idle while launching, kernels shorter than their launch."""
        return launch_overhead(self.tables, self.steps)

    @cached_property
    def gpu(self) -> int | None:
        """The GPU savings are read on (savings.main_gpu)."""
        return main_gpu(self.gpus)

    @cached_property
    def device_gaps(self) -> dict[int, Gaps]:
        """Each GPU's idle gaps over the steps, with their causes (idle.kernel_gaps)."""
        return kernel_gaps(self.tables.events, self.steps) if self.kernel_gaps is None else self.kernel_gaps

    @cached_property
    def gaps(self) -> Gaps:
        """That GPU's idle gaps over the steps, with their causes (of every kernel when no GPU
        has a utilization)."""
        if self.gpu is None:
            return gpu_gaps(self.tables.events, self.steps)
        return self.device_gaps[self.gpu]


Rule = Callable[[Context], list[Finding]]
# (one worker's findings, the run's Distributed view, the worker's name in it) -> the findings
RunRule = Callable[[list[Finding], dict[str, Any], str | None], list[Finding]]


def finding(id: str, saving: Saving, title: str, detail: str, numbers: dict[str, Any],
            thresholds: dict[str, Any], evidence: list[dict[str, Any]]) -> Finding:
    """One finding in the shape the API documents; its severity follows its saving."""
    return {"id": id, "severity": saving.level, "title": title, "detail": detail, "numbers": numbers,
            "thresholds": thresholds, "evidence": evidence, **saving.keys()}


def step_evidence(ctx: Context, index: int, **numbers: Any) -> dict[str, Any]:
    """An evidence item for one step, with its own numbers."""
    return {"kind": "step", "label": f"step {ctx.steps.names[index]}", "step": ctx.steps.names[index],
            "start_us": float(ctx.steps.starts[index]), "end_us": float(ctx.steps.ends[index]), **numbers}


def recommend(ctx: Context, rules: tuple[Rule, ...] | None = None) -> list[Finding]:
    """Every rule's findings, largest saving first (rule order for ties)."""
    from .rules import RULES  # the rules import this module's helpers

    found: list[Finding] = []
    for rule in RULES if rules is None else rules:
        found += rule(ctx)
    return by_saving(mark_included(found))


def recommend_across_ranks(found: list[Finding], view: dict[str, Any], worker: str | None,
                           rules: Sequence[RunRule] | None = None) -> list[Finding]:
    """One worker's findings (`recommend`'s) with the rules across ranks applied: `view` is the
    run's Distributed view (distributed.combine's object), in which this trace is `worker`. The
    same findings, in the same order, as if every rule had run together; `found` is not changed."""
    from .rules import RUN_RULES

    for rule in RUN_RULES if rules is None else rules:
        found = rule(found, view, worker)
    return by_saving(mark_included(found))
