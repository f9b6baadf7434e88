"""Recommendations drawn from the overview numbers, each pointing at its evidence.

Rules and their thresholds (visible here on purpose):
- `dataloader_bound`: DataLoader takes over 5% of the average step (the reference's bar).
- `low_gpu_utilization`: a GPU is busy under 50% of the steps' time.
- `high_communication`: communication not hidden behind compute takes over 10% of the step.
Evidence items are time ranges (`start_us`/`end_us`, trace clock) or GPUs (`device`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from .steps import Steps

LOW_UTILIZATION_RATIO = 0.5


@dataclass(frozen=True)
class ShareRule:
    """Fires when a breakdown column's share of the average step exceeds `threshold`."""

    id: str
    column: str
    threshold: float
    high: float  # share above which the finding is high severity
    title: str  # formatted with `share`
    detail: str


SHARE_RULES = (
    ShareRule("dataloader_bound", "dataloader_us", 0.05, 0.25,
              "{share:.1%} of the step time is spent waiting for input data",
              "The training loop waits on the DataLoader. Raise `num_workers`, set `pin_memory=True` "
              "and `persistent_workers=True`, or move decoding and augmentation off the critical path."),
    ShareRule("high_communication", "communication_us", 0.10, 0.3,
              "{share:.1%} of the step time is communication not overlapped with compute",
              "Overlap more communication with computation (DDP bucket sizes, FSDP prefetch), "
              "compress gradients, accumulate gradients over several steps, or raise the batch size."),
)


def _worst_steps(breakdown: pd.DataFrame, steps: Steps, column: str, n: int = 3) -> list[dict[str, Any]]:
    order = breakdown[column].to_numpy().argsort()[::-1][:n]
    return [{"kind": "step", "step": steps.names[i], "start_us": float(steps.starts[i]),
             "end_us": float(steps.ends[i]), column: float(breakdown[column].iloc[i])} for i in order]


def recommend(breakdown: pd.DataFrame, gpus: list[dict[str, Any]], steps: Steps) -> list[dict[str, Any]]:
    """Findings for one worker's steps, most severe first."""
    found: list[dict[str, Any]] = []
    total = float(breakdown["total_us"].mean()) if len(breakdown) else 0.0
    if total <= 0:
        return found
    for rule in SHARE_RULES:
        share = float(breakdown[rule.column].mean()) / total
        if share > rule.threshold:
            found.append({
                "id": rule.id,
                "severity": "high" if share > rule.high else "medium",
                "title": rule.title.format(share=share),
                "detail": rule.detail,
                "evidence": _worst_steps(breakdown, steps, rule.column),
            })
    for gpu in gpus:
        util = gpu.get("utilization_ratio")
        if util is not None and util < LOW_UTILIZATION_RATIO:
            found.append({
                "id": "low_gpu_utilization",
                "severity": "high" if util < 0.2 else "medium",
                "title": f"GPU {gpu['device']} is busy only {util:.1%} of the step time",
                "detail": ("The GPU sits idle between kernels. Look at the step breakdown for what the host does "
                           "meanwhile; larger batches, fewer host-device synchronisations, or torch.compile with "
                           "CUDA graphs usually help."),
                "evidence": [{"kind": "gpu", "device": gpu["device"], "utilization_ratio": util}],
            })
    rank = {"high": 0, "medium": 1, "low": 2}
    return sorted(found, key=lambda r: rank[r["severity"]])
