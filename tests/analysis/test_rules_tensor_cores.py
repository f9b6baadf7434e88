"""tensor_cores_unused on small synthetic steps (times in us)."""

from __future__ import annotations

import pytest

from profboard.server.analysis.rules.tensor_cores import tensor_cores_unused
from synth import ELEMENTWISE, TC_GEMM, Trace, rule_context

SGEMM = "void magma_sgemmEx_kernel<float, float, float, false, false, 6, 4, 6, 3, 4>(int, int, int)"


def op(t: Trace, name: str, ts: float, dur: float, ext: int, types: list[str] | None = None) -> None:
    args = {"External id": ext}
    if types is not None:
        args["Input type"] = types
    t.complete(t.cat("op"), name, ts, dur, **args)


def fp32_step(unused_us: float, major: int = 9) -> Trace:
    """One 1000 us step: an fp32 mm on CUDA cores for `unused_us`, another mm on tensor cores."""
    t = Trace()
    t.device(0, major=major)
    t.step(1, 0, 1000)
    op(t, "aten::mm", 10, 10, ext=101, types=["float", "float"])
    t.launch(12, 2, 100, unused_us, name=SGEMM, external_id=101)
    op(t, "aten::mm", 30, 10, ext=102, types=["float", "float"])
    t.launch(32, 2, 600, 200, name=TC_GEMM, external_id=102)
    return t


def test_fp32_matmul_without_tensor_cores():
    [found] = tensor_cores_unused(rule_context(fp32_step(250)))
    # 250 us of the 1000 us step = 25%, over 10%; at 2x faster on tensor cores, 125 us saved (12.5%): high
    assert (found["saving_us"], found["saving_ratio"], found["severity"]) == (125.0, 0.125, "high")
    assert found["numbers"] == {"device": 0, "unused_per_step_us": 250.0, "unused_ratio": 0.25,
                                "compute_capability": "9.0", "input_types": ["float"]}
    assert found["thresholds"] == {"unused_ratio": 0.1, "assumed_speedup": 2.0, "min_compute_capability": 7.0,
                                   "high_saving_ratio": 0.1, "medium_saving_ratio": 0.02}
    [item] = found["evidence"]
    assert (item["op"], item["calls"], item["unused_us"], item["start_us"]) == ("aten::mm", 1, 250.0, 10)
    # the other mm call used tensor cores, so precision settings allow them: the advice is about shapes
    assert item["tensor_cores_elsewhere"] and "multiples of 8" in found["detail"]


def test_severity_follows_the_saving():
    [found] = tensor_cores_unused(rule_context(fp32_step(150)))  # 15% unused, 75 us saved: 7.5%
    assert (found["saving_us"], found["severity"]) == (75.0, "medium")


def test_under_the_bar_is_quiet():
    assert tensor_cores_unused(rule_context(fp32_step(90))) == []  # 9% < 10%


@pytest.mark.parametrize("major", [6, None], ids=["pascal", "no-properties"])
def test_only_gpus_with_tensor_cores(major):
    t = fp32_step(500, major=major or 9)
    if major is None:
        t.devices.clear()
    assert tensor_cores_unused(rule_context(t)) == []


@pytest.mark.parametrize("major, tf32", [(8, True), (7, False)], ids=["ampere-tf32", "volta-no-tf32"])
def test_precision_advice(major, tf32):
    t = Trace()
    t.device(0, major=major)
    t.step(1, 0, 1000)
    op(t, "aten::addmm", 10, 10, ext=101, types=["float", "float", "float"])
    t.launch(12, 2, 100, 500, name=SGEMM, external_id=101)
    [found] = tensor_cores_unused(rule_context(t))
    assert "autocast" in found["detail"]
    assert ("allow_tf32" in found["detail"]) == tf32


def test_autocast_casts_under_linear_are_not_counted():
    """aten::linear -> aten::to (cast kernel, no tensor cores) + aten::addmm (tensor cores)."""
    t = Trace()
    t.device(0)
    t.step(1, 0, 1000)
    op(t, "aten::linear", 10, 50, ext=101)
    op(t, "aten::to", 12, 10, ext=102)
    t.launch(14, 2, 100, 400, name=ELEMENTWISE, external_id=102)
    op(t, "aten::addmm", 30, 20, ext=103)
    t.launch(32, 2, 500, 300, name=TC_GEMM, external_id=103)
    assert tensor_cores_unused(rule_context(t)) == []


def test_half_precision_advice_is_about_shapes():
    t = Trace()
    t.device(0)
    t.step(1, 0, 1000)
    op(t, "aten::mm", 10, 10, ext=101, types=["c10::BFloat16", "c10::BFloat16"])
    t.launch(12, 2, 100, 500, name="gemv2T_kernel_val<int, int, __nv_bfloat16>", external_id=101)
    [found] = tensor_cores_unused(rule_context(t))
    assert found["numbers"]["input_types"] == ["c10::BFloat16"]
    assert "multiples of 8" in found["detail"] and "autocast" not in found["detail"]
