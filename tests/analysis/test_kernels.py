"""Kernel table (server/analysis/kernels.py): aggregation, weighted means, launching operators."""

from __future__ import annotations

import pytest

from profboard.server.analysis.kernels import kernel_table
from profboard.server.analysis.optree import build_op_tree
from synth import ELEMENTWISE, TC_GEMM, Trace, parse


def table(t: Trace, group_by: str = "name", op: str | None = None) -> list[dict]:
    tables = parse(t.build())
    return kernel_table(tables.events, build_op_tree(tables.events), group_by, op)


def ext(event: dict) -> int:
    return event["args"]["External id"]


def two_ops() -> Trace:
    t = Trace()
    t.op("aten::linear", 0, 100)
    mm = t.op("aten::mm", 10, 50)
    t.launch(20, 5, 200, 30, name=TC_GEMM, external_id=ext(mm), blocks_per_sm=2.0, occupancy=50.0, grid=[4, 1, 1])
    t.launch(30, 5, 240, 10, name=TC_GEMM, external_id=ext(mm), blocks_per_sm=4.0, occupancy=20.0, grid=[8, 1, 1])
    add = t.op("aten::add", 120, 20)
    t.launch(125, 5, 300, 6, name=ELEMENTWISE, external_id=ext(add))   # no blocks/occupancy recorded
    t.launch(400, 5, 500, 4, name=ELEMENTWISE)                         # launched outside any operator
    return t


def test_by_name_sums_and_duration_weighted_means():
    rows = table(two_ops())
    assert [r["name"] for r in rows] == [TC_GEMM, ELEMENTWISE]  # by total time
    gemm, elementwise = rows
    assert (gemm["calls"], gemm["total_us"], gemm["mean_us"], gemm["max_us"], gemm["min_us"]) == (2, 40, 20, 30, 10)
    assert gemm["blocks_per_sm"] == pytest.approx((2 * 30 + 4 * 10) / 40)
    assert gemm["achieved_occupancy_ratio"] == pytest.approx((0.5 * 30 + 0.2 * 10) / 40)
    assert gemm["tensor_cores"] and not gemm["tensor_cores_guess"]
    assert elementwise["calls"] == 2 and elementwise["total_us"] == 10
    assert elementwise["blocks_per_sm"] is None and elementwise["achieved_occupancy_ratio"] is None
    assert not elementwise["tensor_cores"]


def test_occupancy_zero_on_every_call_is_no_occupancy():
    # Kineto writes 0 where CUPTI could not estimate it; where some calls have a value, the zeros
    # count in the mean as the reference counted them.
    t = Trace()
    t.kernel(TC_GEMM, 100, 30, blocks_per_sm=1.0, occupancy=0.0)
    t.kernel(TC_GEMM, 200, 10, blocks_per_sm=1.0, occupancy=0.0)
    t.kernel(ELEMENTWISE, 300, 30, blocks_per_sm=1.0, occupancy=0.0)
    t.kernel(ELEMENTWISE, 400, 10, blocks_per_sm=1.0, occupancy=40.0)
    rows = {r["name"]: r for r in table(t)}
    assert rows[TC_GEMM]["achieved_occupancy_ratio"] is None
    assert rows[ELEMENTWISE]["achieved_occupancy_ratio"] == pytest.approx(0.4 * 10 / 40)


def test_by_name_and_op_splits_by_launch_config_and_keeps_unlaunched_kernels():
    rows = table(two_ops(), "name_op")
    keyed = {(r["name"], r["op"], tuple(r["grid"])): r for r in rows}
    assert set(keyed) == {(TC_GEMM, "aten::mm", (4, 1, 1)), (TC_GEMM, "aten::mm", (8, 1, 1)),
                          (ELEMENTWISE, "aten::add", (1, 1, 1)), (ELEMENTWISE, None, (1, 1, 1))}
    assert keyed[(TC_GEMM, "aten::mm", (4, 1, 1))]["op_tc_eligible"] is True
    assert keyed[(ELEMENTWISE, None, (1, 1, 1))]["op_tc_eligible"] is False
    assert keyed[(TC_GEMM, "aten::mm", (8, 1, 1))]["block"] == [256, 1, 1]
    assert keyed[(TC_GEMM, "aten::mm", (8, 1, 1))]["registers_per_thread"] == 32
    assert sum(r["calls"] for r in rows) == 4


def test_filter_by_operator_includes_the_ops_it_called():
    assert [r["name"] for r in table(two_ops(), op="aten::linear")] == [TC_GEMM]
    assert [r["calls"] for r in table(two_ops(), op="aten::add")] == [1]
    assert table(two_ops(), op="aten::nothing") == []


def test_triton_template_is_a_marked_guess():
    t = Trace()
    t.launch(0, 5, 10, 20, name="triton_tem_fused_addmm_0", driver=True)
    (row,) = table(t)
    assert row["tensor_cores"] and row["tensor_cores_guess"]


def test_no_kernels():
    t = Trace()
    t.op("aten::add", 0, 10)
    assert table(t) == [] and table(t, "name_op") == []


def test_a_trace_of_kernels_only_and_an_empty_trace():
    t = Trace()
    t.kernel("k", 0, 10)
    t.add({"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 5, "dur": 3,
           "args": {"correlation": "not a number"}})
    rows = table(t, "name_op")
    assert [(r["name"], r["op"], r["calls"]) for r in rows] == [("k", None, 1), ("k2", None, 1)]
    assert rows[1]["grid"] is None and rows[1]["registers_per_thread"] is None
    assert table(t, op="aten::add") == []
    assert table(Trace(), "name_op") == []
