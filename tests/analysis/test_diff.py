"""Diff of two selections (server/analysis/diff.py): statuses and noise bars on synthetic traces, and on
two real pairs the step delta, kernel sums and statuses computed again from the raw JSON events:
the demo's loss_sync_before/after and ResNet-50 fp32 against AMP bf16, both recorded on an H200."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from profboard.server.analysis.diff import NOISE_FLOOR_US, VERDICT_BAND, compare, side, status, verdict
from profboard.server.analysis.modules import module_view
from profboard.server.analysis.tensor_cores import uses_tensor_cores
from profboard.server.items import Derivation
from profboard.server.trace.load import parse_trace
from synth import ELEMENTWISE, TC_GEMM, Trace, parse

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples/logdir"
DEVICE = REPO / "tests/data/diff"


def side_of(tables):
    items = Derivation(None, lambda: tables, "w")
    tree = items.get("optree")
    return side(tables, items.get("overview"), tree, module_view(tables, tree, items.get("flows"))["modules"])


def read_pair(folder: Path, base: str, new: str):
    """Each run's trace file, raw events, overview and diff side."""
    out = []
    for run in (base, new):
        path = trace_file(folder / run)
        tables = parse_trace(str(path))
        out.append((raw_events(path), Derivation(None, lambda: tables, "w").get("overview"), side_of(tables)))
    return out


def trace_file(run_dir: Path) -> Path:
    [path] = run_dir.glob("*.pt.trace.json*")
    return path


def raw_events(path: Path) -> list[dict]:
    with (gzip.open(path) if path.suffix == ".gz" else open(path, "rb")) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def host_steps(events: list[dict]) -> list[dict]:
    return sorted((e for e in events if e["name"].startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"),
                  key=lambda e: e["ts"])


def raw_step_mean(events: list[dict]) -> float:
    steps = host_steps(events)
    return sum(e["dur"] for e in steps) / len(steps)


def raw_step_ends(events: list[dict]) -> list[float]:
    """Each ProfilerStep's end, extended to the end of the GPU work launched from within it (the
    runtime call with the device event's correlation id starts inside the host range)."""
    steps = host_steps(events)
    launched = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ends = [s["ts"] + s["dur"] for s in steps]
    for e in events:
        at = launched.get(e.get("args", {}).get("correlation")) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") else None
        for i, s in enumerate(steps):
            if at is not None and s["ts"] <= at <= s["ts"] + s["dur"]:
                ends[i] = max(ends[i], e["ts"] + e["dur"])
    return ends


def raw_kernels_per_step(events: list[dict], span: tuple[float, float], n: int) -> dict[str, float]:
    """Kernel time per name and step: the raw kernels starting within the steps' span."""
    lo, hi = span
    sums: dict[str, float] = defaultdict(float)
    for e in events:
        if e.get("cat") == "kernel" and lo <= e["ts"] < hi:
            sums[e["name"]] += e["dur"] / n
    return sums


# -- rules ------------------------------------------------------------------------------------------


def test_status_needs_both_noise_bars():
    assert status(None, {"device_us": 3}) == "added" and status({"device_us": 3}, None) == "removed"
    assert status({"device_us": 1}, {"device_us": 1 + NOISE_FLOOR_US}) == "unchanged"  # +500%, under the floor
    assert status({"device_us": 10_000}, {"device_us": 10_400}) == "unchanged"  # 400 us, under 5%
    assert status({"device_us": 10_000}, {"device_us": 10_600}) == "increased"
    # The larger changed time decides: a sync's host time falls while its copy's device time grows.
    assert status({"device_us": 2, "host_us": 1000}, {"device_us": 9, "host_us": 40}) == "decreased"


def test_verdict_band():
    assert verdict(VERDICT_BAND) == "unchanged" and verdict(-VERDICT_BAND) == "unchanged"
    assert verdict(0.03) == "regression" and verdict(-0.03) == "improvement" and verdict(None) == "unchanged"


def steps_with(kernels: list[tuple[str, float]], steps: int) -> Trace:
    """`steps` steps of 1000 us, each launching `kernels` (name, duration) from one operator."""
    t = Trace()
    for s in range(steps):
        start = s * 1000
        t.step(s + 1, start, 1000)
        op = t.op("aten::mm", start + 10, 100)
        for k, (name, dur) in enumerate(kernels):
            t.launch(start + 20 + k, 2, start + 200 + 100 * k, dur, name=name, external_id=op["args"]["External id"])
    return t


def test_runs_of_different_step_counts_compare_per_step():
    base = side_of(parse(steps_with([(TC_GEMM, 50), (ELEMENTWISE, 10)], steps=2).build()))
    new = side_of(parse(steps_with([(TC_GEMM, 80)], steps=3).build()))
    out = compare(base, new)
    assert out["step_count"] == {"base": 2, "new": 3}
    kernels = {k["name"]: k for k in out["kernels"]}
    assert kernels[TC_GEMM] == {"name": TC_GEMM, "status": "increased", "base_calls": 1, "new_calls": 1,
                                "base_device_us": 50, "new_device_us": 80, "delta_device_us": 30}
    assert kernels[ELEMENTWISE]["status"] == "removed" and kernels[ELEMENTWISE]["delta_device_us"] == -10
    assert [k["name"] for k in out["kernels"]] == [TC_GEMM, ELEMENTWISE]  # largest |delta| first
    [mm] = out["operators"]
    assert (mm["name"], mm["base_calls"], mm["new_calls"], mm["base_device_us"], mm["new_device_us"]) == \
        ("aten::mm", 1, 1, 60, 80)


# -- real pairs -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loss_sync():
    return read_pair(DEMO, "loss_sync_before", "loss_sync_after")


@pytest.fixture(scope="module")
def resnet():
    return read_pair(DEVICE, "resnet50_fp32", "resnet50_amp_bf16")


@pytest.fixture(scope="module")
def transformer():
    return read_pair(DEVICE, "transformer_adamw_fp32", "transformer_adamw_bf16")


def check_against_raw_events(pair, out: dict) -> None:
    """The average steps from the raw events: each step ends where its ProfilerStep range or the GPU
    work it launched ends, and begins at the previous step's end or its own ProfilerStep's start,
    whichever is later (the first step's start, after the GPU work launched before the steps, is
    the Overview's); kernel sums per step from the raw kernels within the steps."""
    averages = []
    for raw, overview, side_ in pair:
        ends, starts = raw_step_ends(raw), [s["ts"] for s in host_steps(raw)]
        steps = overview["steps"]
        assert len(steps) == len(ends)
        assert [s["end_us"] for s in steps] == pytest.approx(ends, abs=1e-3)
        totals = [ends[0] - steps[0]["start_us"]] + [b - max(a, start) for a, b, start in zip(ends, ends[1:], starts[1:])]
        assert [s["total_us"] for s in steps] == pytest.approx(totals, abs=2e-3)
        averages.append(sum(totals) / len(totals))
    assert out["step_delta_ratio"] == pytest.approx(averages[1] / averages[0] - 1, abs=1e-5)
    per_step = [raw_kernels_per_step(raw, s.span, s.steps) for raw, _, s in pair]
    kernels = {k["name"]: k for k in out["kernels"]}
    assert set(kernels) == set(per_step[0]) | set(per_step[1])
    for name, row in kernels.items():
        assert row["base_device_us"] == pytest.approx(per_step[0].get(name, 0.0), abs=2e-3)
        assert row["new_device_us"] == pytest.approx(per_step[1].get(name, 0.0), abs=2e-3)
        expected = {"added"} if name not in per_step[0] else {"removed"} if name not in per_step[1] else \
            {"increased", "decreased", "unchanged"}
        assert row["status"] in expected, (name, row)


def compared(pair) -> dict:
    (_, _, base), (_, _, new) = pair
    return compare(base, new)


def test_demo_loss_sync_fix_is_an_improvement(loss_sync):
    out = compared(loss_sync)
    check_against_raw_events(loss_sync, out)
    # Here the host keeps pace with the GPU: the ProfilerStep ranges alone give the same change.
    raw_ratio = raw_step_mean(loss_sync[1][0]) / raw_step_mean(loss_sync[0][0]) - 1
    assert out["step_delta_ratio"] == pytest.approx(raw_ratio, abs=0.01)
    assert out["verdict"] == "improvement" and out["step_delta_ratio"] < -0.2
    # The sync: loss.item() each step on a tensor copied from the host; the fix drops the copies.
    ops = {o["name"]: o for o in out["operators"]}
    for name in ("aten::to", "aten::_to_copy", "aten::copy_", "aten::item", "aten::_local_scalar_dense"):
        assert ops[name]["status"] in ("removed", "decreased"), name
    assert ops["aten::copy_"]["new_calls"] < ops["aten::copy_"]["base_calls"]
    assert ops["aten::to"]["delta_host_us"] < -1000  # the blocked host time of the sync
    assert out["steps"]["delta"]["memcpy_us"] < 0 and out["steps"]["new"]["memcpy_us"] == 0  # no H2D copies left
    assert "host_device_sync" in out["recommendations"]["resolved"]
    assert "h2d_copy_in_step" in out["recommendations"]["resolved"]
    assert out["gpu"]["delta"]["utilization_ratio"] > 0.1


def test_resnet50_amp_replaces_tf32_kernels_with_bf16_tensor_core_kernels(resnet):
    out = compared(resnet)
    check_against_raw_events(resnet, out)
    (raw32, _, fp32), (raw16, _, bf16) = resnet
    assert out["step_delta_ratio"] == pytest.approx(raw_step_mean(raw16) / raw_step_mean(raw32) - 1, abs=0.01)
    # On these traces AMP made the step slower: batch norm leaves cuDNN for PyTorch's channels-last kernels.
    assert out["verdict"] == "regression"
    by_status = defaultdict(list)
    for k in out["kernels"]:
        by_status[k["status"]].append(k["name"])
    tc_added, tc_removed = ([n for n in by_status[s] if uses_tensor_cores(pd.Series([n], dtype="category"))[0]]
                            for s in ("added", "removed"))
    # Convolutions (cuDNN's xmma/cutlass kernels) and GEMMs (cuBLAS's, nvjet for bf16 on sm90):
    # every tensor-core kernel of fp32 ran TF32 and is gone; every one AMP added runs bf16.
    assert len(tc_added) > 20 and len(tc_removed) > 20
    assert all(any(w in n for w in ("tf32", "tfloat32", "s1688gemm")) for n in tc_removed)
    assert all(any(w in n for w in ("bf16", "bfloat16", "nvjet_sm90")) for n in tc_added)
    assert not any("tf32" in n for status, names in by_status.items() if status != "removed" for n in names)
    # fp32 on an H200 already ran TF32 tensor-core convolutions and GEMMs (cuDNN allows TF32 by
    # default), so tensor_cores_unused is raised by neither run: there is nothing to resolve.
    assert "tensor_cores_unused" not in fp32.recommendations + bf16.recommendations
    assert fp32.gpu["tensor_core_ratio"] > 0.3
    assert any("ffma" in n or "sgemm" in n for n in by_status["removed"])  # the few FFMA GEMMs of fp32 are gone
    # bf16 activations: the peak falls from 5.9 GB to 3.3 GB.
    assert out["memory"]["delta_bytes"] == out["memory"]["new_peak_bytes"] - out["memory"]["base_peak_bytes"] < -2e9


def test_transformer_amp_is_an_improvement_the_host_ranges_hide(transformer):
    """fp32 is GPU-bound: its host runs two steps ahead (the last ProfilerStep range ends 57 ms before
    its GPU work), so the ProfilerStep ranges say bf16 is 28% slower; per step of GPU work fp32 takes
    31.1 ms, bf16 26.6 ms (host-bound)."""
    out = compared(transformer)
    check_against_raw_events(transformer, out)
    (raw32, _, fp32), (raw16, _, bf16) = transformer
    assert raw_step_mean(raw16) / raw_step_mean(raw32) - 1 > 0.25
    assert out["verdict"] == "improvement" and out["step_delta_ratio"] == pytest.approx(-0.143, abs=1e-3)
    kernels = out["kernels"]
    removed = [k["name"] for k in kernels if k["status"] == "removed"]
    added = [k["name"] for k in kernels if k["status"] == "added"]
    # The largest changes: fp32's FFMA GEMMs and f32 attention kernels gone (the 8 largest), bf16
    # tensor-core GEMMs (cuBLAS's nvjet) and cuDNN's flash attention in their place, with autocast's casts.
    assert [k["status"] for k in kernels[:8]] == ["removed"] * 8
    gemms = [n for n in removed[:8] if "gemm" in n]
    assert len(gemms) == 6 and not uses_tensor_cores(pd.Series(gemms, dtype="category")).any()
    assert all("ffma" in n or "simt_sgemm" in n or "_f32_" in n for n in removed[:8])
    top_added = [k["name"] for k in kernels[:20] if k["status"] == "added"]
    tensor = uses_tensor_cores(pd.Series(top_added, dtype="category"))
    assert [n for n, tc in zip(top_added, tensor) if tc] == [n for n in top_added if "nvjet" in n or "sdpa" in n]
    assert all("copy" in n or "BFloat16" in n or "elementwise" in n for n, tc in zip(top_added, tensor) if not tc)
    assert len(added) > 10
    ops = {o["name"]: o for o in out["operators"]}
    assert out["operators"][0]["name"] == "aten::mm" and ops["aten::mm"]["status"] == "decreased"
    # The fp32 run raises tensor_cores_unused (matrix math on FFMA); bf16 resolves it.
    assert "tensor_cores_unused" in fp32.recommendations and "tensor_cores_unused" in out["recommendations"]["resolved"]
    assert out["gpu"]["delta"]["tensor_core_ratio"] > 0.2
