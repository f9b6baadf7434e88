"""ddp_instead_of_dp on small synthetic traces."""

from __future__ import annotations

from profboard.server.analysis.rules.parallel import ddp_instead_of_dp
from synth import Trace, rule_context


def dp_step(replicate: bool = True, devices: tuple[int, ...] = (0,), name: str = "DataParallel.forward") -> Trace:
    """One step with a DataParallel forward (as torch 2.11 records it: an annotation, `Scatter`,
    `Broadcast` and `Gather` autograd functions as cpu_ops) and a kernel per device."""
    t = Trace()
    t.step(1, 0, 1000)
    t.annotation(name, 10, 500)
    t.op("Scatter", 20, 30)
    if replicate:
        t.op("Broadcast", 60, 40)
        t.op("Gather", 400, 50)
    for i, device in enumerate(devices):
        t.op("aten::mm", 200 + 10 * i, 5, external_id=100 + i)
        t.launch(201 + 10 * i, 2, 300, 50, external_id=100 + i, device=device)
    return t


def test_data_parallel_over_several_gpus():
    ctx = rule_context(dp_step(devices=(0, 1)))
    [found] = ddp_instead_of_dp(ctx)
    # Broadcast 40 + Gather 50 = 90 us in the one step: the saving, and its share sets the severity
    assert found["numbers"] == {"gpus": 2, "data_parallel_forward_calls": 1, "data_parallel_forward_per_step_us": 500.0,
                                "replication_calls": 2, "replication_per_step_us": 90.0}
    # of the 1000 us step: 9%, medium (2% to 10%)
    assert (found["saving_us"], found["saving_ratio"], found["severity"]) == (90.0, 0.09, "medium")
    assert [e["label"] for e in found["evidence"]] == ["DataParallel.forward", "Broadcast", "Gather"]
    assert ctx.tables.events["name"].iloc[found["evidence"][0]["event_id"]] == "DataParallel.forward"


def test_replication_alone_is_enough():
    """Kernels of every replica on one device (device_ids=[0, 0]) still show Broadcast/Gather."""
    assert ddp_instead_of_dp(rule_context(dp_step(devices=(0,))))[0]["numbers"]["gpus"] == 1


def test_kernels_on_two_gpus_are_enough():
    assert len(ddp_instead_of_dp(rule_context(dp_step(replicate=False, devices=(0, 1))))) == 1


def test_data_parallel_on_one_gpu_is_quiet():
    assert ddp_instead_of_dp(rule_context(dp_step(replicate=False, devices=(0,)))) == []


def test_frames_alone_show_data_parallel():
    t = Trace()
    t.step(1, 0, 1000)
    t.python("torch/nn/parallel/data_parallel.py(173): forward", 10, 500, python_id=1)
    t.python("torch/nn/parallel/replicate.py(118): replicate", 20, 100, python_id=2, parent_id=1)
    [found] = ddp_instead_of_dp(rule_context(t))
    assert [e["label"] for e in found["evidence"]] == ["torch/nn/parallel/data_parallel.py(173): forward",
                                                      "torch/nn/parallel/replicate.py(118): replicate"]


def test_distributed_data_parallel_is_quiet():
    assert ddp_instead_of_dp(rule_context(dp_step(devices=(0, 1), name="DistributedDataParallel.forward"))) == []
