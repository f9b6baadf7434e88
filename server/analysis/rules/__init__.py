"""Recommendation rules, one module per topic (see recommendations.py for the shape of a finding)."""

from __future__ import annotations

from ..recommendations import Rule, RunRule
from . import step_shares, utilization
from . import memory, parallel, syncs, tensor_cores
from . import compile, launch, straggler

RULES: tuple[Rule, ...] = (
    step_shares.dataloader_bound,
    step_shares.high_communication,
    utilization.low_gpu_utilization,
    syncs.host_device_sync,
    syncs.h2d_copy_in_step,
    tensor_cores.tensor_cores_unused,
    memory.memory_near_limit,
    parallel.ddp_instead_of_dp,
    compile.graph_breaks,
    launch.launch_bound,
    compile.compile_dominated,
)

# Rules across ranks, applied after RULES (recommendations.recommend_across_ranks).
RUN_RULES: tuple[RunRule, ...] = (
    step_shares.waiting_in_communication,
    straggler.straggler,
)
