"""Module view on real traces, checked against the raw JSON read in plain Python.

resnet50_fp32 (2 steps, with_stack): per module instance, host total = the sum of its
`nn.Module: Name` events' durations; a child never exceeds its parent; the top-level
modules (ResNet_0, CrossEntropyLoss_0) hold every forward operator (the start of a fwdbwd
flow) and, per step, cover the forward range (first forward operator's start to last one's
end) except for the Python between model and loss; module backward is non-zero and below the
steps' backward time (per step, the autograd thread's first evaluate_function start to its
last end). compile_resnet18: only the compiled model's wrapper modules exist, the compiled
regions sit in ResNet_0 and a warning says so.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from profboard.server.analysis.flows import build_flows
from profboard.server.analysis.modules import module_view, operator_tree
from shared_traces import FixtureTrace, first_trace

PREFIX = "nn.Module: "


def _analysed(trace: FixtureTrace) -> tuple[dict, dict]:
    flows = build_flows(trace.tables, np.ones(len(trace.tables.events), dtype=bool))
    return module_view(trace.tables, trace.tree, flows), operator_tree(trace.tables, trace.tree)


def analysed(trace: FixtureTrace) -> tuple[dict, dict]:
    """The module view and the operator tree."""
    return trace.derived(_analysed)


def top_level_modules(events: list[dict]) -> list[dict]:
    """Module events that no other module event on their thread encloses."""
    mods = sorted((e for e in events if e.get("cat") == "python_function" and e["name"].startswith(PREFIX)),
                  key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    top, open_until = [], {}
    for e in mods:
        if e["ts"] >= open_until.get(e["tid"], -1):
            top.append(e)
            open_until[e["tid"]] = e["ts"] + e["dur"]
    return top


@pytest.fixture
def resnet(fixture_trace):
    return analysed(fixture_trace), fixture_trace.raw["traceEvents"]


resnet50 = first_trace("h100/resnet50_fp32")


@resnet50
def test_host_total_is_the_sum_of_the_instance_events(resnet):
    (view, _), events = resnet
    raw = defaultdict(float)
    for e in events:
        if e.get("cat") == "python_function" and e["name"].startswith(PREFIX):
            raw[e["name"][len(PREFIX):]] += e["dur"]
    mine = defaultdict(float)
    for m in view["modules"]:
        mine[m["name"]] += m["host_total_us"]
    assert len(raw) == 152 and set(mine) == set(raw)
    for name, total in raw.items():
        assert mine[name] == pytest.approx(total, abs=1e-3), name


@resnet50
def test_children_never_exceed_parents(resnet):
    (view, _), _ = resnet
    by_id = {m["id"]: m for m in view["modules"]}
    keys = ("host_total_us", "device_total_us", "operators", "backward_host_total_us", "backward_device_total_us")
    children = [m for m in view["modules"] if m["parent_id"] is not None]
    assert len(children) == 150
    for m in children:
        parent = by_id[m["parent_id"]]
        for key in keys:
            assert m[key] <= parent[key] + 1e-3, (m["name"], key)
    for m in view["modules"]:
        assert 0 <= m["host_self_us"] <= m["host_total_us"] and 0 <= m["device_self_us"] <= m["device_total_us"]


@resnet50
def test_top_level_modules_account_for_the_forward_pass(resnet):
    (view, _), events = resnet
    roots = [m["name"] for m in view["modules"] if m["parent_id"] is None]
    assert roots == ["ResNet_0", "CrossEntropyLoss_0"]
    top = top_level_modules(events)
    ops = {(e["tid"], e["ts"]): e for e in events if e.get("cat") == "cpu_op"}
    forward = [ops[(e["tid"], e["ts"])] for e in events
               if e.get("cat") == "fwdbwd" and e["ph"] == "s" and (e["tid"], e["ts"]) in ops]
    assert len(forward) == 356
    # Every forward operator is inside a top-level module occurrence.
    for op in forward:
        assert any(m["tid"] == op["tid"] and m["ts"] <= op["ts"] and op["ts"] + op["dur"] <= m["ts"] + m["dur"]
                   for m in top), op["name"]
    steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    for step in steps:
        inside = [op for op in forward if step["ts"] <= op["ts"] < step["ts"] + step["dur"]]
        lo, hi = min(op["ts"] for op in inside), max(op["ts"] + op["dur"] for op in inside)
        covered = sum(max(0.0, min(m["ts"] + m["dur"], hi) - max(m["ts"], lo)) for m in top)
        assert covered / (hi - lo) > 0.98
    # The module list's top-level host time is those occurrences' time.
    assert sum(m["host_total_us"] for m in view["modules"] if m["parent_id"] is None) == pytest.approx(
        sum(m["dur"] for m in top), abs=1e-3)


@resnet50
def test_module_backward_is_within_the_steps_backward(resnet):
    (view, _), events = resnet
    backward = 0.0
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    roots = [e for e in events if e.get("cat") == "cpu_op"
             and e["name"].startswith("autograd::engine::evaluate_function: ")]
    for step in steps:
        mine = [e for e in roots if step["ts"] <= e["ts"] < step["ts"] + step["dur"]]
        backward += max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)
    model = next(m for m in view["modules"] if m["name"] == "ResNet_0")
    assert 0.5 * backward < model["backward_host_total_us"] < backward
    assert model["backward_device_total_us"] > 0
    assert view["backward"]["ranges_attributed"] == view["backward"]["ranges"]


@resnet50
def test_operator_tree_of_resnet_is_the_main_thread(resnet):
    (_, tree), _ = resnet
    names = [n["name"] for n in tree["nodes"] if n["parent_id"] is None]
    assert names == ["ProfilerStep#2", "ProfilerStep#3"] and tree["truncated"] is False
    by_id = {n["id"]: n for n in tree["nodes"]}
    for n in tree["nodes"]:
        assert sum(by_id[c]["host_total_us"] for c in n["children"]) <= n["host_total_us"] + 1e-2
        assert n["device_self_us"] <= n["device_total_us"] + 1e-6


@first_trace("h100/compile_resnet18")
def test_compiled_resnet18_shows_the_modules_outside_compiled_code(fixture_trace):
    view, tree = analysed(fixture_trace)
    mods = {m["name"]: m for m in view["modules"]}
    assert set(mods) == {"OptimizedModule_0", "ResNet_0"}
    assert mods["ResNet_0"]["parent_id"] == mods["OptimizedModule_0"]["id"]
    assert mods["ResNet_0"]["compiled_regions"] == 3 and mods["ResNet_0"]["occurrences"] == 3
    assert mods["ResNet_0"]["device_total_us"] > 0 and mods["ResNet_0"]["backward_device_total_us"] > 0
    assert any("compiled" in w for w in view["warnings"])
    assert tree["nodes"][0]["name"] == "nn.Module: OptimizedModule_0"
