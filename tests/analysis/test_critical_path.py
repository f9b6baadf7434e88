"""The critical path of a step (server/analysis/critical_path.py): exact segments and breakdown on
synthetic steps whose path is known (host-bound, GPU-bound, a sync, with and without the sync
event), then on the traces recorded with CUDA sync events on an H200 (tests/data/h200_sync):
the breakdown sums to the step time, loss_sync_before's path goes through its Stream Syncs,
loss_sync_after's through none, the transformer's is host time (its GPU is busy about a third of
the step), and the same traces without their sync events still give a path, marked approximated.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from profboard.server.analysis import ranges
from profboard.server.analysis.critical_path import (
    BOUNDS, EVENT_SYNC, NO_SYNC_EVENTS, build_graph, step_critical_path)
from profboard.server.analysis.steps import detect_steps
from profboard.server.trace.schema import DEVICE_KINDS
from synth import NCCL_ALLREDUCE, Trace, parse

REPO = Path(__file__).resolve().parents[2]
SYNC = REPO / "tests/data/h200_sync"


def paths_of(events) -> list[dict]:
    steps = detect_steps(events)
    graph = build_graph(events)
    return [step_critical_path(events, graph, steps, i) for i in range(len(steps.names))]


def shape(events, path: dict) -> list[tuple]:
    """Each segment as (kind, bound, start, end, the name of its event or None)."""
    names = events["name"]
    return [(s["kind"], s["bound"], s["start_us"], s["end_us"],
             None if s["event_id"] is None else str(names.iat[s["event_id"]])) for s in path["segments"]]


def breakdown(**us: float) -> dict:
    return {f"{b}_us": us.get(b, 0.0) for b in BOUNDS}


def test_host_bound_step_is_host_time_with_its_data_loading():
    t = Trace()
    t.step(1, 0, 1000)
    t.dataloader(0, 200)
    t.op("aten::mm", 200, 700)
    t.launch(300, 10, 320, 20)  # the GPU is done long before the host
    events = parse(t.build()).events
    [path] = paths_of(events)
    assert shape(events, path) == [
        ("host", "data_loading", 0, 200, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"),
        ("host", "cpu", 200, 900, "aten::mm"),
        ("host", "cpu", 900, 1000, None),
    ]
    assert path["breakdown"] == breakdown(data_loading=200, cpu=800)
    assert path["approximated"] == []


def test_gpu_bound_step_follows_the_stream_back_to_the_first_launch():
    t = Trace()
    t.step(1, 0, 100)
    t.op("aten::mm", 5, 35)
    t.launch(10, 5, 20, 280)                        # K1 20..300, launched on an idle GPU
    t.launch(20, 5, 305, 295, name=NCCL_ALLREDUCE)  # K2 305..600, queued behind K1
    t.launch(30, 5, 700, 200)                       # K3 700..900, queued; 100 us after K2
    events = parse(t.build()).events
    [path] = paths_of(events)
    assert path["total_us"] == 900  # the step ends with its last kernel
    assert [s[:4] for s in shape(events, path)] == [
        ("host", "cpu", 0, 5), ("host", "cpu", 5, 10), ("launch", "launch_overhead", 10, 20),
        ("gpu", "gpu_compute", 20, 300), ("gpu_gap", "kernel_overhead", 300, 305),
        ("gpu", "communication", 305, 600), ("gpu_gap", "kernel_overhead", 600, 700),
        ("gpu", "gpu_compute", 700, 900),
    ]
    assert path["segments"][2]["to_id"] == path["segments"][3]["event_id"]  # the launch names its kernel
    assert path["breakdown"] == breakdown(cpu=10, launch_overhead=10, gpu_compute=480, communication=295,
                                          kernel_overhead=105)


def sync_step(event: bool) -> Trace:
    """A forward that launches K1 (stream 7, 50..600) and K2 (stream 8, 30..603), then waits for stream 7."""
    t = Trace()
    t.step(1, 0, 1000)
    t.op("forward", 0, 100)
    t.launch(10, 5, 50, 550)
    t.launch(20, 5, 30, 573, stream=8)
    t.synchronize(110, 495, stream=7, event=event)
    t.op("aten::item", 610, 390)
    return t


def test_step_with_a_sync_goes_through_the_kernel_its_stream_sync_waited_for():
    events = parse(sync_step(event=True).build()).events
    [path] = paths_of(events)
    assert shape(events, path) == [
        ("host", "cpu", 0, 10, "forward"),
        ("launch", "launch_overhead", 10, 50, "cudaLaunchKernel"),
        ("gpu", "gpu_compute", 50, 600, shape(events, path)[2][4]),
        ("sync", "sync", 600, 605, "cudaStreamSynchronize"),
        ("host", "cpu", 605, 610, None),
        ("host", "cpu", 610, 1000, "aten::item"),
    ]
    sync = path["segments"][3]
    assert str(events["name"].iat[sync["sync_event_id"]]) == "Stream Sync"
    assert events["stream"].iat[sync["to_id"]] == 7
    assert path["breakdown"] == breakdown(cpu=405, launch_overhead=40, gpu_compute=550, sync=5)
    assert path["approximated"] == []


def test_without_the_sync_event_the_sync_waits_for_the_last_work_on_any_stream():
    events = parse(sync_step(event=False).build()).events
    [path] = paths_of(events)
    # Stream 8's K2 ends last inside the call (603): the approximation takes it, and says so.
    assert [s[:4] for s in shape(events, path)][:4] == [
        ("host", "cpu", 0, 20), ("launch", "launch_overhead", 20, 30), ("gpu", "gpu_compute", 30, 603),
        ("sync", "sync", 603, 605)]
    assert path["breakdown"] == breakdown(cpu=415, launch_overhead=10, gpu_compute=573, sync=2)
    assert path["approximated"] == [NO_SYNC_EVENTS]


def test_an_event_sync_is_a_blocking_call_approximated():
    # cudaEventQuery, with the Event Sync that enable_cuda_sync_events records for it: which event it
    # waited for is not read, so the last work to end inside it on any stream is taken (stream 8's).
    t = sync_step(event=False)
    t.events = [e for e in t.events if e["name"] != "cudaStreamSynchronize"]
    corr = t.runtime("cudaEventQuery", 110, 495)
    t.add({"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 7, "ts": 110, "dur": 495,
           "args": {"cuda_sync_kind": "Event Sync", "wait_on_stream": -1, "wait_on_cuda_event_record_corr_id": -1,
                    "wait_on_cuda_event_id": 46, "stream": -1, "correlation": corr, "device": 0, "context": 1}})
    events = parse(t.build()).events
    [path] = paths_of(events)
    gpu, sync = shape(events, path)[2:4]
    assert gpu[:4] == ("gpu", "gpu_compute", 30, 603)
    assert sync == ("sync", "sync", 603, 605, "cudaEventQuery")
    assert path["approximated"] == [EVENT_SYNC]


def real(name: str, drop_sync_events: bool = False):
    [file] = (SYNC / name).glob("*.pt.trace.json.gz")
    doc = json.loads(gzip.decompress(file.read_bytes()))
    if drop_sync_events:
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cuda_sync"]
    return parse(doc).events


NAMES = ["loss_sync_before", "loss_sync_after", "resnet50_fp32", "transformer_adamw_bf16"]


@pytest.mark.parametrize("drop", [False, True], ids=["sync events", "without them"])
@pytest.mark.parametrize("name", NAMES)
def test_real_paths_tile_the_step(name: str, drop: bool):
    events = real(name, drop)
    for path in paths_of(events):
        # Each time is rounded to the nanosecond, as the trace records them.
        assert sum(path["breakdown"].values()) == pytest.approx(path["total_us"], abs=0.01)
        segments = path["segments"]
        assert segments[0]["start_us"] == pytest.approx(path["start_us"])
        assert segments[-1]["end_us"] == pytest.approx(path["end_us"])
        for a, b in zip(segments, segments[1:]):
            assert a["end_us"] == pytest.approx(b["start_us"], abs=1e-3)
        assert (NO_SYNC_EVENTS in path["approximated"]) == drop


def sync_calls_on_path(events, path: dict) -> list[str]:
    return [str(events["name"].iat[s["event_id"]]) for s in path["segments"] if s["kind"] == "sync"]


@pytest.mark.parametrize("drop", [False, True], ids=["sync events", "without them"])
def test_loss_sync_before_waits_in_its_stream_syncs_and_after_does_not(drop: bool):
    before = real("loss_sync_before", drop)
    for path in paths_of(before):
        calls = sync_calls_on_path(before, path)
        assert calls and set(calls) == {"cudaStreamSynchronize"}
        if not drop:
            assert {str(before["name"].iat[s["sync_event_id"]]) for s in path["segments"]
                    if s["kind"] == "sync"} == {"Stream Sync"}
    after = real("loss_sync_after", drop)
    assert all(sync_calls_on_path(after, path) == [] for path in paths_of(after))


def test_transformer_is_host_bound_as_its_gpu_busy_time_shows():
    # The bf16 transformer's host launches ~1000 short kernels a step: the GPU is busy about a third
    # of the step (counted here from the raw kernels), the host never waits for it, so the path is
    # host time nearly all the way.
    events = real("transformer_adamw_bf16")
    steps = detect_steps(events)
    device = np.isin(events["kind"].to_numpy(), DEVICE_KINDS)
    ts = events["ts"].to_numpy()[device]
    busy = ranges.union(ts, ts + events["dur"].to_numpy()[device])
    for i, path in enumerate(paths_of(events)):
        assert ranges.clip_total(busy, steps.starts[i], steps.ends[i]) < 0.4 * path["total_us"]
        assert path["breakdown"]["cpu_us"] > 0.9 * path["total_us"]
