"""What fixing each finding would save (savings.py): the helpers on hand-made numbers, the rules on
small synthetic steps, and the cases of issue 18 on real traces (tests/data/h200, examples/logdir)."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from profboard.server.analysis.compile import compile_breakdown
from profboard.server.analysis.idle import HOST_WAIT, KERNEL_WAIT, OTHER, Gaps
from profboard.server.analysis.overview import overview
from profboard.server.analysis.rules.step_shares import dataloader_bound
from profboard.server.analysis.rules.utilization import low_gpu_utilization
from profboard.server.analysis.savings import (by_saving, idle_under, mark_included, no_saving, saving, severity)
from profboard.server.analysis.steps import Steps
from profboard.server.trace.load import parse_trace_bytes
from profboard.server.trace.read import read_trace_bytes
from synth import TC_GEMM, Trace, rule_context

REPO = Path(__file__).resolve().parents[2]


def trace_file(folder: str) -> Path:
    return next((REPO / folder).glob("*.pt.trace.json*"))


@lru_cache(maxsize=None)
def _read(folder: str):
    return parse_trace_bytes(read_trace_bytes(str(trace_file(folder)), 1 << 33).data)


def findings(folder: str) -> list[dict]:
    return overview(_read(folder))["recommendations"]


# -- helpers ---------------------------------------------------------------------------------

def test_a_saving_is_capped_at_the_step_and_sets_the_severity():
    assert (saving(1500.0, 1000.0, "x").us, saving(1500.0, 1000.0, "x").ratio) == (1000.0, 1.0)
    assert saving(-5.0, 1000.0, "x").us == 0.0
    assert [saving(us, 1000.0, "x").level for us in (100.0, 99.9, 20.0, 19.9, 0.0)] == \
        ["high", "medium", "medium", "low", "low"]
    assert [severity(r) for r in (0.1, 0.02, 0.0199)] == ["high", "medium", "low"]
    # none claimed: the rule's severity stands, and the keys say so
    none = no_saving("why", "medium")
    assert none.level == "medium" and none.keys() == {"saving_us": None, "saving_ratio": None, "saving_note": "why"}


def test_included_in_names_the_covering_finding_and_order_is_by_saving():
    found = [{"id": "host_device_sync", "saving_us": 50.0, "severity": "medium"},
             {"id": "h2d_copy_in_step", "saving_us": 40.0, "severity": "medium"},
             {"id": "ddp_instead_of_dp", "saving_us": 0.0, "severity": "low"},
             {"id": "memory_near_limit", "saving_us": None, "severity": "medium"},
             {"id": "low_gpu_utilization", "saving_us": 900.0, "severity": "high"},
             {"id": "tensor_cores_unused", "saving_us": 50.0, "severity": "medium"}]
    out = by_saving(mark_included(found))
    # ties: most severe first (none claimed counts as 0), then rule order
    assert [f["id"] for f in out] == ["low_gpu_utilization", "host_device_sync", "tensor_cores_unused",
                                      "h2d_copy_in_step", "memory_near_limit", "ddp_instead_of_dp"]
    cover = {f["id"]: f.get("included_in") for f in out}
    assert cover == {"low_gpu_utilization": None, "host_device_sync": "low_gpu_utilization",
                     "tensor_cores_unused": None, "h2d_copy_in_step": "host_device_sync", "memory_near_limit": None,
                     "ddp_instead_of_dp": None}
    # without the sync finding, the copy's saving is part of the GPU's idle
    alone = mark_included([f for f in found if f["id"] != "host_device_sync"])
    assert next(f for f in alone if f["id"] == "h2d_copy_in_step")["included_in"] == "low_gpu_utilization"


def test_idle_under_counts_every_cause_inside_the_ranges_and_the_steps():
    gaps = Gaps(np.array([0.0, 100.0, 300.0]), np.array([50.0, 200.0, 400.0]),
                np.array([HOST_WAIT, KERNEL_WAIT, OTHER]))
    steps = Steps(["1"], np.array([20.0]), np.array([350.0]))
    # ranges 10..150 and 320..500: gaps 20..50 (clipped to the step) + 100..150 + 320..350
    assert idle_under(gaps, (np.array([10.0, 320.0]), np.array([150.0, 500.0])), steps) == 110.0


# -- rules on synthetic steps ----------------------------------------------------------------

def test_dataloader_saving_is_the_gpu_idle_under_it():
    """A 1000 us step: the DataLoader loads 0..400 while a kernel queued earlier runs 100..300, so
    the GPU idles 200 of the 400 us; the model's kernel runs 450..950."""
    t = Trace()
    t.step(1, 0, 1000)
    t.op("aten::mm", 0, 10, external_id=101)
    t.launch(2, 3, 100, 200, name=TC_GEMM, external_id=101)
    t.dataloader(10, 390)
    t.op("aten::mm", 420, 20, external_id=102)
    t.launch(425, 5, 450, 500, name=TC_GEMM, external_id=102)
    [found] = dataloader_bound(rule_context(t))
    assert found["numbers"]["dataloader_us"] == pytest.approx(190.0)  # the step breakdown's share
    # idle under 10..400: 10..100 and 300..400
    assert (found["saving_us"], found["severity"]) == (190.0, "high")
    assert "DataLoader" in found["saving_note"]


def graph_step(graph: bool) -> Trace:
    """A 1000 us step whose one launch (a graph replay or a plain kernel) runs 100 us of GPU work."""
    t = Trace()
    t.step(1, 0, 1000)
    t.op("aten::mm", 400, 30, external_id=101)
    corr = t.runtime("cudaGraphLaunch" if graph else "cudaLaunchKernel", 410, 10, external_id=101)
    t.kernel(TC_GEMM, 500, 100, correlation=corr)
    return t


def test_low_utilization_says_where_the_step_goes_and_spares_cuda_graph_runs_the_advice():
    [plain] = low_gpu_utilization(rule_context(graph_step(False)))
    [graphs] = low_gpu_utilization(rule_context(graph_step(True)))
    assert "CUDA graphs" in plain["detail"] and "already replays CUDA graphs" not in plain["detail"]
    assert "reduce-overhead" not in graphs["detail"] and "already replays CUDA graphs" in graphs["detail"]
    assert graphs["numbers"]["graph_launches_per_step"] == 1.0
    # idle: 0..500 waiting for the launch (410 > 0: host wait), 600..1000 after the last kernel
    assert graphs["numbers"]["host_wait_us"] == 900.0 and graphs["saving_us"] == 900.0
    assert "the GPU waits 900 us for the host" in graphs["detail"]


# -- issue 18's cases on real traces ---------------------------------------------------------

def test_item_logging_sync_saves_about_nothing():
    """One `.item()` a step in a host-bound run: the host waits, but the GPU had nothing queued."""
    found = {f["id"]: f for f in findings("tests/data/h200/item_logging")}
    sync = found["host_device_sync"]
    assert sync["severity"] == "low" and sync["saving_ratio"] < 0.02
    assert sync["saving_us"] < sync["numbers"]["blocked_per_step_us"]
    assert "h2d_copy_in_step" not in found or found["h2d_copy_in_step"]["severity"] == "low"
    # the sync's saving is part of the GPU's idle, which the utilization finding claims
    assert sync["included_in"] == "low_gpu_utilization"


def test_a_cuda_graph_run_is_told_where_the_step_goes():
    ov = overview(_read("tests/data/h200/reduce_overhead"))
    found = ov["recommendations"]
    assert not any("reduce-overhead" in f["detail"] or "torch.compile with CUDA graphs" in f["detail"]
                   for f in found)
    top = found[0]
    assert top["id"] == "low_gpu_utilization" and "already replays CUDA graphs" in top["detail"]
    n = top["numbers"]
    assert n["graph_launches_per_step"] >= 1
    # the idle by cause is the Overview's, for the GPU as a whole; the saving leaves kernel waits out
    [gpu] = [a for a in ov["idle"]["average"] if a["device"] == n["device"] and a["stream"] is None]
    assert [n[f"{c}_us"] for c in ("host_wait", "kernel_wait", "other")] == \
        [pytest.approx(gpu[f"{c}_us"], abs=1e-3) for c in ("host_wait", "kernel_wait", "other")]
    assert top["saving_us"] == pytest.approx(gpu["host_wait_us"] + gpu["other_us"], abs=1e-3)
    assert f"{gpu['host_wait_us']:,.0f} us for the host" in top["detail"]


def test_a_first_compiled_call_says_so_on_the_overview():
    tables = _read("tests/data/h200/compile_first_call")
    found = overview(tables)["recommendations"]
    assert found[0]["id"] == "compile_dominated"
    compile_us = compile_breakdown(tables)["total_us"]  # the torch.compile view's total
    steps = found[0]["numbers"]["steps_us"]
    assert found[0]["saving_us"] == pytest.approx(min(compile_us, steps), abs=1e-3)
    assert found[0]["severity"] == "high" and compile_us > 0.9 * steps


def profiler_step_us(folder: str) -> float:
    """The mean host ProfilerStep duration, read from the raw JSON."""
    with gzip.open(trace_file(folder)) as f:
        events = json.load(f)["traceEvents"]
    durations = [e["dur"] for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                 and e["name"].startswith("ProfilerStep#")]
    return float(np.mean(durations))


def test_loss_sync_saving_matches_the_fix():
    """The demo's loss, before and after moving its host-device syncs and in-step copies out: the
    steps get 2.10 ms shorter (6.99 -> 4.88 ms); the sync finding predicts 2.29 ms (+9%). Tolerance
    20%, tighter than issue 18's 30%."""
    measured = profiler_step_us("examples/logdir/loss_sync_before") - profiler_step_us("examples/logdir/loss_sync_after")
    assert measured == pytest.approx(2103, abs=5)
    found = {f["id"]: f for f in findings("examples/logdir/loss_sync_before")}
    sync = found["host_device_sync"]
    assert sync["saving_us"] == pytest.approx(measured, rel=0.20)
    assert sync["severity"] == "high"
    # the copies' saving is inside the sync's: not to be added
    assert found["h2d_copy_in_step"]["included_in"] == "host_device_sync"
    assert found["h2d_copy_in_step"]["saving_us"] <= sync["saving_us"]


def _two_gpus() -> Trace:
    """One step (0..300 us); GPU 0 runs 10..110 and 150..250, GPU 1 runs 20..60 (launched at 15)."""
    t = Trace()
    t.step(1, 0, 300)
    t.launch(5, 3, 10, 100)
    t.launch(140, 3, 150, 100)
    t.launch(15, 3, 20, 40, device=1)
    return t


def test_each_gpu_has_its_gaps_and_the_rules_read_the_busiest():
    ctx = rule_context(_two_gpus())
    gaps = ctx.device_gaps
    assert sorted(gaps) == [0, 1]
    assert (gaps[0].starts.tolist(), gaps[0].ends.tolist()) == ([0, 110, 250], [10, 150, 300])
    assert (gaps[1].starts.tolist(), gaps[1].ends.tolist()) == ([0, 60], [20, 300])
    assert ctx.gpu == 0 and ctx.gaps is gaps[0]


def test_the_overview_hands_its_gaps_to_the_rules():
    given = {0: Gaps(np.array([1.0]), np.array([2.0]), np.array([HOST_WAIT]))}
    ctx = rule_context(_two_gpus(), kernel_gaps=given)
    assert ctx.device_gaps is given and ctx.gaps is given[0]


def test_once_computes_an_intermediate_once_per_context():
    calls = []

    def counted(ctx):
        calls.append(ctx)
        return len(calls)

    ctx, other = rule_context(_two_gpus()), rule_context(_two_gpus())
    assert [ctx.once(counted), ctx.once(counted), other.once(counted)] == [1, 1, 2]
