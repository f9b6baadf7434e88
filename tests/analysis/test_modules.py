"""Module view analysis (server/analysis/modules.py) on hand-built traces."""

from __future__ import annotations

import numpy as np
import pytest

from profboard.server.analysis.flows import build_flows
from profboard.server.analysis import modules
from profboard.server.analysis.modules import module_view, operator_tree
from profboard.server.analysis.optree import build_op_tree
from synth import Trace, parse


def ext(event: dict) -> int:
    return event["args"]["External id"]


def view(t: Trace) -> dict:
    tables = parse(t.build())
    flows = build_flows(tables, np.ones(len(tables.events), dtype=bool))
    return module_view(tables, build_op_tree(tables.events), flows)


def by_name(result: dict) -> dict[str, dict]:
    return {m["name"]: m for m in result["modules"]}


def model_trace() -> Trace:
    """Model_0 called twice; Linear_0 in both calls, ReLU_0 in the first; backward on thread 2."""
    t = Trace()
    t.step(1, 0, 1000)
    t.python("nn.Module: Model_0", 100, 500, python_id=1, module_id=0)
    t.python("nn.Module: Linear_0", 120, 200, python_id=2, parent_id=1, module_id=0)
    t.op("aten::linear", 130, 150)
    addmm = t.op("aten::addmm", 140, 100)             # nested in aten::linear: not another call
    t.launch(150, 10, 300, 40, external_id=ext(addmm))
    t.python("nn.Module: ReLU_0", 350, 100, python_id=3, parent_id=1, module_id=0)
    relu = t.op("aten::relu", 360, 50)
    t.launch(370, 5, 400, 10, external_id=ext(relu))
    add = t.op("aten::add", 500, 20)                   # Model_0's own code
    t.launch(505, 5, 520, 5, external_id=ext(add))
    t.python("nn.Module: Model_0", 700, 200, python_id=4, module_id=0)
    t.python("nn.Module: Linear_0", 710, 100, python_id=5, parent_id=4, module_id=0)
    linear = t.op("aten::linear", 720, 50)
    t.launch(730, 5, 800, 20, external_id=ext(linear))
    t.op("aten::sum", 950, 10)                         # outside every module
    # Backward on the autograd thread: AccumulateGrad goes with the range before it.
    t.op("autograd::engine::evaluate_function: AddmmBackward0", 2000, 100, tid=2)
    back = t.op("AddmmBackward0", 2010, 80, tid=2)
    t.launch(2020, 5, 2100, 30, tid=2, external_id=ext(back))
    t.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 2120, 30, tid=2)
    acc = t.op("torch::autograd::AccumulateGrad", 2125, 20, tid=2)
    t.launch(2130, 5, 2140, 6, tid=2, external_id=ext(acc))
    t.op("autograd::engine::evaluate_function: ReluBackward0", 2200, 40, tid=2)
    t.op("ReluBackward0", 2205, 30, tid=2)
    t.fwdbwd(1, 140, 2010, backward_tid=2)
    t.fwdbwd(2, 360, 2205, backward_tid=2)
    return t


def test_module_tree_numbers_by_hand():
    result = view(model_trace())
    assert [m["name"] for m in result["modules"]] == ["Model_0", "Linear_0", "ReLU_0"]  # preorder
    mods = by_name(result)
    model, linear, relu = mods["Model_0"], mods["Linear_0"], mods["ReLU_0"]
    assert model["parent_id"] is None and linear["parent_id"] == relu["parent_id"] == model["id"]
    # Model_0: 500 + 200; less its children's occurrences 200 + 100 and 100.
    assert (model["occurrences"], model["host_total_us"], model["host_self_us"]) == (2, 700, 300)
    assert model["avg_host_total_us"] == 350
    # Linear_0: 200 + 100; kernels 40 (addmm, under linear) + 20.
    assert (linear["occurrences"], linear["host_total_us"], linear["host_self_us"]) == (2, 300, 300)
    assert (linear["device_self_us"], linear["device_total_us"], linear["avg_device_total_us"]) == (60, 60, 30)
    assert (linear["self_operators"], linear["operators"]) == (2, 2)
    assert (relu["occurrences"], relu["host_total_us"], relu["device_total_us"]) == (1, 100, 10)
    # Model_0: its own aten::add's 5; with children 5 + 60 + 10. Operators: add, and 2 + 1 below.
    assert (model["device_self_us"], model["device_total_us"]) == (5, 75)
    assert (model["self_operators"], model["operators"]) == (1, 4)


def test_backward_goes_to_the_module_of_the_forward_operator():
    result = view(model_trace())
    mods = by_name(result)
    linear, relu, model = mods["Linear_0"], mods["ReLU_0"], mods["Model_0"]
    # AddmmBackward0's range 100 plus the AccumulateGrad range after it 30; kernels 30 + 6.
    assert (linear["backward_host_self_us"], linear["backward_device_self_us"]) == (130, 36)
    assert (relu["backward_host_total_us"], relu["backward_device_total_us"]) == (40, 0)
    assert (model["backward_host_self_us"], model["backward_host_total_us"]) == (0, 170)
    assert model["backward_device_total_us"] == 36
    assert result["backward"]["ranges"] == 3 and result["backward"]["ranges_attributed"] == 3
    assert result["backward"]["host_attributed_us"] == result["backward"]["host_us"] == 170


def test_backward_without_flows_is_zero_and_said():
    t = model_trace()
    t.events = [e for e in t.events if e.get("cat") != "fwdbwd"]
    result = view(t)
    assert all(m["backward_host_total_us"] == 0 for m in result["modules"])
    assert result["backward"]["ranges_attributed"] == 0
    assert any("fwdbwd" in w for w in result["warnings"])


def test_icicle_columns_use_self_times():
    icicle = view(model_trace())["icicle"]
    assert icicle["branchvalues"] == "remainder"
    assert icicle["labels"] == ["Model_0", "Linear_0", "ReLU_0"]
    assert icicle["parents"] == ["", icicle["ids"][0], icicle["ids"][0]]
    assert icicle["host_us"] == [300, 300, 100] and icicle["device_us"] == [5, 60, 10]


def test_an_instance_called_from_two_parents_is_two_nodes():
    t = Trace()
    t.python("nn.Module: A_0", 0, 100, python_id=1)
    t.python("nn.Module: Shared_0", 10, 30, python_id=2, parent_id=1)
    t.python("nn.Module: B_0", 200, 100, python_id=3)
    t.python("nn.Module: Shared_0", 210, 50, python_id=4, parent_id=3)
    mods = view(t)["modules"]
    shared = [m for m in mods if m["name"] == "Shared_0"]
    assert [(m["host_total_us"], m["occurrences"]) for m in shared] == [(30, 1), (50, 1)]
    parents = {m["id"]: m["name"] for m in mods}
    assert [parents[m["parent_id"]] for m in shared] == ["A_0", "B_0"]


def test_operators_on_another_thread_are_not_inside_a_module():
    t = Trace()
    t.python("nn.Module: A_0", 0, 100, python_id=1)
    op = t.op("aten::mm", 10, 50, tid=7)
    t.launch(20, 5, 30, 10, tid=7, external_id=ext(op))
    a = view(t)["modules"][0]
    assert (a["self_operators"], a["device_total_us"]) == (0, 0)


def test_compiled_region_counts_in_its_module_with_a_warning():
    t = Trace()
    t.python("nn.Module: OptimizedModule_0", 0, 1000, python_id=1)
    t.python("nn.Module: Net_0", 10, 900, python_id=2, parent_id=1)
    t.annotation("Torch-Compiled Region: 0/0", 20, 800)
    graph = t.op("CompiledFunction", 30, 700)
    t.launch(40, 5, 100, 50, external_id=ext(graph))
    result = view(t)
    mods = by_name(result)
    assert mods["Net_0"]["compiled_regions"] == 1 and mods["OptimizedModule_0"]["compiled_regions"] == 0
    assert mods["Net_0"]["device_self_us"] == 50 and mods["OptimizedModule_0"]["device_total_us"] == 50
    assert any("Net_0" in w and "compiled" in w for w in result["warnings"])


def test_no_module_events_gives_an_empty_view_and_a_warning():
    t = Trace()
    t.python("train.py(10): main", 0, 100, python_id=1)
    t.op("aten::mm", 10, 50)
    result = view(t)
    assert result["modules"] == [] and result["icicle"]["ids"] == []
    assert "with_stack" in result["warnings"][0]


@pytest.mark.parametrize("child_end", [100.0005, 120], ids=["rounding", "overhang"])
def test_children_that_end_after_their_parent_keep_self_time_non_negative(child_end):
    t = Trace()
    t.python("nn.Module: A_0", 0, 100, python_id=1)
    t.python("nn.Module: B_0", 10, child_end - 10, python_id=2, parent_id=1)
    mods = by_name(view(t))
    assert mods["B_0"]["parent_id"] == mods["A_0"]["id"]
    assert mods["A_0"]["host_self_us"] >= 0


# -- operator tree of the main thread ----------------------------------------------------------


def op_tree(t: Trace) -> dict:
    tables = parse(t.build())
    return operator_tree(tables, build_op_tree(tables.events))


def test_operator_tree_merges_same_named_siblings_with_modules_as_nodes():
    result = op_tree(model_trace())
    nodes = {n["id"]: n for n in result["nodes"]}
    names = [n["name"] for n in result["nodes"]]
    assert names == ["ProfilerStep#1", "nn.Module: Model_0", "nn.Module: Linear_0", "aten::linear", "aten::addmm",
                     "nn.Module: ReLU_0", "aten::relu", "aten::add", "aten::sum"]  # thread 2 is not main
    step = result["nodes"][0]
    model = next(n for n in result["nodes"] if n["name"] == "nn.Module: Model_0")
    linear_op = next(n for n in result["nodes"] if n["name"] == "aten::linear")
    assert [nodes[c]["name"] for c in step["children"]] == ["nn.Module: Model_0", "aten::sum"]
    # Model_0's two calls: 500 + 200 less Linear_0 (200 + 100), ReLU_0 (100) and aten::add (20).
    assert (model["calls"], model["host_total_us"], model["host_self_us"]) == (2, 700, 280)
    assert (model["device_total_us"], model["device_self_us"]) == (75, 0)
    # aten::linear twice: 150 + 50 less addmm 100 and the second call's 5 us launch.
    assert (linear_op["calls"], linear_op["host_total_us"], linear_op["host_self_us"]) == (2, 200, 95)
    assert (linear_op["device_self_us"], linear_op["device_total_us"]) == (20, 60)
    assert result["truncated"] is False and result["thread"]["tid"] == "1000"


def test_operator_tree_folds_extra_children_into_a_more_node(monkeypatch):
    monkeypatch.setattr(modules, "MAX_CHILDREN", 2)
    t = Trace()
    t.step(1, 0, 1000)
    for i, length in enumerate([10, 40, 30, 20]):
        t.op(f"aten::op{i}", 100 * (i + 1), length)
    result = op_tree(t)
    step = result["nodes"][0]
    children = [n for n in result["nodes"] if n["parent_id"] == step["id"]]
    # The two longest stay, in time order; op0 (10) and op3 (20) become one node of 30 us.
    assert [c["name"] for c in children] == ["aten::op1", "aten::op2", "… 2 more"]
    assert children[-1]["host_total_us"] == 30 and children[-1]["calls"] == 2
    assert result["truncated"] is True


def test_operator_tree_node_budget_keeps_the_shallowest(monkeypatch):
    monkeypatch.setattr(modules, "MAX_TREE_NODES", 2)
    t = Trace()
    t.step(1, 0, 1000)
    t.op("aten::outer", 10, 500)
    t.op("aten::inner", 20, 100)
    result = op_tree(t)
    assert [n["name"] for n in result["nodes"]] == ["ProfilerStep#1", "aten::outer", "… 1 more"]


def test_operator_tree_without_steps_uses_the_thread_with_modules():
    t = Trace()
    t.python("nn.Module: A_0", 0, 100, python_id=1)
    t.op("aten::mm", 10, 50)
    for i in range(3):
        t.op("aten::add", 200 + 10 * i, 5, tid=2)  # more operators, no module
    result = op_tree(t)
    assert result["thread"]["tid"] == "1000"
    assert [n["name"] for n in result["nodes"]] == ["nn.Module: A_0", "aten::mm"]
