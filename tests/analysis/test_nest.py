"""optree.nesting against the stack walk it replaced, kept here as the oracle: on the intervals the
analyses pass it for every demo trace (tests/fixtures_agreement/test_nest_fixtures.py does the
shared traces), and on random and built intervals with the cases its docstring names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from profboard.server.analysis import callstacks, modules, optree, timeline
from profboard.server.analysis.flows import build_flows
from profboard.server.analysis.operators import op_instances
from profboard.server.analysis.optree import Nesting, nest, nesting, nesting_order
from profboard.server.trace.load import load_trace

REPO = Path(__file__).resolve().parents[2]
DEMO_TRACES = sorted((REPO / "examples" / "logdir").glob("*/*.pt.trace.json*"))


def nesting_by_stack(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> Nesting:
    """The oracle: one pass with a stack of open intervals (optree.nest until it was vectorised)."""
    parent, depth, clipped = [], [], []
    open_nodes: list[int] = []
    open_ends: list[float] = []
    previous = None
    for i, (g, s, e) in enumerate(zip(group.tolist(), start.tolist(), end.tolist())):
        if g != previous:
            open_nodes.clear()
            open_ends.clear()
            previous = g
        while open_ends and s >= open_ends[-1]:
            open_nodes.pop()
            open_ends.pop()
        if open_nodes:
            parent.append(open_nodes[-1])
            e = min(e, open_ends[-1])
        else:
            parent.append(-1)
        depth.append(len(open_nodes))
        clipped.append(e)
        open_nodes.append(i)
        open_ends.append(e)
    return Nesting(np.array(parent, dtype=np.int64), np.array(depth, dtype=np.int64), np.array(clipped))


def assert_nests_like_stack(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """nesting() equals the oracle's; returns the parents."""
    got, want = nesting(group, start, end), nesting_by_stack(group, start, end)
    for field in ("parent", "depth", "end"):
        mine, theirs = getattr(got, field), getattr(want, field)
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, field
        wrong = np.flatnonzero(mine != theirs)
        assert not len(wrong), (f"{field}: {len(wrong)} of {len(theirs)} differ, first at {wrong[0]}: "
                                f"{mine[wrong[0]]} != {theirs[wrong[0]]}")
    assert nest(group, start, end).tolist() == want.parent.tolist()
    return want.parent


def parents_by_raw_ends(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Parents if nothing were clipped: the last earlier interval of the group still open by its own
    end. Where this differs from the oracle, clipping changed the nesting."""
    out = np.full(len(start), -1, dtype=np.int64)
    for i in range(len(start)):
        j = i - 1
        while j >= 0 and group[j] == group[i] and end[j] <= start[i]:
            j -= 1
        out[i] = j if j >= 0 and group[j] == group[i] else -1
    return out


def recorded_nest_calls(tables, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[np.ndarray, ...]]]:
    """The inputs nest() and nesting() are given, per calling module, while the analyses that use
    them run on `tables`."""
    calls: dict[str, list[tuple[np.ndarray, ...]]] = {}
    for module, name in ((optree, "nest"), (callstacks, "nesting"), (modules, "nest"), (timeline, "nesting")):
        def recording(group, start, end, called=module.__name__.rsplit(".", 1)[1], real=getattr(module, name)):
            calls.setdefault(called, []).append((group.copy(), start.copy(), end.copy()))
            return real(group, start, end)

        monkeypatch.setattr(module, name, recording)
    tree = optree.build_op_tree(tables.events)
    op_instances(tables.events, tree)
    layout = timeline.build_layout(tables)
    flows = build_flows(tables, layout.lane_of >= 0)
    modules.module_view(tables, tree, flows)
    modules.operator_tree(tables, tree)
    return calls


@pytest.mark.parametrize("path", DEMO_TRACES, ids=[f"{p.parent.name}/{p.name.split('.')[0]}" for p in DEMO_TRACES])
def test_nest_agrees_with_the_stack_on_demo_traces(path, monkeypatch):
    stat = path.stat()
    calls = recorded_nest_calls(load_trace(str(path), stat.st_size, stat.st_mtime), monkeypatch)
    assert {"optree", "timeline"} <= set(calls)
    for group, start, end in (c for per_module in calls.values() for c in per_module):
        assert_nests_like_stack(group, start, end)


def test_demo_traces_are_there():
    assert len(DEMO_TRACES) >= 7  # the parametrised test above would pass with none


def sorted_intervals(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.lexsort((-end, start, group))  # as the callers sort: group, start, longest first
    return group[order], start[order], end[order]


def random_intervals(seed: int, n: int, groups: int, spread: int) -> tuple[np.ndarray, ...]:
    """Integer starts in a narrow range (ties), durations 0 (a quarter) or up to `spread` (overlaps
    that are no nesting: children that overrun their parents)."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, n, n).astype(np.float64)
    dur = np.where(rng.random(n) < 0.25, 0.0, rng.integers(1, spread + 1, n))
    return sorted_intervals(rng.integers(0, groups, n), start, start + dur)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("n, groups, spread", [(50, 1, 10), (400, 3, 40), (3000, 40, 200), (2000, 1, 2000)],
                         ids=["small", "few-groups", "many-groups", "long-overlaps"])
def test_nest_agrees_with_the_stack_on_random_intervals(seed, n, groups, spread):
    group, start, end = random_intervals(seed, n, groups, spread)
    want = assert_nests_like_stack(group, start, end)
    # the cases are there: ties, zero lengths, clipping that changes the nesting, several levels
    assert (np.diff(start)[np.diff(group) == 0] == 0).any() and (start == end).any()
    assert (want != parents_by_raw_ends(group, start, end)).any()
    assert (want[want[want >= 0]] >= 0).any()


def test_overhanging_children_alternate_roots_and_children():
    # [0,10) [1,20) [15,30) [25,40) [35,50) ...: [1,20) is clipped to 10, so [15,30) is a root,
    # [25,40) its child (clipped to 30), [35,50) a root again: each clip decides the next nesting.
    n = 5000
    start = 10.0 * np.arange(n)
    want = assert_nests_like_stack(np.zeros(n, dtype=np.int64), start, start + 15)
    assert want[:5].tolist() == [-1, 0, -1, 2, -1]
    assert want.tolist() == [-1 if i % 2 == 0 else i - 1 for i in range(n)]


def test_child_starting_at_its_parents_end_is_its_sibling():
    group = np.zeros(5, dtype=np.int64)
    start = np.array([0.0, 2.0, 10.0, 10.0, 12.0])
    end = np.array([10.0, 10.0, 12.0, 10.0, 12.0])
    # [2,10) ends with [0,10); [10,12) starts at their end: a root; the empty [10,10) and [12,12)
    # close at once: [10,10) is [10,12)'s child, [12,12) starts at [10,12)'s end, a root.
    assert assert_nests_like_stack(group, start, end).tolist() == [-1, 0, -1, 2, -1]


def test_groups_reset_the_open_intervals():
    group = np.array([0, 0, 1, 1, 2])
    start = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    end = np.array([100.0, 100.0, 100.0, 100.0, 100.0])
    assert assert_nests_like_stack(group, start, end).tolist() == [-1, 0, -1, 2, -1]


@pytest.mark.parametrize("overrun", [False, True], ids=["nested", "each-overruns-its-parent"])
def test_ten_thousand_levels(overrun):
    n = 10_000
    start = np.arange(n, dtype=np.float64)
    end = n + start + 1 if overrun else 2 * n - start
    group = np.zeros(n, dtype=np.int64)
    # a second chain after the first, and siblings at the deepest level
    start = np.concatenate([start, start + 3 * n, [n - 0.5, n - 0.25]])
    end = np.concatenate([end, end + 3 * n, [n - 0.4, n - 0.2]])
    group, start, end = sorted_intervals(np.zeros(len(start), dtype=np.int64), start, end)
    want = assert_nests_like_stack(group, start, end)
    depth = np.zeros(len(want), dtype=np.int64)
    for i in np.flatnonzero(want >= 0):
        depth[i] = depth[want[i]] + 1
    assert depth.max() == n and (want == -1).sum() == 2  # the siblings are n deep


def test_no_intervals():
    empty = np.zeros(0)
    assert nest(empty.astype(np.int64), empty, empty).tolist() == []


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("presorted", [True, False], ids=["sorted-by-start", "any-order"])
def test_nesting_order_is_lexsort(seed, presorted):
    rng = np.random.default_rng(seed)
    n = 2000
    group = rng.integers(0, 5, n)
    start = rng.integers(0, 300, n).astype(np.float64)  # many equal starts
    end = start + rng.integers(0, 3, n)  # and equal ends among them
    if presorted:
        group, start, end = (a[np.argsort(start, kind="stable")] for a in (group, start, end))
    assert nesting_order(group, start, end).tolist() == np.lexsort((-end, start, group)).tolist()
