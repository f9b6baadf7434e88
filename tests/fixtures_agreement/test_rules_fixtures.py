"""The sync, copy, tensor-core, memory and DataParallel rules on real traces: the loss with
host-device syncs fires where it should and points into the loss; every other trace stays
quiet except where a performance engineer would agree (fp32 convolutions on CUDA cores)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from profboard.server.analysis.overview import overview
from profboard.server.trace.load import parse_trace_bytes
from profboard.server.trace.read import read_trace_bytes
from shared_traces import first_trace

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
MINE = {"host_device_sync", "h2d_copy_in_step", "tensor_cores_unused", "memory_near_limit", "ddp_instead_of_dp"}


def mine(recommendations) -> dict[str, dict]:
    """The findings of the rules above, by id."""
    return {f["id"]: f for f in recommendations if f["id"] in MINE}


@lru_cache(maxsize=None)
def _recommendations(path: str) -> tuple[dict, ...]:
    tables = parse_trace_bytes(read_trace_bytes(path, 1 << 33).data)
    return tuple(overview(tables)["recommendations"])


def findings(folder: Path) -> dict[str, dict]:
    """This folder's first trace's findings of the rules above, by id."""
    return mine(_recommendations(str(sorted(folder.glob("*.pt.trace.json*"))[0])))


@first_trace("h100/loss_sync_before")
def test_loss_sync_before_points_into_the_loss(fixture_trace):
    found = mine(fixture_trace.overview["recommendations"])
    sync, copy = found["host_device_sync"], found["h2d_copy_in_step"]
    # The .cuda() of the CPU-built weight waits for the GPU (2-7 ms a step): high.
    assert sync["severity"] == "high" and sync["numbers"]["syncs_per_step"] == 3
    assert sync["numbers"]["blocked_ratio"] > 0.1
    sites = {(e["op"], e["via"], e["frame"]) for e in sync["evidence"]}
    assert sites == {("aten::to", "aten::copy_", "loss_sync.py(30): forward"),
                     ("aten::is_nonzero", "aten::_local_scalar_dense", "loss_sync.py(22): weighted_nll"),
                     ("aten::to", "aten::copy_", "loss_sync.py(22): weighted_nll")}
    item = next(e for e in sync["evidence"] if e["op"] == "aten::is_nonzero")
    assert item["calls"] == ["cudaMemcpyAsync", "cudaStreamSynchronize"] and item["count"] == 3
    # Two pageable copies a step (the weight, 40 B, and the range index, 2048 B), both in the loss.
    assert copy["numbers"]["copies_per_step"] == 2 and copy["numbers"]["per_step_bytes"] == 2088
    assert {e["frame"] for e in copy["evidence"]} == {"loss_sync.py(30): forward", "loss_sync.py(22): weighted_nll"}
    for item in sync["evidence"] + copy["evidence"]:
        assert item["event_id"] >= 0 and item["start_us"] <= item["end_us"]


@first_trace("h100/loss_sync_after")
def test_loss_sync_after_is_quiet(fixture_trace):
    found = mine(fixture_trace.overview["recommendations"])
    assert "host_device_sync" not in found and "h2d_copy_in_step" not in found


def test_item_logging_is_a_cheap_sync():
    found = findings(DATA / "h200" / "item_logging")
    sync = found["host_device_sync"]
    assert sync["severity"] == "low" and sync["numbers"]["syncs_per_step"] == 1
    assert [(e["op"], e["frame"]) for e in sync["evidence"]] == [("aten::item", "make_rule_traces.py(69): step")]
    assert set(found) == {"host_device_sync"}


# Which of these rules fire on every other trace. fp32 convolutions without tensor cores: the
# 2021 V100 samples (no TF32 on Volta; AMP would use them) and the loss fixtures' tiny-channel
# CNN (3 -> 8 -> 12 ... channels: cuDNN picks non-tensor-core kernels for 18-20% of the step).
EXPECTED = {
    "h100/resnet50_fp32": set(),
    "h100/compile_resnet18": set(),
    "h100/compile_graph_breaks": set(),
    "h100/loss_sync_after": {"tensor_cores_unused"},
    "h100/loss_sync_before": {"host_device_sync", "h2d_copy_in_step", "tensor_cores_unused"},
    "h200x4/ddp_resnet50": set(),
    "kineto_samples/resnet50_num_workers_0": {"tensor_cores_unused"},
    "kineto_samples/resnet50_num_workers_4": {"tensor_cores_unused"},
    "big/gpt_big_bf16": set(),
}
OWN = {
    "bf16_transformer": set(),
    "launch_bound_eager": set(),
    "reduce_overhead": set(),
    "compile_first_call": set(),
}


@first_trace(*EXPECTED)
def test_shared_fixture(fixture_trace):
    assert set(mine(fixture_trace.overview["recommendations"])) == EXPECTED[fixture_trace.run]


@pytest.mark.parametrize("name", sorted(OWN))
def test_own_h200_trace(name):
    assert set(findings(DATA / "h200" / name)) == OWN[name]


@first_trace("kineto_samples/resnet50_num_workers_0")
def test_volta_fp32_advice_has_no_tf32(fixture_trace):
    found = mine(fixture_trace.overview["recommendations"])["tensor_cores_unused"]
    assert found["numbers"]["compute_capability"] == "7.0" and found["severity"] == "high"
    assert "autocast" in found["detail"] and "allow_tf32" not in found["detail"]
    assert found["evidence"][0]["op"] == "aten::cudnn_convolution_backward_weight"


def test_a_first_compiled_call_is_not_called_low_utilization():
    """The GPU waits on the compiler for most of a first call's trace: that is the compile's time
    (the torch.compile view), not a steady-state utilization problem."""
    path = next((DATA / "h200" / "compile_first_call").glob("*.pt.trace.json.gz"))
    tables = parse_trace_bytes(read_trace_bytes(str(path)).data)
    ov = overview(tables)
    assert ov["gpus"][0]["utilization_ratio"] < 0.1
    assert "low_gpu_utilization" not in {r["id"] for r in ov["recommendations"]}
