"""Synthetic Chrome-trace JSON shaped like what PyTorch's profiler (Kineto) writes.

Tests build a handful of events inline, so that every expected number can be checked by
hand. Times are plain microseconds (ints or floats), as in real traces.

    t = Trace()                       # PyTorch 2.x spelling; Trace(legacy=True) for 1.x
    t.step(1, 0, 100)                 # host ProfilerStep#1 (user_annotation)
    t.op("aten::mm", 10, 50)          # cpu_op
    t.launch(20, 5, 30, 40)           # cudaLaunchKernel 20..25 -> kernel 30..70, same correlation
    trace = t.build()                 # {"schemaVersion": 1, "deviceProperties": [...], "traceEvents": [...]}

2.x categories: cpu_op, user_annotation, gpu_user_annotation, python_function, cuda_runtime,
cuda_driver, kernel, gpu_memcpy, gpu_memset; kernels have integer pid (device) and tid (stream).
Legacy 1.x categories: Operator (ops, annotations and the DataLoader), Runtime, Kernel, Memcpy,
Memset; thread ids are strings (`"123"`, `"stream 7"`) and runtime/device events carry
`"external id"` in lower case.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

HOST_PID = 1000
HOST_TID = 1000
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
               "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
TC_GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"

_CATS = {
    #  role            2.x                    1.x
    "op": ("cpu_op", "Operator"),
    "annotation": ("user_annotation", "Operator"),
    "gpu_annotation": ("gpu_user_annotation", None),
    "python": ("python_function", "python_function"),
    "runtime": ("cuda_runtime", "Runtime"),
    "driver": ("cuda_driver", None),
    "kernel": ("kernel", "Kernel"),
    "memcpy": ("gpu_memcpy", "Memcpy"),
    "memset": ("gpu_memset", "Memset"),
}


class Trace:
    """Accumulates events of one trace; `build()` returns the JSON document as a dict."""

    def __init__(self, legacy: bool = False, pid: int = HOST_PID, tid: int = HOST_TID) -> None:
        self.legacy = legacy
        self.pid = pid
        self.tid = tid
        self.events: list[dict[str, Any]] = []
        self.metadata: dict[str, Any] = {"schemaVersion": 1}
        self.devices: list[dict[str, Any]] = []
        self._correlation = itertools.count(5000)
        self._external = itertools.count(1)

    # -- plumbing ---------------------------------------------------------------------------

    def cat(self, role: str) -> str:
        modern, legacy = _CATS[role]
        if self.legacy:
            if legacy is None:
                raise ValueError(f"PyTorch 1.x traces have no {role} events")
            return legacy
        return modern

    def _host_tid(self, tid: Any) -> Any:
        tid = self.tid if tid is None else tid
        return str(tid) if self.legacy else tid

    def _stream_tid(self, stream: int) -> Any:
        return f"stream {stream}" if self.legacy else stream

    def _ext_key(self, device_side: bool) -> str:
        # Legacy runtime and device events spell it in lower case.
        return "external id" if (self.legacy and device_side) else "External id"

    def add(self, event: dict[str, Any]) -> dict[str, Any]:
        """Append a raw event (any shape) and return it."""
        self.events.append(event)
        return event

    def complete(self, cat: str, name: str, ts: float, dur: float, pid: Any = None, tid: Any = None,
                 **args: Any) -> dict[str, Any]:
        """A `ph: "X"` event with the given raw category and args."""
        return self.add({"ph": "X", "cat": cat, "name": name,
                         "pid": self.pid if pid is None else pid,
                         "tid": self._host_tid(tid),
                         "ts": ts, "dur": dur, "args": args})

    # -- host side ----------------------------------------------------------------------------

    def step(self, n: int, ts: float, dur: float, gpu: tuple[float, float] | None = None, device: int = 0,
             stream: int = 7, tid: Any = None) -> dict[str, Any]:
        """Host `ProfilerStep#n`; `gpu=(ts, dur)` also writes the GPU-side copy PyTorch 2.x emits."""
        ext = next(self._external)
        event = self.complete(self.cat("annotation"), f"ProfilerStep#{n}", ts, dur, tid=tid,
                              **{"External id": ext, "Record function id": 0})
        if gpu is not None:
            self.add({"ph": "X", "cat": self.cat("gpu_annotation"), "name": f"ProfilerStep#{n}",
                      "pid": device, "tid": self._stream_tid(stream), "ts": gpu[0], "dur": gpu[1],
                      "args": {"External id": ext}})
        return event

    def op(self, name: str, ts: float, dur: float, tid: Any = None, input_dims: list | None = None,
           external_id: int | None = None) -> dict[str, Any]:
        """A host operator (`cpu_op`, legacy `Operator`)."""
        args: dict[str, Any] = {"External id": next(self._external) if external_id is None else external_id}
        if input_dims is not None:
            args["Input Dims"] = input_dims
        return self.complete(self.cat("op"), name, ts, dur, tid=tid, **args)

    def annotation(self, name: str, ts: float, dur: float, tid: Any = None) -> dict[str, Any]:
        """A `record_function` range (`user_annotation`, legacy `Operator`)."""
        return self.complete(self.cat("annotation"), name, ts, dur, tid=tid,
                             **{"External id": next(self._external)})

    def dataloader(self, ts: float, dur: float, tid: Any = None, name: str = DATALOADER) -> dict[str, Any]:
        """`enumerate(DataLoader)#..._SingleProcessDataLoaderIter.__next__` on the host."""
        return self.annotation(name, ts, dur, tid=tid)

    def python(self, name: str, ts: float, dur: float, python_id: int, parent_id: int | None = None,
               tid: Any = None, module_id: int | None = None) -> dict[str, Any]:
        """A Python tracer frame (`python_function`); the root frame's parent is null, as Kineto writes."""
        args: dict[str, Any] = {"Python parent id": parent_id, "Python id": python_id}
        if module_id is not None:
            args["Python module id"] = module_id
        return self.complete(self.cat("python"), name, ts, dur, tid=tid, **args)

    def runtime(self, name: str, ts: float, dur: float, correlation: int | None = None,
                external_id: int | None = None, driver: bool = False, tid: Any = None) -> int:
        """A CUDA runtime call (or driver call with `driver=True`); returns its correlation id."""
        corr = next(self._correlation) if correlation is None else correlation
        args: dict[str, Any] = {"cbid": 307 if driver else 211, "correlation": corr}
        if external_id is not None:
            args[self._ext_key(True)] = external_id
        self.complete(self.cat("driver" if driver else "runtime"), name, ts, dur, tid=tid, **args)
        return corr

    # -- device side --------------------------------------------------------------------------

    def _device_event(self, role: str, name: str, ts: float, dur: float, correlation: int | None,
                      device: int, stream: int, external_id: int | None, args: dict[str, Any]) -> dict[str, Any]:
        base: dict[str, Any] = {"device": device, "context": 1, "stream": stream}
        if correlation is not None:
            base["correlation"] = correlation
        if external_id is not None:
            base[self._ext_key(True)] = external_id
        base.update(args)
        return self.add({"ph": "X", "cat": self.cat(role), "name": name, "pid": device,
                         "tid": self._stream_tid(stream), "ts": ts, "dur": dur, "args": base})

    def kernel(self, name: str, ts: float, dur: float, correlation: int | None = None, device: int = 0,
               stream: int = 7, blocks_per_sm: float | None = None, occupancy: float | None = None,
               grid: list[int] | None = None, block: list[int] | None = None,
               external_id: int | None = None) -> dict[str, Any]:
        """A GPU kernel; `occupancy` is Kineto's `est. achieved occupancy %` (0..100)."""
        args: dict[str, Any] = {"registers per thread": 32, "shared memory": 0}
        if blocks_per_sm is not None:
            args["blocks per SM"] = blocks_per_sm
            args["warps per SM"] = blocks_per_sm * 8
        args["grid"] = grid or [1, 1, 1]
        args["block"] = block or [256, 1, 1]
        if occupancy is not None:
            args["est. achieved occupancy %"] = occupancy
        return self._device_event("kernel", name, ts, dur, correlation, device, stream, external_id, args)

    def memcpy(self, ts: float, dur: float, correlation: int | None = None, device: int = 0, stream: int = 7,
               name: str = "Memcpy HtoD (Pageable -> Device)", nbytes: int = 4096) -> dict[str, Any]:
        return self._device_event("memcpy", name, ts, dur, correlation, device, stream, None,
                                  {"bytes": nbytes, "memory bandwidth (GB/s)": 1.0})

    def memset(self, ts: float, dur: float, correlation: int | None = None, device: int = 0, stream: int = 7,
               name: str = "Memset (Device)", nbytes: int = 4096) -> dict[str, Any]:
        return self._device_event("memset", name, ts, dur, correlation, device, stream, None,
                                  {"bytes": nbytes, "memory bandwidth (GB/s)": 1.0})

    def launch(self, ts: float, dur: float, kernel_ts: float, kernel_dur: float, name: str = ELEMENTWISE,
               driver: bool = False, flow: bool = False, external_id: int | None = None,
               tid: Any = None, **kernel_args: Any) -> int:
        """A launch call (`cudaLaunchKernel`, or `cuLaunchKernel` with `driver=True`) and its kernel."""
        call = "cuLaunchKernel" if driver else "cudaLaunchKernel"
        corr = self.runtime(call, ts, dur, external_id=external_id, driver=driver, tid=tid)
        self.kernel(name, kernel_ts, kernel_dur, correlation=corr, external_id=external_id, **kernel_args)
        if flow:
            self.ac2g(corr, ts, kernel_ts, device=kernel_args.get("device", 0),
                      stream=kernel_args.get("stream", 7), tid=tid)
        return corr

    def copy(self, ts: float, dur: float, copy_ts: float, copy_dur: float, memset: bool = False,
             external_id: int | None = None, **device_args: Any) -> int:
        """`cudaMemcpyAsync` (or `cudaMemsetAsync`) and its device copy (or fill); `external_id`
        ties the call to the operator that made it."""
        call = "cudaMemsetAsync" if memset else "cudaMemcpyAsync"
        corr = self.runtime(call, ts, dur, external_id=external_id)
        (self.memset if memset else self.memcpy)(copy_ts, copy_dur, correlation=corr, **device_args)
        return corr

    def synchronize(self, ts: float, dur: float, stream: int | None = 7, event: bool = True, device: int = 0,
                    tid: Any = None) -> int:
        """A host call that waits for the GPU: `cudaStreamSynchronize` on `stream`, or
        `cudaDeviceSynchronize` when `stream` is None; with `event`, also the CUDA sync event that
        `enable_cuda_sync_events` records for it (cat `cuda_sync`, on the GPU's row, the call's
        correlation; Stream Sync or Context Sync). Returns the correlation id."""
        name = "cudaDeviceSynchronize" if stream is None else "cudaStreamSynchronize"
        corr = self.runtime(name, ts, dur, tid=tid)
        if event:
            kind = "Context Sync" if stream is None else "Stream Sync"
            self.add({"ph": "X", "cat": "cuda_sync", "name": kind, "pid": device,
                      "tid": self._stream_tid(7 if stream is None else stream), "ts": ts, "dur": dur,
                      "args": {"cuda_sync_kind": kind, "stream": -1 if stream is None else stream,
                               "correlation": corr, "device": device, "context": 1}})
        return corr

    def nccl(self, ts: float, dur: float, correlation: int | None = None, name: str = NCCL_ALLREDUCE,
             device: int = 0, stream: int = 20) -> dict[str, Any]:
        """An NCCL communication kernel, on its own stream as NCCL runs them."""
        return self.kernel(name, ts, dur, correlation=correlation, device=device, stream=stream)

    def collective(self, ts: float, dur: float, kernel_ts: float | None = None, kernel_dur: float = 0.0,
                   op: str | None = "nccl:all_reduce", nelems: int = 1024, dtype: str = "float",
                   kernel: str = NCCL_ALLREDUCE, wrapped: bool = True, tid: Any = None, device: int = 0,
                   stream: int = 20, group: str = "0") -> int:
        """A c10d collective as PyTorch 2.x records it: `record_param_comms` (ts..ts+dur) holding
        the `nccl:*` annotation (`op`; None leaves it out), a launch at ts+1 and the NCCL kernel
        (none when `kernel_ts` is None), tied to record_param_comms by external id.
        `wrapped=False` writes PyTorch 1.x's shape: the `nccl:*` op alone, its kernel tied to it.
        `group` is the process group's name.
        Returns the external id the kernel carries."""
        ext = next(self._external)
        if wrapped:
            self.complete(self.cat("op"), "record_param_comms", ts, dur, tid=tid, **{
                "External id": ext, "Collective name": (op or "allreduce").split(":")[-1].replace("_", ""),
                "In msg nelems": nelems, "Out msg nelems": nelems, "Group size": 4, "dtype": "Float",
                "Process Group Name": group, "Process Group Ranks": "[0, 1, 2, 3]",
                "Input Dims": [[[nelems]], [], []], "Input type": ["TensorList", "", "Scalar"]})
        if op is not None:
            inner = (ts + 0.5, dur - 1.0) if wrapped else (ts, dur)
            self.complete(self.cat("annotation" if wrapped else "op"), op, *inner, tid=tid, **{
                "External id": next(self._external) if wrapped else ext,
                "Input Dims": [[nelems]], "Input type": [dtype]})
        if kernel_ts is not None:
            corr = self.runtime("cudaLaunchKernelExC", ts + 1, 0.5, external_id=ext, tid=tid)
            self._device_event("kernel", kernel, kernel_ts, kernel_dur, corr, device, stream, ext,
                               {"grid": [24, 1, 1], "block": [544, 1, 1]})
        return ext

    # -- other records ------------------------------------------------------------------------

    def ac2g(self, correlation: int, launch_ts: float, kernel_ts: float, device: int = 0, stream: int = 7,
             tid: Any = None) -> None:
        """The flow arrow from a launch to its kernel (start `s` on the host, finish `f` on the GPU).

        PyTorch 1.x wrote the same arrow as cat `async`, name `launch`.
        """
        cat, name = ("async", "launch") if self.legacy else ("ac2g", "ac2g")
        self.add({"ph": "s", "id": correlation, "pid": self.pid, "tid": self._host_tid(tid), "ts": launch_ts,
                  "cat": cat, "name": name})
        self.add({"ph": "f", "id": correlation, "pid": device, "tid": self._stream_tid(stream), "ts": kernel_ts,
                  "cat": cat, "name": name, "bp": "e"})

    def fwdbwd(self, id: int, forward_ts: float, backward_ts: float, forward_tid: Any = None,
               backward_tid: Any = None) -> None:
        """The flow from a forward operator to the backward operator autograd ran for it (start `s`
        at the forward's start, finish `f` at the backward's start, each on its own thread)."""
        self.add({"ph": "s", "id": id, "pid": self.pid, "tid": self._host_tid(forward_tid), "ts": forward_ts,
                  "cat": "fwdbwd", "name": "fwdbwd"})
        self.add({"ph": "f", "id": id, "pid": self.pid, "tid": self._host_tid(backward_tid), "ts": backward_ts,
                  "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"})

    def memory(self, ts: float, nbytes: int, addr: int, total_allocated: int, total_reserved: int,
               device_type: int = 1, device_id: int = 0) -> dict[str, Any]:
        """A `[memory]` instant event (allocation when nbytes > 0, free when < 0)."""
        return self.add({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                         "pid": self.pid, "tid": self.tid, "ts": ts,
                         "args": {"Total Reserved": total_reserved, "Total Allocated": total_allocated,
                                  "Bytes": nbytes, "Device Id": device_id, "Device Type": device_type,
                                  "Addr": addr}})

    def memory_record(self, ts: float, nbytes: int, addr: int | None = None, total_allocated: int | None = None,
                      total_reserved: int | None = None, device_type: int = 1, device_id: int = 0,
                      tid: Any = None) -> dict[str, Any]:
        """A `[memory]` instant event on thread `tid`; fields given as None are left out, as
        PyTorch before 1.10 left out `Addr` and the totals."""
        args: dict[str, Any] = {"Device Type": device_type, "Device Id": device_id, "Bytes": nbytes}
        for key, value in (("Addr", addr), ("Total Allocated", total_allocated), ("Total Reserved", total_reserved)):
            if value is not None:
                args[key] = value
        return self.add({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                         "pid": self.pid, "tid": self._host_tid(tid), "ts": ts, "args": args})

    def device(self, id: int = 0, name: str = "NVIDIA H100 80GB HBM3", memory_bytes: int = 85017493504,
               major: int = 9, minor: int = 0, num_sms: int = 132) -> dict[str, Any]:
        """A `deviceProperties` entry."""
        prop = {"id": id, "name": name, "totalGlobalMem": memory_bytes, "computeMajor": major,
                "computeMinor": minor, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
                "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": num_sms}
        self.devices.append(prop)
        return prop

    def distributed(self, rank: int, world_size: int, backend: str = "nccl") -> dict[str, Any]:
        """The top-level `distributedInfo` Kineto writes for a rank of a process group."""
        info = {"backend": backend, "rank": rank, "world_size": world_size, "pg_count": 1, "pg_config": [],
                "nccl_version": "2.21.5"}
        self.metadata["distributedInfo"] = info
        return info

    def build(self) -> dict[str, Any]:
        trace = dict(self.metadata)
        if self.devices:
            trace["deviceProperties"] = list(self.devices)
        trace["traceEvents"] = list(self.events)
        return trace


def to_bytes(trace: dict[str, Any] | list[Any]) -> bytes:
    """Compact JSON bytes of a trace document (or a bare event array)."""
    return json.dumps(trace, separators=(",", ":")).encode()


def write_trace(dir: str | Path, run: str, worker: str, stamp: int, trace: dict[str, Any] | list[Any] | bytes,
                gz: bool = True) -> Path:
    """Write `dir/run/worker.stamp.pt.trace.json[.gz]` and return its path.

    `trace` may be raw bytes (e.g. damaged JSON); they are gzipped like a dict's JSON when gz=True.
    """
    folder = Path(dir) / run
    folder.mkdir(parents=True, exist_ok=True)
    data = trace if isinstance(trace, bytes) else to_bytes(trace)
    path = folder / f"{worker}.{stamp}.pt.trace.json{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def big_trace(min_bytes: int) -> bytes:
    """JSON of a trace whose event array repeats one step's events (a step, 1,000 operators and kernel
    launches) until it passes `min_bytes`: slow to load, quick to make."""
    t = Trace()
    t.step(1, 0, 100_000)
    for i in range(1000):
        t.op("aten::mm", i * 100 + 1, 40, input_dims=[[64, 64], [64, 64]])
        t.launch(i * 100 + 5, 5, i * 100 + 20, 30)
    doc = t.build()
    events = to_bytes(doc["traceEvents"])[1:-1]
    doc["traceEvents"] = []
    head = to_bytes(doc)
    assert head.endswith(b'"traceEvents":[]}')  # the array comes last: the copies go in before "]}"
    return head[:-2] + b",".join([events] * (min_bytes // len(events) + 1)) + b"]}"


def parse(trace: dict[str, Any] | list[Any]):
    """TraceTables of a synthetic trace, through the same decoder as real files."""
    from profboard.server.trace.load import parse_trace_bytes

    return parse_trace_bytes(to_bytes(trace))


def reference_pure_cpu() -> Trace:
    """The reference plugin's test_pure_cpu case: two steps of host ops and no GPU work."""
    t = Trace(legacy=True)
    t.step(1, 100, 200, tid=123)
    t.op("aten::to", 120, 10, tid=123)
    t.step(2, 300, 100, tid=123)
    t.op("aten::mm", 350, 40, tid=123)
    return t


# Ranks of a DDP job for the Distributed view (see ddp_rank).
STEP_US = 2000
CALLS_AT = (100, 600, 1100)     # host entry of each all-reduce, from the step start
TRANSFER_US = 50               # the last rank's kernel: it moves data, nobody waits


def ddp_rank(rank: int, late: dict[int, float] | None = None, skip: set[tuple[int, int]] = frozenset(),
             world: int = 4, info: bool = True) -> Trace:
    """One rank: steps 1 and 2; all-reduce k enters at CALLS_AT[k] + its lateness, its kernel
    starts 10 us later and ends TRANSFER_US after the latest rank's kernel starts."""
    late = late or {}
    t = Trace(pid=100 + rank)
    if info:
        t.distributed(rank, world)
    t.device(id=rank)
    worst = max(late.values(), default=0.0)
    for n, base in ((1, 0), (2, STEP_US)):
        t.step(n, base, STEP_US)
        t.launch(base + 20, 5, base + 30, 60, device=rank)              # compute kernel
        for k, at in enumerate(CALLS_AT):
            if (n, k) in skip:
                continue
            start = base + at + late.get(rank, 0.0)
            kernel_ts = start + 10
            kernel_end = base + at + worst + 10 + TRANSFER_US
            t.collective(start, 40, kernel_ts, kernel_end - kernel_ts, nelems=1000 * (k + 1), device=rank)
    return t


# A DDP job where one rank sleeps every step (see slow_rank_run).
SLOW_STEP_US = 100_000
SLEEP_US = 30_000
BUCKETS_AT = (10_000, 45_000, 80_000)   # host entry of each bucket's all-reduce, from the step start


def slow_rank_run(world: int = 4, slow: int = 1, sleep_us: float = SLEEP_US, steps: int = 3,
                  missed: int = 0) -> dict[str, Trace]:
    """Traces of a DDP job, by worker name: rank `slow` sleeps `sleep_us` before each step (outside
    its ProfilerStep), so its steps start `sleep_us` after the others' and it enters every bucket's
    all-reduce that much later; the others' kernels wait for it (all end TRANSFER_US after its
    kernel starts). Steps last SLOW_STEP_US + sleep_us on every rank. `missed`: the slow rank's
    trace begins after the job's first `missed` all-reduces (its profiler started late), 1 ms
    before the next one, with a shortened first step."""
    period = SLOW_STEP_US + sleep_us
    traces = {}
    for rank in range(world):
        t = Trace(pid=100 + rank)
        t.distributed(rank, world)
        t.device(id=rank)
        shift = sleep_us if rank == slow else 0.0
        for n in range(1, steps + 1):
            base = (n - 1) * period
            skip = missed if rank == slow and n == 1 else 0
            begin = base + shift + (BUCKETS_AT[skip] - 1000 if skip else 0)
            t.step(n, begin, base + shift + period - begin)
            t.launch(begin + 500, 5, begin + 510, 5000, device=rank)        # compute kernel
            for k, at in enumerate(BUCKETS_AT[skip:], start=skip):
                entry = base + shift + at
                kernel_end = base + sleep_us + at + 10 + TRANSFER_US
                t.collective(entry, 40, entry + 10, kernel_end - entry - 10, nelems=25_000 * (k + 1), device=rank)
        traces[f"worker{rank}"] = t
    return traces


def shift_clock(trace: Trace, shift_us: float) -> Trace:
    """The same trace as recorded on a clock `shift_us` ahead (another host's): every event's
    timestamp moved by it."""
    for event in trace.events:
        if "ts" in event:
            event["ts"] += shift_us
    return trace


def rule_context(trace: Trace, **fields: Any):
    """The recommendations Context of a synthetic trace, built as the overview builds it
    (`fields`: the Context's optional fields)."""
    from profboard.server.analysis.overview import gpu_summary, step_breakdown
    from profboard.server.analysis.recommendations import Context
    from profboard.server.analysis.steps import detect_steps

    tables = parse(trace.build())
    steps = detect_steps(tables.events)
    gpus = gpu_summary(tables.events, steps, tables.metadata.get("deviceProperties") or [])
    return Context(tables, steps, step_breakdown(tables.events, steps), gpus, **fields)


def legacy_training(steps: int = 2) -> Trace:
    """PyTorch 1.x's shape, as in the reference plugin's V100 samples: steps of a DataLoader fetch, a
    convolution forward and backward with their kernels, a host-to-device copy, and memory records
    without totals or addresses (PyTorch before 1.10 wrote neither)."""
    t = Trace(legacy=True)
    t.device(name="Tesla V100-SXM2-16GB", memory_bytes=16945512448, major=7, minor=0, num_sms=80)
    for n in range(1, steps + 1):
        b = n * 1000
        t.step(n, b, 900)
        t.dataloader(b + 10, 50)
        forward = t.op("aten::conv2d", b + 100, 200, input_dims=[[8, 3, 32, 32], [16, 3, 3, 3], []])
        t.launch(b + 120, 10, b + 150, 120, name="volta_scudnn_128x64_relu_interior_nn_v1",
                 external_id=forward["args"]["External id"], blocks_per_sm=1.5, occupancy=40.0)
        t.memory_record(b + 130, 65536)
        backward = t.op("aten::convolution_backward", b + 400, 300)
        t.launch(b + 420, 10, b + 450, 200, name="volta_scudnn_128x64_stridedB_splitK_small_nn_v1",
                 external_id=backward["args"]["External id"], blocks_per_sm=0.5, occupancy=20.0)
        t.memory_record(b + 650, -65536)
        to = t.op("aten::to", b + 750, 100)
        t.copy(b + 760, 20, b + 790, 30, external_id=to["args"]["External id"])
    return t
