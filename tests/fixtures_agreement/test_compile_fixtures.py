"""The torch.compile analysis and the graph_breaks / launch_bound rules on real traces: the
graph-break model reports 3 breaks per forward, ResNet-18 none; the launch-bound eager MLP
fires launch_bound, its CUDA-graph twin and the bf16 transformer do not; a first call's compile
break-down adds up to its compile ranges."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from profboard.server.analysis.compile import compile_breakdown, compiled_regions, has_compiled_code
from profboard.server.analysis.overview import overview
from profboard.server.trace.load import parse_trace_bytes
from profboard.server.trace.read import read_trace_bytes
from profboard.server.trace.tables import TraceTables
from shared_traces import first_trace

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
MINE = {"graph_breaks", "launch_bound"}


@lru_cache(maxsize=None)
def _tables(path: str) -> TraceTables:
    return parse_trace_bytes(read_trace_bytes(path, 1 << 33).data)


def tables(folder: Path) -> TraceTables:
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    return _tables(str(sorted(folder.glob("*.pt.trace.json*"))[0]))


def mine(recommendations: list[dict]) -> dict[str, dict]:
    """The findings of this file's rules, by id."""
    return {f["id"]: f for f in recommendations if f["id"] in MINE}


@lru_cache(maxsize=None)
def _findings(path: str) -> dict[str, dict]:
    return mine(overview(_tables(path))["recommendations"])


def findings(folder: Path) -> dict[str, dict]:
    tables(folder)  # skips when absent
    return _findings(str(sorted(folder.glob("*.pt.trace.json*"))[0]))


@first_trace("h100/compile_graph_breaks")
def test_graph_breaks_fixture_breaks_three_times_per_forward(fixture_trace):
    regions = compiled_regions(fixture_trace.tables)
    assert [c["graph_breaks"] for c in regions["calls"]] == [3, 3, 3]
    assert regions["summary"]["graph_breaks_per_call"] == 3 and regions["summary"]["max_depth"] == 4
    found = mine(fixture_trace.overview["recommendations"])["graph_breaks"]
    assert found["numbers"]["graph_breaks_per_call"] == 3 and found["severity"] == "medium"
    assert {(e["region"], e["parent_region"], e["count"]) for e in found["evidence"]} == {
        ("3/0", "2/0", 3), ("4/0", "3/0", 3), ("5/0", "4/0", 3)}


@first_trace("h100/compile_resnet18")
def test_resnet18_compiles_without_breaks(fixture_trace):
    regions = compiled_regions(fixture_trace.tables)
    assert regions["summary"]["calls"] == 3 and regions["summary"]["graph_breaks"] == 0
    assert "graph_breaks" not in mine(fixture_trace.overview["recommendations"])


def test_launch_bound_eager_fires():
    found = findings(DATA / "h200" / "launch_bound_eager")["launch_bound"]
    assert found["numbers"]["kernel_to_launch_ratio"] < 0.4 and found["numbers"]["gpu_busy_ratio"] < 0.1
    kernel = next(e for e in found["evidence"] if e["kind"] == "kernel")
    assert kernel["kernel_us"] < kernel["launch_us"]


@pytest.mark.parametrize("name", ["reduce_overhead", "bf16_transformer", "item_logging", "compile_first_call"])
def test_launch_bound_quiet_on_own_traces(name):
    assert "launch_bound" not in findings(DATA / "h200" / name)


# What the two rules say on every shared fixture. compile_graph_breaks is a tiny compiled MLP
# without CUDA graphs: 174 kernels of ~2 us a step, each launched by a ~9 us call, GPU busy 2%:
# launch-bound by any measure (the advice, mode="reduce-overhead", is what it needs).
EXPECTED = {
    "h100/compile_graph_breaks": {"graph_breaks", "launch_bound"},
    "h100/compile_resnet18": set(),
    "h100/resnet50_fp32": set(),
    "h100/loss_sync_before": set(),
    "h100/loss_sync_after": set(),
    "h200x4/ddp_resnet50": set(),
    "kineto_samples/resnet50_num_workers_0": set(),
    "kineto_samples/resnet50_num_workers_4": set(),
    "big/gpt_big_bf16": set(),
}


@first_trace(*EXPECTED)
def test_shared_fixture(fixture_trace):
    assert set(mine(fixture_trace.overview["recommendations"])) == EXPECTED[fixture_trace.run]


def _total(events, name: str) -> float:
    return float(events.loc[(events["name"] == name).to_numpy(), "dur"].sum())


def test_first_call_breakdown_adds_up_to_its_compile_ranges():
    t = tables(DATA / "h200" / "compile_first_call")
    assert has_compiled_code(t)
    out = compile_breakdown(t)
    events = t.events
    frame, backward = _total(events, "entire_frame_compile"), _total(events, "entire_backward_compile")
    # torch 2.11 wraps entire_frame_compile in a `dynamo` range (guards, gc): the forward root
    wrapper = _total(events, "dynamo")
    assert wrapper >= frame > 0 and backward > 0
    phases = out["phases"]
    forward_sum = sum(p["forward_us"] for p in phases)
    backward_sum = sum(p["backward_us"] for p in phases)
    assert forward_sum == pytest.approx(wrapper, abs=0.01) and backward_sum == pytest.approx(backward, abs=0.01)
    # not more than the enclosing compile ranges; the wrapper adds under 0.1% to entire_frame_compile
    assert forward_sum + backward_sum <= wrapper + backward + 0.01
    assert wrapper - frame < 0.001 * frame
    by = {p["phase"]: p for p in phases}
    for phase in ("dynamo", "aot_autograd", "inductor_lowering", "inductor_codegen", "triton_compile"):
        assert by[phase]["total_us"] > 0, phase
    assert by["autotuning"]["first_run_us"] == pytest.approx(out["first_run_us"]) and out["first_run_us"] > 0
    assert {r["pass"] for r in out["roots"]} == {"forward", "backward", "first_run"}


@first_trace("h100/compile_resnet18")
def test_steady_state_traces_have_no_compile_breakdown(fixture_trace):
    assert compile_breakdown(fixture_trace.tables)["total_us"] == 0
