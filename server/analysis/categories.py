"""Which events play which role: kernels, copies, communication, DataLoader, CPU work.

Shared by every view so that one event has one role everywhere.
- Communication kernels: NCCL/RCCL device kernels by name (`ncclKernel_*`, `ncclDevKernel_*`).
  The reference plugin found them only through `nccl:*` CPU ops, which PyTorch 2.x no longer
  links to the kernels, so it reported almost no communication.
- Host collectives: `gloo:*` ops, which run on the CPU and have no device kernel.
- DataLoader: `enumerate(DataLoader)#...__next__` and `enumerate(DataPipe)#...` ranges.
- CPU work: host operators and user annotations (not ProfilerStep, DataLoader or host
  collectives). GPU-side annotations (`gpu_user_annotation`) are not CPU work, and Python
  tracer frames (`python_function`) are call-stack context, not work of their own.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace.schema import HOST_OP_KINDS, LAUNCH_KINDS, Kind
from .kinds import of_kinds
from .names import name_mask
from .steps import STEP_PREFIX

_COMM_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)


def is_dataloader_name(name: str) -> bool:
    return (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or name.startswith(
        "enumerate(DataPipe)#")


def is_host_collective_name(name: str) -> bool:
    return name.startswith("gloo:")


def is_communication_kernel_name(name: str) -> bool:
    return bool(_COMM_KERNEL.search(name))


def role_masks(events: pd.DataFrame) -> dict[str, np.ndarray]:
    """Boolean row masks of `events` for each role of the step breakdown, in priority order."""
    kind = events["kind"].to_numpy()
    names = events["name"]
    kernel = kind == Kind.KERNEL
    comm_kernel = kernel & name_mask(names, is_communication_kernel_name)
    host_op = of_kinds(kind, HOST_OP_KINDS)
    dataloader = host_op & name_mask(names, is_dataloader_name)
    host_collective = host_op & name_mask(names, is_host_collective_name)
    step = host_op & name_mask(names, lambda n: n.startswith(STEP_PREFIX))
    return {
        "kernel": kernel & ~comm_kernel,
        "memcpy": kind == Kind.MEMCPY,
        "memset": kind == Kind.MEMSET,
        "communication": comm_kernel | host_collective,
        "runtime": of_kinds(kind, LAUNCH_KINDS),
        "dataloader": dataloader,
        "cpu_exec": host_op & ~dataloader & ~host_collective & ~step,
    }
