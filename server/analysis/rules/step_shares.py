"""Rules on the step-time breakdown: a category taking too large a share of the average step.

- `dataloader_bound`: DataLoader over 5% of the average step (the reference's bar); high over 25%.
- `high_communication`: communication not hidden behind compute over 10% of the step; high over 30%.
Evidence: the three steps where the category took longest.
"""

from __future__ import annotations

from ..recommendations import Context, Finding, finding, step_evidence

DATALOADER_SHARE = 0.05
DATALOADER_HIGH = 0.25
COMMUNICATION_SHARE = 0.10
COMMUNICATION_HIGH = 0.30


def _share_rule(ctx: Context, id: str, column: str, threshold: float, high: float, title: str,
                detail: str) -> list[Finding]:
    total = ctx.step_time_us
    if total <= 0:
        return []
    mean = float(ctx.breakdown[column].mean())
    share = mean / total
    if share <= threshold:
        return []
    worst = ctx.breakdown[column].to_numpy().argsort()[::-1][:3]
    return [finding(id, "high" if share > high else "medium", title.format(share=share), detail,
                    numbers={"share_ratio": round(share, 6), column: round(mean, 3), "step_us": round(total, 3)},
                    thresholds={"share_ratio": threshold, "high_share_ratio": high},
                    evidence=[step_evidence(ctx, int(i), **{column: float(ctx.breakdown[column].iloc[i])})
                              for i in worst])]


def dataloader_bound(ctx: Context) -> list[Finding]:
    return _share_rule(
        ctx, "dataloader_bound", "dataloader_us", DATALOADER_SHARE, DATALOADER_HIGH,
        "{share:.1%} of the step time is spent waiting for input data",
        "The training loop waits on the DataLoader. Raise `num_workers`, set `pin_memory=True` "
        "and `persistent_workers=True`, or move decoding and augmentation off the critical path.")


def high_communication(ctx: Context) -> list[Finding]:
    return _share_rule(
        ctx, "high_communication", "communication_us", COMMUNICATION_SHARE, COMMUNICATION_HIGH,
        "{share:.1%} of the step time is communication not overlapped with compute",
        "Overlap more communication with computation (DDP bucket sizes, FSDP prefetch), "
        "compress gradients, accumulate gradients over several steps, or raise the batch size.")
