"""The shape of a Chrome-trace event as PyTorch's profiler (Kineto) writes it, and event kinds.

Decoding is typed: known `args` keys become struct fields and everything else is skipped,
which is what makes a 100 MB trace decode in well under a second. A field whose JSON type
is not the expected one fails the fast path for its chunk only; `decode.py` then falls back
to a lenient per-event path.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any, Union

import msgspec

NAN = float("nan")

Number = Union[int, float]
# Integers land in int64 columns: a larger one fails validation, and the lenient path
# (decode.py) then keeps the event without that field instead of failing the whole trace.
Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class Args(msgspec.Struct, gc=False):
    """The `args` keys profboard reads (Kineto's spelling).

    Absent ints are -1, absent floats NaN, absent raw JSON values empty.
    """

    external_id: Int = msgspec.field(default=-1, name="External id")
    external_id_legacy: Int = msgspec.field(default=-1, name="external id")
    correlation: Int = -1
    device: Int = -1
    stream: Int = -1
    grid: Union[list[Int], None] = None
    block: Union[list[Int], None] = None
    registers_per_thread: Int = msgspec.field(default=-1, name="registers per thread")
    shared_memory: Int = msgspec.field(default=-1, name="shared memory")
    blocks_per_sm: Number = msgspec.field(default=NAN, name="blocks per SM")
    warps_per_sm: Number = msgspec.field(default=NAN, name="warps per SM")
    occupancy: Number = msgspec.field(default=NAN, name="est. achieved occupancy %")
    bytes_: Int = msgspec.field(default=-1, name="bytes")
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_dims_legacy: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input dims")
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    call_stack: Union[str, None] = msgspec.field(default=None, name="Call stack")
    # c10d's record_param_comms: which process group a collective ran in ("0" is the default group).
    process_group: Union[str, int, None] = msgspec.field(default=None, name="Process Group Name")
    sequence_number: Int = msgspec.field(default=-1, name="Sequence number")
    fwd_thread_id: Int = msgspec.field(default=-1, name="Fwd thread id")
    python_id: Int = msgspec.field(default=-1, name="Python id")
    # Kineto writes null for the root frame's parent.
    python_parent_id: Union[Int, None] = msgspec.field(default=-1, name="Python parent id")
    python_module_id: Int = msgspec.field(default=-1, name="Python module id")
    # [memory] instant events
    device_type: Int = msgspec.field(default=-1, name="Device Type")
    device_id: Int = msgspec.field(default=-1, name="Device Id")
    addr: Int = msgspec.field(default=-1, name="Addr")
    mem_bytes: Int = msgspec.field(default=-1, name="Bytes")
    total_allocated: Number = msgspec.field(default=NAN, name="Total Allocated")
    total_reserved: Number = msgspec.field(default=NAN, name="Total Reserved")
    # metadata events (process_name, thread_name, *_sort_index, process_labels)
    meta_name: Union[str, None] = msgspec.field(default=None, name="name")
    labels: Union[str, None] = None
    sort_index: Int = -1


class Event(msgspec.Struct, gc=False):
    """One trace event; absent fields keep their defaults (checked in columns.py)."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Number = NAN
    dur: Number = NAN
    id: Union[int, str, None] = None
    bp: Union[str, None] = None
    # None when the event has no args (flows, most instants): an Args per event cost a tenth of
    # a load. An explicit null is still not an Args (decode.py's lenient path keeps the event).
    args: Args = None  # type: ignore[assignment]


class CounterEvent(msgspec.Struct, gc=False):
    """`ph: "C"` events keep their numeric args as a free mapping."""

    name: str = ""
    pid: Union[int, str, None] = None
    ts: Number = NAN
    args: Union[dict[str, Any], None] = None


class Kind(IntEnum):
    """What an event is, from its `cat` (PyTorch 1.x and 2.x spellings)."""

    OTHER = 0
    CPU_OP = 1
    USER_ANNOTATION = 2
    GPU_USER_ANNOTATION = 3
    PYTHON_FUNCTION = 4
    RUNTIME = 5
    DRIVER = 6
    KERNEL = 7
    MEMCPY = 8
    MEMSET = 9
    TRACE = 10
    PYTHON = 11


_KIND_BY_CAT = {
    "operator": Kind.CPU_OP,
    "cpu_op": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "gpu_user_annotation": Kind.GPU_USER_ANNOTATION,
    "python_function": Kind.PYTHON_FUNCTION,
    "python": Kind.PYTHON,
    "runtime": Kind.RUNTIME,
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "kernel": Kind.KERNEL,
    "memcpy": Kind.MEMCPY,
    "gpu_memcpy": Kind.MEMCPY,
    "memset": Kind.MEMSET,
    "gpu_memset": Kind.MEMSET,
    "trace": Kind.TRACE,
}

# Host-side kinds whose ranges are "CPU work" in the step breakdown.
HOST_OP_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)
# Device-side activity kinds.
DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
# Host calls into the CUDA runtime or driver (launches, copies, syncs).
LAUNCH_KINDS = (Kind.RUNTIME, Kind.DRIVER)


def kind_of_category(cat: str) -> Kind:
    """Map a trace `cat` to a Kind; other vendors' runtimes (`xpu_runtime`, ...) count as RUNTIME."""
    low = cat.lower()
    kind = _KIND_BY_CAT.get(low)
    if kind is not None:
        return kind
    if low.endswith("_runtime"):
        return Kind.RUNTIME
    if low.endswith("_driver"):
        return Kind.DRIVER
    return Kind.OTHER
