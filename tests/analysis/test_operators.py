"""Operator tree and operator table (server/analysis/optree.py, operators.py, callstacks.py).

Every expected number is worked out by hand from the few events each case builds.
"""

from __future__ import annotations

import numpy as np

from profboard.server.analysis.callstacks import parse_frame
from profboard.server.analysis.operators import op_instances, operator_table, shape_text, stack_table
from profboard.server.analysis.optree import build_op_tree, nest, tree_warnings
from synth import ELEMENTWISE, TC_GEMM, Trace, parse


def ops_of(t: Trace, group_by: str = "name") -> dict[str, dict]:
    tables = parse(t.build())
    instances, _ = op_instances(tables.events, build_op_tree(tables.events))
    rows = operator_table(instances, group_by)
    return {(r["name"], r["input_shape"]) if group_by == "name_shape" else r["name"]: r for r in rows}


def ext(event: dict) -> int:
    return event["args"]["External id"]


def linear_step(t: Trace, at: float = 0, tid=None) -> None:
    """aten::linear 0..100 > aten::addmm 10..60 launching a tensor-core GEMM (20 us) from 20..25."""
    t.op("aten::linear", at, 100, tid=tid)
    addmm = t.op("aten::addmm", at + 10, 50, tid=tid, input_dims=[[8, 16], [16, 4], [4]])
    t.launch(at + 20, 5, at + 200, 20, name=TC_GEMM, external_id=ext(addmm), tid=tid)


def test_self_and_total_times_of_nested_ops():
    t = Trace()
    linear_step(t)
    ops = ops_of(t)
    linear, addmm = ops["aten::linear"], ops["aten::addmm"]
    assert linear["calls"] == addmm["calls"] == 1
    assert linear["host_total_us"] == 100 and linear["host_self_us"] == 50  # less its child
    assert addmm["host_total_us"] == 50 and addmm["host_self_us"] == 45     # less the launch call
    assert addmm["device_self_us"] == addmm["device_total_us"] == 20
    assert linear["device_self_us"] == 0 and linear["device_total_us"] == 20
    assert addmm["tc_self_ratio"] == 1.0 and linear["tc_total_ratio"] == 1.0
    assert linear["tc_self_ratio"] is None  # no device time of its own
    assert linear["tc_eligible"] and addmm["tc_eligible"]


def test_memcpy_and_memset_count_as_device_time_but_not_tensor_cores():
    t = Trace()
    op = t.op("aten::copy_", 0, 50)
    corr = t.runtime("cudaMemcpyAsync", 5, 10, external_id=ext(op))
    t.memcpy(30, 8, correlation=corr)
    t.launch(20, 2, 40, 4, external_id=ext(op))
    row = ops_of(t)["aten::copy_"]
    assert row["device_self_us"] == 12 and row["tc_self_ratio"] == 0.0
    assert row["host_self_us"] == 50 - 10 - 2
    assert not row["tc_eligible"]


def test_backward_ops_on_another_thread_get_their_own_kernels():
    t = Trace()
    t.op("aten::mm", 0, 30, tid=1)
    bwd = t.op("autograd::engine::evaluate_function: MmBackward0", 100, 60, tid=2)
    inner = t.op("aten::mm", 110, 40, tid=2)
    t.launch(120, 5, 300, 25, name=TC_GEMM, external_id=ext(inner), tid=2)
    ops = ops_of(t)
    assert ops["aten::mm"]["calls"] == 2
    assert ops["aten::mm"]["device_self_us"] == 25
    bwd_row = ops["autograd::engine::evaluate_function: MmBackward0"]
    assert bwd_row["device_total_us"] == 25 and bwd_row["host_self_us"] == 20 and bwd_row["tc_eligible"]
    assert ext(bwd) != ext(inner)


def test_an_op_whose_only_child_has_its_name_is_one_call():
    t = Trace()
    t.op("aten::to", 0, 50)
    inner = t.op("aten::to", 5, 40)
    t.op("aten::copy_", 10, 20)
    t.launch(35, 5, 60, 7, external_id=ext(inner))
    ops = ops_of(t)
    assert ops["aten::to"]["calls"] == 1
    assert ops["aten::to"]["host_total_us"] == 50
    assert ops["aten::to"]["host_self_us"] == 50 - 20 - 5
    assert ops["aten::to"]["device_self_us"] == 7


def test_same_name_with_siblings_is_not_folded():
    t = Trace()
    t.op("aten::add", 0, 50)
    t.op("aten::add", 5, 10)
    t.op("aten::empty", 20, 10)
    assert ops_of(t)["aten::add"]["calls"] == 2


def test_child_ending_after_its_parent_by_rounding_stays_a_child():
    t = Trace()
    t.op("aten::linear", 0, 100)
    t.op("aten::t", 0, 60)
    t.op("aten::addmm", 60, 40.002)
    t.op("aten::relu", 100.001, 5)  # would start inside addmm, were addmm not clipped to its parent
    ops = ops_of(t)
    assert ops["aten::linear"]["host_self_us"] == 0  # 100 - 60 - 40.002, clipped: never negative
    assert ops["aten::addmm"]["host_self_us"] == 40.002
    assert ops["aten::relu"]["host_self_us"] == 5


def test_annotations_and_wrappers_are_not_operators_but_nest():
    t = Trace()
    t.step(1, 0, 500)
    t.annotation("Optimizer.step#SGD.step", 10, 100)
    t.annotation("my_block", 200, 100)
    inner = t.op("aten::mul", 210, 50)
    t.launch(220, 5, 400, 9, external_id=ext(inner))
    ops = ops_of(t)
    assert set(ops) == {"aten::mul"}
    assert ops["aten::mul"]["device_total_us"] == 9


def test_input_shapes_group_calls():
    t = Trace()
    t.op("aten::add", 0, 10, input_dims=[[2, 3], [2, 3], []])
    t.op("aten::add", 20, 10, input_dims=[[2, 3], [2, 3], []])
    t.op("aten::add", 40, 10, input_dims=[[4], [4], []])
    t.op("aten::add", 60, 10)
    ops = ops_of(t, "name_shape")
    assert ops[("aten::add", "[[2, 3], [2, 3], []]")]["calls"] == 2
    assert ops[("aten::add", "[[4], [4], []]")]["calls"] == 1
    assert ops[("aten::add", "[]")]["calls"] == 1
    assert shape_text("[[1,2],[[3],[4]],[]]") == "[[1, 2], [[3], [4]], []]"


def test_kernels_without_a_launching_op_are_reported():
    t = Trace()
    t.op("aten::mul", 0, 50)
    t.launch(60, 5, 100, 30)  # launch call outside any operator, no external id
    tables = parse(t.build())
    tree = build_op_tree(tables.events)
    warnings = tree_warnings(tables.events, tree)
    assert len(warnings) == 1 and warnings[0].startswith("1 of 1 kernels (100.0% of kernel time)")


def test_nest_closes_at_end_and_clips_overhangs():
    group = np.array([0, 0, 0, 0, 1])
    start = np.array([0.0, 1.0, 5.0, 10.0, 2.0])
    end = np.array([10.0, 5.0, 12.0, 11.0, 3.0])
    # [1,5) closes before 5; [5,12) overhangs its parent [0,10) and is clipped to it; [10,...) is a new root.
    assert nest(group, start, end).tolist() == [-1, 0, 0, -1, -1]


# --- call stacks ----------------------------------------------------------------------------------

def test_stacks_from_python_frames_innermost_first():
    t = Trace()
    t.python("train.py(10): <module>", 0, 1000, python_id=1)
    t.python("nn.Module: Linear_0", 5, 500, python_id=2, parent_id=1)
    t.python("torch/nn/modules/linear.py(125): forward", 10, 400, python_id=3, parent_id=2)
    t.python("<built-in function linear>", 20, 300, python_id=4, parent_id=3)
    t.op("aten::linear", 30, 100)
    t.python("train.py(12): <module>", 1000, 100, python_id=5, parent_id=None)
    t.op("aten::linear", 1010, 50)
    t.op("aten::relu", 2000, 10)  # outside every frame
    tables = parse(t.build())
    instances, stacks = op_instances(tables.events, build_op_tree(tables.events))
    rows = stack_table(instances, stacks, "aten::linear")
    frames = sorted([f["file"], f["line"], f["function"]] for r in rows for f in r["frames"][:1])
    assert frames == [["torch/nn/modules/linear.py", 125, "forward"], ["train.py", 12, "<module>"]]
    deep = next(r for r in rows if len(r["frames"]) == 2)
    assert [f["line"] for f in deep["frames"]] == [125, 10]
    assert deep["calls"] == 1 and deep["host_total_us"] == 100
    ops = operator_table(instances)
    assert {r["name"]: r["has_call_stack"] for r in ops} == {"aten::linear": True, "aten::relu": False}


def test_stacks_from_the_call_stack_argument():
    t = Trace(legacy=True)
    for ts in (0, 100):
        e = t.op("aten::conv2d", ts, 50)
        e["args"]["Call stack"] = "/src/model.py(40): forward;/src/train.py(9): main"
    tables = parse(t.build())
    instances, stacks = op_instances(tables.events, build_op_tree(tables.events))
    (row,) = stack_table(instances, stacks, "aten::conv2d")
    assert row["calls"] == 2
    assert row["frames"] == [{"file": "/src/model.py", "line": 40, "function": "forward"},
                             {"file": "/src/train.py", "line": 9, "function": "main"}]


def test_parse_frame():
    assert parse_frame("a/b (x).py(12): f(g)") == {"file": "a/b (x).py", "line": 12, "function": "f(g)"}
    assert parse_frame("<built-in method add>") == {"file": None, "line": None, "function": "<built-in method add>"}


def test_elementwise_kernel_is_not_tensor_core():
    t = Trace()
    op = t.op("aten::add", 0, 10)
    t.launch(2, 1, 20, 5, name=ELEMENTWISE, external_id=ext(op))
    row = ops_of(t)["aten::add"]
    assert row["tc_self_ratio"] == 0.0 and not row["tc_eligible"]
