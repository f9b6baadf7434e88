"""aten operators inside compiled graphs (server/analysis/compile_ops.py)."""

from __future__ import annotations

import pytest

from profboard.server.analysis.compile_ops import aten_in_graphs
from profboard.server.analysis.optree import build_op_tree
from synth import Trace, parse


def ext(event: dict) -> int:
    return event["args"]["External id"]


def test_direct_aten_children_of_a_graph_call_are_counted_with_their_device_time():
    t = Trace()
    t.op("CompiledFunction", 0, 1000)
    t.op("## Call CompiledFxGraph abc ##", 10, 900)
    mm = t.op("aten::mm", 20, 100)
    t.launch(30, 5, 200, 40, external_id=ext(mm))
    t.op("triton_poi_fused_relu_0", 150, 10)
    conv = t.op("aten::convolution", 300, 200)
    inner = t.op("aten::_convolution", 310, 150)  # under convolution: its device time counts there
    t.launch(320, 5, 400, 60, external_id=ext(inner))
    t.op("aten::mm", 600, 50)                      # a second call, without kernels
    t.op("aten::add", 2000, 10)                    # eager, outside any graph
    tables = parse(t.build())
    found = aten_in_graphs(tables, build_op_tree(tables.events))
    assert found["graph_calls"] == 1 and found["triton_calls"] == 1
    rows = {r["name"]: r for r in found["rows"]}
    assert list(rows) == ["aten::convolution", "aten::mm"]  # most device time first
    assert (rows["aten::convolution"]["calls"], rows["aten::convolution"]["device_us"]) == (1, 60)
    assert rows["aten::mm"]["calls"] == 2 and rows["aten::mm"]["host_us"] == pytest.approx(150)
    assert rows["aten::mm"]["device_us"] == 40
    assert conv["name"] == "aten::convolution"


def test_eager_traces_have_no_graphs():
    t = Trace()
    t.op("aten::mm", 0, 10)
    tables = parse(t.build())
    assert aten_in_graphs(tables, build_op_tree(tables.events)) == {"graph_calls": 0, "triton_calls": 0, "rows": []}
