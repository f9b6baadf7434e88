"""`ddp_instead_of_dp`: the trace shows `torch.nn.DataParallel` spreading work over several GPUs.

DataParallel runs one Python process for all GPUs: every step it copies the model to each GPU,
scatters the batch, runs the replicas in threads (which share the GIL) and gathers the outputs
on the first GPU. DistributedDataParallel (one process per GPU, gradients all-reduced while
the backward pass runs) is faster even on one machine.
1. DataParallel is in use: a `DataParallel.forward` range (what the reference plugin looked
   for), or Python frames in `torch/nn/parallel/data_parallel.py`.
2. Over several GPUs: its `Broadcast` / `Gather` / `ReduceAddCoalesced` autograd functions
   (model replication and output gathering), frames in `replicate.py` / `parallel_apply.py`, or
   kernels on two or more GPUs. DataParallel over one GPU only scatters, and costs little.
Fires when both hold. Saving: the host time per step of DataParallel's replication and
gathering (its Broadcast, Gather and ReduceAddCoalesced calls), which DDP does not do; the
threads' contention for the GIL is not counted. Evidence: the first DataParallel ranges and replication calls.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...trace.schema import HOST_OP_KINDS, Kind
from ..kinds import of_kinds
from ..names import name_mask
from ..devices import device_of_kernels
from ..recommendations import Context, Finding, finding
from ..savings import BANDS, saving

DP_FORWARD = "DataParallel.forward"
REPLICA_OPS = frozenset({"Broadcast", "Gather", "ReduceAddCoalesced"})
MIN_GPUS = 2
MAX_EVIDENCE = 3


def _frames_in(ctx: Context, *files: str) -> np.ndarray:
    """Rows of Python frames in any of the torch/nn/parallel files."""
    events = ctx.tables.events
    frames = events["kind"].to_numpy() == Kind.PYTHON_FUNCTION
    paths = tuple(f"torch/nn/parallel/{f}(" for f in files)
    return np.flatnonzero(frames & name_mask(events["name"], lambda n: any(p in n for p in paths)))


def _host_rows(ctx: Context, names: frozenset[str]) -> np.ndarray:
    events = ctx.tables.events
    host = of_kinds(events["kind"].to_numpy(), HOST_OP_KINDS)
    return np.flatnonzero(host & name_mask(events["name"], lambda n: n in names))


def _evidence(ctx: Context, rows: np.ndarray, kind: str) -> list[dict[str, Any]]:
    events = ctx.tables.events
    out = []
    for row in rows[:MAX_EVIDENCE].tolist():
        start = float(events["ts"].iloc[row])
        out.append({"kind": kind, "label": str(events["name"].iloc[row]), "event_id": row,
                    "start_us": start, "end_us": start + float(events["dur"].iloc[row])})
    return out


def _gpus_with_kernels(ctx: Context) -> int:
    events = ctx.tables.events
    kernels = np.flatnonzero(events["kind"].to_numpy() == Kind.KERNEL)
    return len(set(device_of_kernels(events, kernels).tolist()) - {-1}) if len(kernels) else 0


def ddp_instead_of_dp(ctx: Context) -> list[Finding]:
    forward = _host_rows(ctx, frozenset({DP_FORWARD}))
    dp_frames = _frames_in(ctx, "data_parallel.py")
    if not len(forward) and not len(dp_frames):
        return []
    replicas = _host_rows(ctx, REPLICA_OPS)
    replica_frames = _frames_in(ctx, "replicate.py", "parallel_apply.py")
    gpus = _gpus_with_kernels(ctx)
    if not len(replicas) and not len(replica_frames) and gpus < MIN_GPUS:
        return []
    dur = ctx.tables.events["dur"].to_numpy()
    steps = max(len(ctx.steps.names), 1)
    evidence = _evidence(ctx, forward if len(forward) else dp_frames, "range")
    evidence += _evidence(ctx, replicas if len(replicas) else replica_frames, "operator")
    replication = float(dur[replicas].sum()) / steps
    return [finding(
        "ddp_instead_of_dp", saving(replication, ctx.step_time_us, "DataParallel's replication and gathering, host time"),
        f"torch.nn.DataParallel spreads the model over {max(gpus, MIN_GPUS)} GPUs from one process",
        "DataParallel copies the model to every GPU each step, runs the replicas in threads of one "
        "process (sharing the GIL) and gathers outputs on the first GPU. Use "
        "`torch.nn.parallel.DistributedDataParallel` with one process per GPU (`torchrun "
        "--nproc_per_node=N`): it is faster even on a single machine.",
        numbers={"gpus": gpus, "data_parallel_forward_calls": int(len(forward)),
                 "data_parallel_forward_per_step_us": round(float(dur[forward].sum()) / steps, 3),
                 "replication_calls": int(len(replicas)),
                 "replication_per_step_us": round(replication, 3)},
        thresholds={"min_gpus": MIN_GPUS, **BANDS},
        evidence=evidence)]
