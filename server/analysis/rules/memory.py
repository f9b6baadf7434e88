"""`memory_near_limit`: a GPU's peak memory over 90% of its capacity (the reference's bar).

From the `[memory]` records' totals (`profile_memory=True`) against the device's
`totalGlobalMem`: peak allocated (tensors alive) and peak reserved (what the caching
allocator holds). Over 90% allocated: medium (the next larger batch or sequence runs out of
memory); only reserved over 90%: low (cached or fragmented blocks; the allocator frees and
retries before it fails). No saving is claimed: memory near the limit costs no step time of its
own; it rules out a larger batch. Evidence: the peak, with the operator running when it was reached,
and its step.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..memory import attribution, device_mask, devices
from ..memory_curve import curve
from ..recommendations import Context, Finding, finding, step_evidence
from ..savings import no_saving

NEAR_LIMIT_RATIO = 0.90


def _peak_evidence(ctx: Context, device: str, peak: dict[str, Any], what: str, label: str) -> list[dict[str, Any]]:
    """The peak record, with the operator it belongs to (memory.attribution on that record alone)."""
    memory = ctx.tables.memory
    # The curve rounds times to the nanosecond.
    near = np.abs(memory["ts"].to_numpy() - peak["t_us"]) < 1e-3
    at = np.flatnonzero(device_mask(memory, device) & near & (memory[f"total_{what}"].to_numpy() == peak["bytes"]))
    item: dict[str, Any] = {"kind": "memory_peak", "label": label, "device": device,
                            "start_us": peak["t_us"], "end_us": peak["t_us"], "bytes": peak["bytes"]}
    if len(at):
        op = attribution(replace(ctx.tables, memory=memory.iloc[at[:1]]), ctx.tree).op[0]
        if op >= 0:
            row = int(ctx.tree.rows[op])
            item.update(event_id=row, op=str(ctx.tables.events["name"].iloc[row]))
    step = np.flatnonzero((ctx.steps.starts <= peak["t_us"]) & (peak["t_us"] < ctx.steps.ends))
    return [item] + [step_evidence(ctx, int(i)) for i in step[:1]]


def memory_near_limit(ctx: Context) -> list[Finding]:
    found = []
    for dev in devices(ctx.tables):
        if not dev["device"].startswith("GPU") or not dev["has_totals"]:
            continue
        data = curve(ctx.tables, dev["device"], width_px=1)
        capacity = data["capacity_bytes"]
        allocated, reserved = data["peak_allocated"], data["peak_reserved"]
        if not capacity or allocated is None:
            continue
        allocated_ratio = allocated["bytes"] / capacity
        reserved_ratio = reserved["bytes"] / capacity if reserved else 0.0
        if max(allocated_ratio, reserved_ratio) <= NEAR_LIMIT_RATIO:
            continue
        over_allocated = allocated_ratio > NEAR_LIMIT_RATIO
        peak, what = (allocated, "allocated") if over_allocated else (reserved, "reserved")
        ratio = allocated_ratio if over_allocated else reserved_ratio
        label = f"{dev['label']}: peak {what} {peak['bytes'] / 2**30:.1f} GiB of {capacity / 2**30:.1f} GiB"
        found.append(finding(
            "memory_near_limit",
            no_saving("none claimed: memory near the limit costs no step time of its own",
                      "medium" if over_allocated else "low"),
            f"{dev['label']} memory peaks at {ratio:.1%} of its capacity ({what})",
            "The GPU is close to running out of memory, which also rules out a larger batch. Use bf16 "
            "autocast, activation checkpointing (`torch.utils.checkpoint`), a fused or 8-bit optimizer, or "
            "shard parameters and optimizer state (FSDP). When reserved is far above allocated, "
            "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` reduces fragmentation.",
            numbers={"device": dev["device"], "peak_allocated_bytes": allocated["bytes"],
                     "peak_reserved_bytes": reserved["bytes"] if reserved else None, "capacity_bytes": capacity,
                     "allocated_ratio": round(allocated_ratio, 6), "reserved_ratio": round(reserved_ratio, 6)},
            thresholds={"near_limit_ratio": NEAR_LIMIT_RATIO},
            evidence=_peak_evidence(ctx, dev["device"], peak, what, label)))
    return found
