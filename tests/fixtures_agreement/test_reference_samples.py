"""Overview, operator and kernel numbers agree with the reference plugin's answers on its samples.

`kineto_samples/tb_plugin_expected_responses.txt` holds torch-tb-profiler's responses for
worker0 span 1 of each sample run (ten JSON lines: overview, op pie, op table, kernel table,
kernel pie per run). The reference rounds durations to whole microseconds and percentages to
two decimals, so durations must agree to 1 us and ratios to 0.01 percentage points.

The reference has no Communication column (these runs have no NCCL), and reports "Kernel
Time using Tensor Cores" as 0.0 % (V100, FP32). Its tensor-core % of an operator without
device time is 0; profboard leaves it empty (README, deliberate differences).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest

from shared_traces import FIXTURES, FixtureTrace, first_trace

SAMPLES = FIXTURES / "kineto_samples"
EXPECTED = SAMPLES / "tb_plugin_expected_responses.txt"
# run -> line of its overview response in EXPECTED
OVERVIEW_LINE = {"resnet50_num_workers_0": 0, "resnet50_num_workers_4": 5}
# the reference's column names -> profboard's keys
COLUMNS = {"Kernel": "kernel_us", "Memcpy": "memcpy_us", "Memset": "memset_us", "Runtime": "runtime_us",
           "DataLoader": "dataloader_us", "CPU Exec": "cpu_exec_us", "Other": "other_us"}
GPU_METRICS = {"GPU Utilization": "utilization_ratio", "Est. SM Efficiency": "sm_efficiency_ratio",
               "Est. Achieved Occupancy": "achieved_occupancy_ratio",
               "Kernel Time using Tensor Cores": "tensor_core_ratio"}
RUNS = sorted(OVERVIEW_LINE)
# worker0 span 1 of each run, as the reference answered for
SPAN_1 = first_trace(*(f"kineto_samples/{run}" for run in RUNS))

pytestmark = pytest.mark.skipif(not EXPECTED.exists(), reason=f"reference samples not found at {SAMPLES}")


@lru_cache(maxsize=None)
def expected(run: str) -> dict:
    """The reference's overview of `run`, reduced to plain numbers."""
    lines = EXPECTED.read_text().splitlines()
    assert len(lines) == 10, f"{EXPECTED} should hold 10 JSON lines, has {len(lines)}"
    raw = json.loads(lines[OVERVIEW_LINE[run]])
    names = [c["name"] for c in raw["steps"]["columns"] if c.get("role") != "tooltip"]
    assert names[0] == "Step" and set(names[1:]) == set(COLUMNS), names
    steps = []
    for row in raw["steps"]["rows"]:
        values = [v for v in row if not (isinstance(v, str) and v.startswith("<"))]
        tooltip = next(v for v in row if isinstance(v, str) and v.startswith("<"))
        step = {"step": values[0], "total_us": float(re.search(r"Total: (\d+(?:\.\d+)?)us", tooltip).group(1))}
        step |= {COLUMNS[name]: float(value) for name, value in zip(names[1:], values[1:])}
        steps.append(step)
    [performance] = raw["performance"]
    average = {"total_us": float(performance["value"])}
    average |= {COLUMNS[child["name"]]: float(child["value"]) for child in performance["children"]}
    metrics = {item["title"].rstrip(":"): item["value"] for item in raw["gpu_metrics"]["data"]}
    gpu = {key: float(metrics[title].rstrip(" %")) for title, key in GPU_METRICS.items()}
    gpu |= {"name": metrics["Name"], "memory_gb": float(metrics["Memory"].removesuffix(" GB")),
            "compute_capability": metrics["Compute Capability"]}
    return {"steps": steps, "average": average, "gpu": gpu}


def _ops_kernels(trace: FixtureTrace) -> tuple[dict, dict]:
    from profboard.server.analysis.kernels import kernel_table
    from profboard.server.analysis.operators import op_instances, operator_table

    instances, _ = op_instances(trace.tables.events, trace.tree)
    return ({r["name"]: r for r in operator_table(instances)},
            {r["name"]: r for r in kernel_table(trace.tables.events, trace.tree)})


def profboard_ops_kernels(trace: FixtureTrace) -> tuple[dict, dict]:
    """profboard's operator and kernel rows of the trace, keyed by name."""
    return trace.derived(_ops_kernels)


def expected_line(run: str, offset: int) -> dict:
    """Line `offset` (1 op pie, 2 op table, 3 kernel table, 4 kernel pie) after the run's overview."""
    return json.loads(EXPECTED.read_text().splitlines()[OVERVIEW_LINE[run] + offset])


def assert_durations(got: dict, want: dict, where: str) -> None:
    for key, value in want.items():
        if key == "step":
            continue
        assert abs(got[key] - value) <= 1.0, f"{where} {key}: profboard {got[key]} vs reference {value}"
    # No NCCL in these runs; the reference has no Communication column.
    assert got["communication_us"] == 0, f"{where}: communication_us {got['communication_us']}"


def assert_percent(ratio: float | None, percent: float, what: str) -> None:
    assert ratio is not None, f"{what}: profboard has no value, reference {percent} %"
    assert abs(ratio * 100 - percent) <= 0.01 + 1e-9 or round(ratio * 100, 2) == percent, \
        f"{what}: profboard {ratio * 100:.4f} % vs reference {percent} %"


@SPAN_1
def test_steps_and_breakdown(fixture_trace):
    run = fixture_trace.path.parent.name
    got, want = fixture_trace.overview, expected(run)
    assert [s["step"] for s in got["steps"]] == [s["step"] for s in want["steps"]]
    for got_step, want_step in zip(got["steps"], want["steps"]):
        assert_durations(got_step, want_step, f"{run} step {want_step['step']}")


@SPAN_1
def test_average(fixture_trace):
    run = fixture_trace.path.parent.name
    assert_durations(fixture_trace.overview["average"], expected(run)["average"], f"{run} average")


@SPAN_1
def test_gpu_summary(fixture_trace):
    run = fixture_trace.path.parent.name
    got, want = fixture_trace.overview, expected(run)["gpu"]
    [gpu] = got["gpus"]
    assert gpu["device"] == 0
    assert gpu["name"] == want["name"]
    assert gpu["compute_capability"] == want["compute_capability"]
    assert round(gpu["memory_bytes"] / (1 << 30), 2) == want["memory_gb"]
    for title, key in GPU_METRICS.items():
        assert_percent(gpu[key], want[key], f"{run} {title}")


@SPAN_1
def test_no_warnings_on_clean_samples(fixture_trace):
    run = fixture_trace.path.parent.name
    assert fixture_trace.overview["warnings"] == []


def test_cli_summary_agrees_with_the_reference(tmp_path, capsys):
    from profboard.server.cli import main

    run = RUNS[0]
    assert main(["summary", str(SAMPLES), "--run", run, "--span", "1", "--json", "--cache-dir", str(tmp_path)]) == 0
    got, want = json.loads(capsys.readouterr().out), expected(run)
    assert [s["step"] for s in got["steps"]] == [s["step"] for s in want["steps"]]
    for got_step, want_step in zip(got["steps"], want["steps"]):
        assert_durations(got_step, want_step, f"CLI {run} step {want_step['step']}")
    assert_durations(got["average"], want["average"], f"CLI {run} average")
    [gpu] = got["gpus"]
    for title, key in GPU_METRICS.items():
        assert_percent(gpu[key], want["gpu"][key], f"CLI {run} {title}")


@SPAN_1
def test_operator_table(fixture_trace):
    run = fixture_trace.path.parent.name
    ops, _ = profboard_ops_kernels(fixture_trace)
    want = {row["name"]: row for row in expected_line(run, 2)["data"]}
    assert set(ops) == set(want)
    for name, ref in want.items():
        got = ops[name]
        assert got["calls"] == ref["calls"], name
        for ours, theirs in (("device_self_us", "device_self_duration"), ("device_total_us", "device_total_duration"),
                             ("host_self_us", "host_self_duration"), ("host_total_us", "host_total_duration")):
            assert abs(got[ours] - ref[theirs]) <= 1.0, f"{name} {ours}: {got[ours]} vs reference {ref[theirs]}"
        assert got["tc_eligible"] == (ref["tc_eligible"] == "Yes"), name
        for key in ("tc_self_ratio", "tc_total_ratio"):
            assert abs((got[key] or 0.0) - ref[key]) <= 1e-4, f"{name} {key}"
        assert got["has_call_stack"] == ref["has_call_stack"], name


@SPAN_1
def test_operator_pies_are_the_table_values(fixture_trace):
    run = fixture_trace.path.parent.name
    ops, _ = profboard_ops_kernels(fixture_trace)
    pies = expected_line(run, 1)
    for pie, key in (("device_self_time", "device_self_us"), ("device_total_time", "device_total_us"),
                     ("host_self_time", "host_self_us"), ("host_total_time", "host_total_us")):
        for name, value in pies[pie]["rows"]:
            assert abs(ops[name][key] - value) <= 1.0, f"{pie} {name}"


@SPAN_1
def test_kernel_table_and_pie(fixture_trace):
    run = fixture_trace.path.parent.name
    _, kernels = profboard_ops_kernels(fixture_trace)
    table = expected_line(run, 3)["data"]
    columns = [c["name"] for c in table["columns"]]
    want = {row[0]: dict(zip(columns, row)) for row in table["rows"]}
    assert set(kernels) == set(want)
    for name, ref in want.items():
        got = kernels[name]
        assert got["calls"] == ref["Calls"], name
        for ours, theirs in (("total_us", "Total Duration (us)"), ("mean_us", "Mean Duration (us)"),
                             ("max_us", "Max Duration (us)"), ("min_us", "Min Duration (us)")):
            assert abs(got[ours] - ref[theirs]) <= 1.0, f"{name} {ours}"
        assert got["tensor_cores"] == (ref["Tensor Cores Used"] == "Yes"), name
        assert abs(got["blocks_per_sm"] - ref["Mean Blocks Per SM"]) <= 0.005 + 1e-9, name
        if ref["Mean Est. Achieved Occupancy (%)"] == 0:
            # Every call's occupancy was 0, Kineto's "not estimated": n/a here, 0 % there (README: differences).
            assert got["achieved_occupancy_ratio"] is None, name
        else:
            assert_percent(got["achieved_occupancy_ratio"], ref["Mean Est. Achieved Occupancy (%)"], f"{name} occupancy")
    for name, value in expected_line(run, 4)["total"]["rows"]:
        assert abs(kernels[name]["total_us"] - value) <= 1.0, name
