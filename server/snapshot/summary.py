"""Totals of a snapshot, per device and overall, from its final segments and its history.

- Reserved: the segments' total size (memory the caching allocator holds from CUDA).
- Allocated: blocks in use by tensors (`active_allocated`); pending free: blocks freed by
  their tensor but waiting on another stream (`active_pending_free`); active: both.
- Inactive: reserved but in no active block, i.e. cached free space; its share of reserved
  is the fragmentation ratio. Requested: what the active blocks' callers asked for (blocks
  are rounded up, so requested <= active).
- All of these are sums over the stored blocks; they are checked against each segment's own
  `allocated_size` / `active_size` / `requested_size` fields, with a warning where they differ.
- History: the trace entries recorded by `_record_memory_history`, counted by action; OOM
  events with the size that could not be allocated and what CUDA still had free.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..analysis.records import clean_row
from .history import ACTIVE_STATES, PENDING_STATES, as_int, finite_float, device_trace, final_blocks, segment_devices, segments_of


def _totals(segments: list[dict[str, Any]], warnings: list[str]) -> dict[str, Any]:
    reserved = allocated = pending = requested = largest_free = 0
    kinds: Counter[str] = Counter()
    mismatched = 0
    for seg in segments:
        blocks = final_blocks(seg)
        seg_alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        seg_pending = sum(b["size"] for b in blocks if b["state"] in PENDING_STATES)
        seg_req = sum(b["requested_size"] for b in blocks if b["state"] in ACTIVE_STATES)
        total = as_int(seg.get("total_size"))
        own = (as_int(seg.get("allocated_size"), seg_alloc), as_int(seg.get("active_size"), seg_alloc + seg_pending))
        if own != (seg_alloc, seg_alloc + seg_pending) or sum(b["size"] for b in blocks) != total:
            mismatched += 1
        reserved += total
        allocated += seg_alloc
        pending += seg_pending
        requested += seg_req
        largest_free = max([largest_free] + [b["size"] for b in blocks if b["state"] not in ACTIVE_STATES])
        kinds[str(seg.get("segment_type", "unknown"))] += 1
    if mismatched:
        warnings.append(f"{mismatched} segments whose blocks do not add up to their own recorded sizes")
    inactive = reserved - allocated - pending
    return {"segments": len(segments), "segment_types": dict(kinds), "reserved_bytes": reserved,
            "allocated_bytes": allocated, "pending_free_bytes": pending,
            "active_bytes": allocated + pending, "inactive_bytes": inactive,
            "requested_bytes": requested, "largest_inactive_block_bytes": largest_free,
            "fragmentation_ratio": inactive / reserved if reserved else None}


def _number(value: Any) -> float | None:
    return finite_float(value)


def _ooms(device: int, trace: list[Any]) -> list[dict[str, Any]]:
    return [clean_row({"device": device, "index": i, "time_us": _number(e.get("time_us")),
                       "size_bytes": as_int(e.get("size"), None), "device_free_bytes": as_int(e.get("device_free"), None)})
            for i, e in enumerate(trace) if isinstance(e, dict) and e.get("action") == "oom"]


def _history(trace: list[Any]) -> dict[str, Any]:
    actions = Counter(e.get("action") if isinstance(e, dict) else None for e in trace)
    ends = [_number(e.get("time_us")) if isinstance(e, dict) else None for e in (trace[:1] + trace[-1:])]
    return {"trace_entries": len(trace), "actions": {str(k): v for k, v in actions.items()},
            "first_time_us": ends[0] if ends else None, "last_time_us": ends[-1] if ends else None}


def _settings(snap: dict[str, Any]) -> dict[str, Any]:
    settings = snap.get("allocator_settings")
    if not isinstance(settings, dict):
        return {}
    return {str(k): v for k, v in settings.items() if isinstance(v, (str, int, float, bool)) or v is None}


def summary(snap: dict[str, Any]) -> dict[str, Any]:
    """Totals in bytes (see the module note) over all devices, per device, and the history's counts."""
    warnings: list[str] = []
    segments = segments_of(snap)
    per_device, ooms = [], []
    for device in segment_devices(snap):
        trace = device_trace(snap, device)
        mine = segments_of(snap, device)
        per_device.append({"device": device, **_totals(mine, warnings), **_history(trace)})
        ooms += _ooms(device, trace)
    overall = _totals(segments, [])
    traces = snap.get("device_traces")
    return {"devices": [d["device"] for d in per_device], **overall,
            "trace_entries": sum(d["trace_entries"] for d in per_device),
            "history": isinstance(traces, list) and any(isinstance(t, list) and t for t in traces),
            "ooms": {"count": len(ooms), "events": ooms},
            "per_device": per_device, "allocator_settings": _settings(snap), "warnings": warnings}
