"""GPU idle time by cause (server/analysis/idle.py): HTA's rules on small synthetic steps (us), and on
every real trace we hold, against the same rules applied directly to the raw events and against the
Overview's GPU utilization.

HTA's rules: a gap between two pieces of GPU work is a host wait when the host call that queued the
work ending it began after the gap began; else a kernel wait when shorter than 30 us; else other.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from profboard.server.analysis.idle import KERNEL_WAIT_US, gpu_idle
from profboard.server.analysis.overview import overview
from profboard.server.analysis.steps import detect_steps
from profboard.server.trace.load import load_trace
from synth import Trace, parse

REPO = Path(__file__).resolve().parents[2]
REAL = sorted([*REPO.glob("examples/logdir/*/*.pt.trace.json.gz"), *REPO.glob("tests/data/*/*/*.pt.trace.json.gz")])


def idle_of(t: Trace) -> dict:
    tables = parse(t.build())
    return gpu_idle(tables.events, detect_steps(tables.events))


def causes(host: float, kernel: float, other: float) -> dict:
    return {"idle_us": host + kernel + other, "host_wait_us": host, "kernel_wait_us": kernel, "other_us": other}


def rows(out: dict, key: str, stream: int | None) -> list[dict]:
    return [{k: v for k, v in r.items() if k.endswith("_us")} for r in out[key] if r["stream"] == stream]


def test_idle_three_causes_split_by_step():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(10, 2, 60, 20)     # K1 60..80
    t.step(2, 100, 200)
    t.launch(110, 2, 120, 20)   # K2 120..140: launched at 110, after K1 ended (80): host wait 80..120
    t.launch(114, 2, 150, 10)   # K3 150..160: queued at 114, gap 140..150 of 10 us < 30: kernel wait
    t.launch(117, 2, 200, 10)   # K4 200..210: queued at 117, gap 160..200 of 40 us: other
    t.launch(230, 2, 240, 10)   # K5 240..250: launched at 230, after K4 ended: host wait 210..240
    out = idle_of(t)
    # GPU, over the span 0..300 (busy 70): before K1 0..60 (launched at 10 > 0) and after K5 250..300
    # (nothing launched) are host waits too: host 60 + 40 + 30 + 50 = 180, kernel 10, other 40.
    assert out["devices"] == [{"device": 0, "span_us": 300, **causes(180, 10, 40)}]
    # Per step: 80..120 is split 20 | 20.
    assert rows(out, "steps", None) == [causes(60 + 20, 0, 0), causes(20 + 30 + 50, 10, 40)]
    # The stream, as HTA: only between its first and last piece of work (60..250).
    assert rows(out, "steps", 7) == [causes(20, 0, 0), causes(20 + 30, 10, 40)]
    assert rows(out, "average", 7) == [causes(35, 5, 20)]
    assert out["kernel_wait_threshold_us"] == KERNEL_WAIT_US == 30


def test_idle_gap_ended_by_kernels_on_two_streams_is_host_wait_only_if_none_was_queued():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(1, 1, 10, 20)                 # K1 stream 7, 10..30
    t.launch(2, 1, 50, 10)                 # K2 stream 7, 50..60: queued at 2
    t.launch(40, 1, 50, 20, stream=8)      # K3 stream 8, 50..70: launched at 40, during the gap
    out = idle_of(t)
    # GPU: 0..10 host wait (K1 launched at 1 > 0); 30..50 kernel wait (K2 was queued before 30, 20 < 30 us);
    # 70..100 host wait. 10 + 20 + 30 = 60 = 100 - busy 40.
    assert rows(out, "steps", None) == [causes(40, 20, 0)]
    assert rows(out, "steps", 7) == [causes(0, 20, 0)]
    assert rows(out, "steps", 8) == [causes(0, 0, 0)]  # one kernel: no gap between two pieces of work


def test_idle_copies_fill_their_stream_but_not_the_gpu_utilization():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(1, 1, 10, 10)         # K1 10..20
    t.copy(5, 1, 20, 25)           # cudaMemcpyAsync at 5 -> memcpy 20..45
    t.launch(6, 1, 45, 10)         # K2 45..55, queued at 6
    out = idle_of(t)
    # The GPU view counts kernels only, as the Overview's utilization (20 of 100): 0..10 host wait,
    # 20..45 kernel wait (K2 queued at 6, 25 < 30 us), 55..100 host wait.
    assert rows(out, "steps", None) == [causes(10 + 45, 25, 0)]
    assert rows(out, "steps", 7) == [causes(0, 0, 0)]  # the copy fills the stream's gap (HTA counts copies)


def test_idle_work_without_a_host_call_is_never_a_host_wait():
    t = Trace()
    t.step(1, 0, 100)
    t.launch(1, 1, 10, 10)                     # K1 10..20
    t.kernel("triton_poi_fused_0", 60, 10)     # no correlation id: no host call to compare with
    t.launch(2, 1, 75, 5)                      # K3 75..80, so that the step keeps its device work
    out = idle_of(t)
    # 20..60: 40 us, the kernel ending it has no host call: other. 70..75: kernel wait (queued at 2).
    assert rows(out, "steps", 7) == [causes(0, 5, 40)]
    assert rows(out, "steps", None) == [causes(10 + 20, 5, 40)]


def test_idle_no_gpu_work_gives_no_rows():
    t = Trace()
    t.step(1, 0, 100)
    t.op("aten::add", 10, 20)
    assert idle_of(t) == {"kernel_wait_threshold_us": KERNEL_WAIT_US, "devices": [], "steps": [], "average": []}


# --- real traces -------------------------------------------------------------------------------


def _load(path: Path):
    stat = path.stat()
    return load_trace(str(path), stat.st_size, stat.st_mtime, cache_dir=None)


def _raw_events(path: Path) -> list[dict]:
    with gzip.open(path) as f:
        doc = json.load(f)
    return [e for e in (doc["traceEvents"] if isinstance(doc, dict) else doc) if e.get("ph") == "X"]


def _hta_gaps(work: list[tuple[float, float, float | None]], lo: float | None, hi: float | None) -> list:
    """HTA's rules on one stream's (or GPU's) work (start, end, its host call's start or None), in
    plain Python: [(gap start, gap end, cause)]. With lo/hi, the GPU view's edges (idle.py note)."""
    launched: dict[float, float | None] = {}
    for start, _, call in work:
        known = [c for c in (launched.get(start, None), call) if c is not None]
        launched[start] = min(known) if known else None
    gaps, reach = [], None
    for start, end, _ in sorted(work):
        if end <= start:
            continue
        if reach is None:
            if lo is not None and start > lo:
                gaps.append((lo, start, launched[start]))
        elif start > reach:
            gaps.append((reach, start, launched[start]))
        reach = end if reach is None else max(reach, end)
    if hi is not None and reach is not None and hi > reach:
        gaps.append((reach, hi, float("inf")))
    out = []
    for a, b, call in gaps:
        cause = "host_wait" if call is not None and call > a else "kernel_wait" if b - a < KERNEL_WAIT_US else "other"
        out.append((a, b, cause))
    return out


def _raw_idle(path: Path, windows: list[tuple[float, float]]) -> dict:
    """{(device, stream or None): [per window {cause: us}]} from the raw JSON."""
    events = _raw_events(path)
    calls: dict[int, float] = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {}):
            corr = e["args"]["correlation"]
            calls[corr] = min(calls.get(corr, e["ts"]), e["ts"])
    by_stream, by_device = defaultdict(list), defaultdict(list)
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        args = e.get("args") or {}
        item = (e["ts"], e["ts"] + e["dur"], calls.get(args.get("correlation", -1)))
        if args.get("stream", -1) >= 0:
            by_stream[(args["device"], args["stream"])].append(item)
        if e["cat"] == "kernel":
            by_device[args["device"]].append(item)
    lo, hi = windows[0][0], windows[-1][1]
    gaps = {**{(d, None): _hta_gaps(w, lo, hi) for d, w in by_device.items()},
            **{key: _hta_gaps(w, None, None) for key, w in by_stream.items()}}
    out = {}
    for key, found in gaps.items():
        out[key] = [{c: sum(max(0.0, min(b, w1) - max(a, w0)) for a, b, cause in found if cause == c)
                     for c in ("host_wait", "kernel_wait", "other")} for w0, w1 in windows]
    return out


@pytest.mark.parametrize("path", REAL, ids=lambda p: f"{p.parent.name}/{p.name.split('.')[0]}")
def test_idle_agrees_with_hta_rules_on_raw_events_and_with_the_overview(path):
    view = overview(_load(path))
    windows = [(s["start_us"], s["end_us"]) for s in view["steps"]]
    expected = _raw_idle(path, windows)
    ours: dict = defaultdict(list)
    for row in view["idle"]["steps"]:
        ours[(row["device"], row["stream"])].append(row)
    assert set(ours) == set(expected)
    for key, per_step in expected.items():
        for step, want in zip(ours[key], per_step):
            for cause, us in want.items():
                assert step[f"{cause}_us"] == pytest.approx(us, abs=0.01), (key, step["step"], cause)
    # The GPU's three causes add up to the time the Overview counts as idle over the same span.
    span = windows[-1][1] - windows[0][0]
    for gpu, idle in zip(view["gpus"], view["idle"]["devices"], strict=True):
        assert (idle["device"], idle["span_us"]) == (gpu["device"], pytest.approx(span, abs=0.002))
        total = idle["host_wait_us"] + idle["kernel_wait_us"] + idle["other_us"]
        assert total == pytest.approx(idle["idle_us"], abs=0.003)
        assert idle["idle_us"] == pytest.approx(span * (1 - gpu["utilization_ratio"]), abs=max(1e-6 * span, 0.01))
