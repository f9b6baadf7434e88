"""Recommendation rules, one module per topic (see recommendations.py for the shape of a finding)."""

from __future__ import annotations

from ..recommendations import Rule
from . import step_shares, utilization

RULES: tuple[Rule, ...] = (
    step_shares.dataloader_bound,
    step_shares.high_communication,
    utilization.low_gpu_utilization,
)
