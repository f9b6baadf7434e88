"""host_device_sync and h2d_copy_in_step on small synthetic steps (times in us)."""

from __future__ import annotations

import pytest

from profboard.server.analysis.rules.syncs import h2d_copy_in_step, host_device_sync, user_frame
from synth import TC_GEMM, Trace, rule_context

PINNED = "Memcpy HtoD (Pinned -> Device)"
PAGEABLE = "Memcpy HtoD (Pageable -> Device)"
READ_BACK = "Memcpy DtoH (Device -> Pinned)"


# External ids from 101 on: Trace gives its steps the small ones, and an operator sharing one
# would lose its runtime calls to the step.


def batch_then_model(t: Trace, step_end: float = 1000, pageable_batch: bool = False) -> None:
    """Step 1 (0..step_end): the batch copied at the start, then a matmul launched at 45."""
    t.step(1, 0, step_end)
    t.op("aten::to", 10, 25, external_id=101)
    t.copy(12, 2, 20, 5, external_id=101, name=PAGEABLE if pageable_batch else PINNED)
    if pageable_batch:  # a pageable copy waits for the GPU
        t.runtime("cudaStreamSynchronize", 15, 10, external_id=101)
    t.op("aten::mm", 40, 20, external_id=102)
    t.launch(45, 5, 60, 140, name=TC_GEMM, external_id=102)


def item_at(t: Trace, start: float, ext: int = 103) -> None:
    """`loss.item()`: aten::item > aten::_local_scalar_dense, a 10 us DtoH copy call and a 70 us sync."""
    t.op("aten::item", start, 100, external_id=ext)
    t.op("aten::_local_scalar_dense", start + 5, 90, external_id=ext + 1)
    t.copy(start + 10, 10, start + 30, 1, external_id=ext + 1, name=READ_BACK)
    t.runtime("cudaStreamSynchronize", start + 20, 70, external_id=ext + 1)


def weight_copy_at(t: Trace, start: float, ext: int = 107) -> None:
    """`torch.tensor(w).cuda()` mid-step: a 5 us pageable copy call, then a 40 us sync."""
    t.op("aten::to", start, 100, external_id=ext)
    t.copy(start + 10, 5, start + 20, 1, external_id=ext, name=PAGEABLE, nbytes=40)
    t.runtime("cudaStreamSynchronize", start + 15, 40, external_id=ext)


def test_item_sync_blocks_the_host():
    t = Trace()
    batch_then_model(t)
    item_at(t, 300)
    [found] = host_device_sync(rule_context(t))
    # blocked: DtoH copy call 10 + sync 70 = 80 us of a 1000 us step; but the GPU had finished the
    # matmul (at 200) before the read at 300: nothing drained, no GPU idle caused, so low.
    assert found["numbers"] == {"syncs_per_step": 1.0, "blocked_per_step_us": 80.0, "blocked_ratio": 0.08,
                                "step_us": 1000.0}
    assert (found["severity"], found["saving_us"], found["saving_ratio"]) == ("low", 0.0, 0.0)
    assert found["thresholds"] == {"high_saving_ratio": 0.1, "medium_saving_ratio": 0.02}
    [site] = found["evidence"]
    assert (site["op"], site["via"], site["calls"]) == (
        "aten::item", "aten::_local_scalar_dense", ["cudaMemcpyAsync", "cudaStreamSynchronize"])
    assert (site["start_us"], site["end_us"], site["count"], site["step"]) == (300, 400, 1, "1")


def test_a_sync_that_drains_the_queue_saves_the_gpu_idle_until_the_host_is_ahead():
    """The matmul runs 60..500 while `.item()` waits for it (110..505); then the host launches
    each kernel after the GPU went idle (host waits 500..600 and 650..700) until the third kernel,
    launched at 725, waits behind the second (a kernel wait at 750): the host is ahead again."""
    t = Trace()
    t.step(1, 0, 1000)
    t.op("aten::mm", 10, 20, external_id=101)
    t.launch(15, 5, 60, 440, name=TC_GEMM, external_id=101)
    t.op("aten::item", 100, 420, external_id=103)
    t.op("aten::_local_scalar_dense", 105, 410, external_id=104)
    t.copy(110, 10, 501, 1, external_id=104, name=READ_BACK)
    t.runtime("cudaStreamSynchronize", 120, 385, external_id=104)
    for ext, (launch, kernel, dur) in enumerate([(555, 600, 50), (665, 700, 50), (725, 760, 40)], start=110):
        t.op("aten::mm", launch - 5, 15, external_id=ext)
        t.launch(launch, 5, kernel, dur, name=TC_GEMM, external_id=ext)
    [found] = host_device_sync(rule_context(t))
    assert found["numbers"]["blocked_per_step_us"] == 395.0  # the host's wait: not the saving
    assert (found["saving_us"], found["saving_ratio"], found["severity"]) == (150.0, 0.15, "high")
    assert "GPU idle" in found["saving_note"]


def test_evidence_event_is_the_culprit_operator():
    t = Trace()
    batch_then_model(t)
    item_at(t, 300)
    ctx = rule_context(t)
    [site] = host_device_sync(ctx)[0]["evidence"]
    assert ctx.tables.events["name"].iloc[site["event_id"]] == "aten::item"


def test_sync_frame_is_the_users_line():
    t = Trace()
    batch_then_model(t)
    t.python("train.py(5): <module>", 0, 1000, python_id=1)
    t.python("train.py(10): loss_fn", 290, 120, python_id=2, parent_id=1)
    t.python("torch/_tensor.py(40): __bool__", 295, 110, python_id=3, parent_id=2)
    item_at(t, 300)
    [site] = host_device_sync(rule_context(t))[0]["evidence"]
    assert site["frame"] == "train.py(10): loss_fn"
    assert site["label"] == "aten::item at train.py(10): loss_fn"
    assert site["frames"] == ["torch/_tensor.py(40): __bool__", "train.py(10): loss_fn", "train.py(5): <module>"]


@pytest.mark.parametrize("frames, expected", [
    pytest.param(("torch/nn/modules/module.py(1783): _call_impl", "loss.py(3): f"), "loss.py(3): f", id="skips-torch"),
    pytest.param(("/x/site-packages/torch/_tensor.py(1): g", "a.py(2): h"), "a.py(2): h", id="site-packages"),
    pytest.param(("torch/_tensor.py(1): g",), "torch/_tensor.py(1): g", id="only-torch"),
    pytest.param((), None, id="none"),
])
def test_user_frame(frames, expected):
    assert user_frame(frames) == expected


def test_cheap_sync_is_low():
    t = Trace()
    batch_then_model(t, step_end=10_000)
    item_at(t, 300)
    # 80 us of a 10,000 us step = 0.8% < 1%
    assert host_device_sync(rule_context(t))[0]["severity"] == "low"


def test_pageable_copy_mid_step_is_an_h2d_copy_and_a_sync():
    t = Trace()
    batch_then_model(t)
    weight_copy_at(t, 500)
    ctx = rule_context(t)
    [copy] = h2d_copy_in_step(ctx)
    # copy call 5 + its sync 40 = 45 us of 1000; the GPU was idle already (its matmul ended at 200)
    assert copy["numbers"] == {"copies_per_step": 1.0, "per_step_bytes": 40.0, "blocked_per_step_us": 45.0,
                               "blocked_ratio": 0.045, "step_us": 1000.0}
    assert (copy["severity"], copy["saving_us"]) == ("low", 0.0)
    assert [e["op"] for e in copy["evidence"]] == ["aten::to"]
    [sync] = host_device_sync(ctx)
    assert sync["numbers"]["blocked_per_step_us"] == 40.0  # the sync alone: an H2D copy call does not read back


@pytest.mark.parametrize("pageable_batch", [False, True], ids=["pinned-batch", "pageable-batch"])
def test_batch_copies_before_the_model_are_the_input_pipeline(pageable_batch):
    t = Trace()
    batch_then_model(t, pageable_batch=pageable_batch)
    ctx = rule_context(t)
    assert h2d_copy_in_step(ctx) == [] and host_device_sync(ctx) == []


def test_pinned_copy_after_compute_is_the_input_pipeline():
    t = Trace()
    batch_then_model(t)
    t.op("aten::to", 500, 50, external_id=109)
    t.copy(510, 5, 520, 10, external_id=109, name=PINNED)
    assert h2d_copy_in_step(rule_context(t)) == []


def test_zero_grad_kernels_do_not_end_the_prologue():
    t = Trace()
    t.step(1, 0, 1000)
    t.annotation("Optimizer.zero_grad#SGD.zero_grad", 2, 6)
    t.op("aten::zero_", 3, 4, external_id=120)
    t.launch(4, 1, 5, 2, external_id=120)
    t.op("aten::to", 10, 25, external_id=101)
    t.copy(12, 2, 20, 5, external_id=101, name=PAGEABLE)
    t.op("aten::mm", 40, 20, external_id=102)
    t.launch(45, 5, 60, 140, external_id=102)
    assert h2d_copy_in_step(rule_context(t)) == []


def test_copy_inside_the_dataloader_is_the_input_pipeline():
    t = Trace()
    t.step(1, 0, 1000)
    t.op("aten::mm", 5, 20, external_id=102)
    t.launch(6, 5, 30, 100, external_id=102)
    t.dataloader(200, 100)
    t.op("aten::to", 210, 50, external_id=109)
    t.copy(215, 5, 230, 10, external_id=109, name=PAGEABLE)
    assert h2d_copy_in_step(rule_context(t)) == []


def test_compile_time_syncs_and_copies_are_left_out():
    t = Trace()
    batch_then_model(t)
    t.annotation("_recursive_joint_graph_passes (dynamo_timed)", 290, 400)
    item_at(t, 300)
    weight_copy_at(t, 500)
    ctx = rule_context(t)
    assert host_device_sync(ctx) == [] and h2d_copy_in_step(ctx) == []


def test_syncs_outside_steps_are_left_out():
    t = Trace()
    batch_then_model(t)
    item_at(t, 2000)
    assert host_device_sync(rule_context(t)) == []


def test_explicit_synchronize_inside_a_step():
    t = Trace()
    batch_then_model(t)
    t.runtime("cudaDeviceSynchronize", 700, 150)
    [found] = host_device_sync(rule_context(t))
    assert found["numbers"]["blocked_per_step_us"] == 150.0
    assert found["saving_us"] == 0.0  # the GPU had nothing queued to drain
    [site] = found["evidence"]
    assert (site["kind"], site["start_us"], site["end_us"]) == ("runtime", 700, 850)


def test_event_sync_without_an_operator_is_left_out():
    """Library internals (e.g. DDP waiting on a CUDA event) name no operator to fix."""
    t = Trace()
    batch_then_model(t)
    t.runtime("cudaEventSynchronize", 700, 150)
    assert host_device_sync(rule_context(t)) == []


def test_per_step_means_over_two_steps():
    t = Trace()
    batch_then_model(t)
    item_at(t, 300)
    t.step(2, 1000, 1000)
    t.op("aten::mm", 1040, 20, external_id=130)
    for k in range(3):  # as much GPU work as step 1, so the overview keeps the last step
        t.launch(1045 + k, 1, 1060 + 50 * k, 40, external_id=130)
    found = host_device_sync(rule_context(t))[0]
    # one 80 us sync over two 1000 us steps: 0.5 per step, 40 us per step, 4%
    assert found["numbers"]["syncs_per_step"] == 0.5
    assert found["numbers"]["blocked_per_step_us"] == 40.0
    assert found["numbers"]["blocked_ratio"] == 0.04


def test_legacy_trace_batch_copy_with_sync_is_quiet():
    t = Trace(legacy=True)
    batch_then_model(t, pageable_batch=True)
    ctx = rule_context(t)
    assert h2d_copy_in_step(ctx) == [] and host_device_sync(ctx) == []
