"""Benchmark: reading and analysing CUDA allocator snapshots (server/snapshot/).

    .venv/bin/python bench/snapshot.py [SNAPSHOT ...] [--entries 1000000] [--repeat 5]

Times load (restricted unpickler) + summary + active_timeline, and, sharing the history that
the timeline built, allocator_state at the middle entry and top_sites, each run in a fresh
subprocess (nothing warm but the OS page cache); reports medians over --repeat runs and peak
RSS. Snapshots: the given files, else the resnet18 fixture and a synthetic one with about
--entries trace entries (written once to a temporary folder): a training loop whose steps
allocate, request free and complete free the same addresses again and again, with a few
thousand distinct stacks whose frame lists are shared between entries, as PyTorch's are.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT.parent / "shared/fixtures/snapshots/resnet18_snapshot.pickle"
MiB = 2**20

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from profboard.server import snapshot as S
t_import = time.perf_counter()
snap = S.load_snapshot(sys.argv[1])
t_load = time.perf_counter()
S.summary(snap)
t_summary = time.perf_counter()
history = S.build_history(snap, 0)
timeline = S.active_timeline(snap, 0, history=history)
t_timeline = time.perf_counter()
S.allocator_state(snap, 0, at=timeline["entries"] // 2, history=history)
t_state = time.perf_counter()
S.top_sites(snap, 0, histories={0: history})
t_sites = time.perf_counter()
print(json.dumps({"entries": timeline["entries"], "load_s": t_load - t_import, "summary_s": t_summary - t_load,
                  "timeline_s": t_timeline - t_summary, "load_summary_timeline_s": t_timeline - t_import,
                  "state_s": t_state - t_timeline, "sites_s": t_sites - t_state,
                  "timeline_json_bytes": len(json.dumps(timeline)),
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def _stacks(count: int, rng: random.Random) -> list[list[dict]]:
    """Distinct stacks: C++ allocator frames, an ATen op, then a few Python frames (shared dicts)."""
    cpp = [{"filename": "CUDACachingAllocator.cpp", "line": 0, "name": f"c10::cuda::frame{i}()"} for i in range(12)]
    ops = [{"filename": "??", "line": 0, "name": f"at::_ops::op{i}::call(at::Tensor const&)"} for i in range(40)]
    py = [{"filename": f"/home/me/model/layer{i % 50}.py", "line": i, "name": f"forward{i % 7}"} for i in range(400)]
    return [cpp + [rng.choice(ops)] + rng.sample(py, 6) for _ in range(count)]


def synthetic(entries: int, seed: int = 0) -> dict:
    """A snapshot with about `entries` trace entries (see the module note)."""
    rng = random.Random(seed)
    stacks = _stacks(2000, rng)
    base, seg_size = 0x7F0000000000, 64 * MiB
    per_step = 400  # tensors a step allocates and frees
    sizes = [int(2 ** rng.uniform(9, 24)) for _ in range(per_step)]
    slots = [base + 1024 * MiB + i * 32 * MiB for i in range(per_step)]
    trace: list[dict] = []
    segments = []
    for s in range(32):  # parameters: allocated once, live to the end
        addr = base + s * seg_size
        trace.append({"action": "segment_alloc", "addr": addr, "size": seg_size, "stream": 0, "frames": stacks[s]})
        trace.append({"action": "alloc", "addr": addr, "size": seg_size // 2, "stream": 0, "frames": stacks[s]})
        segments.append({"device": 0, "address": addr, "total_size": seg_size, "stream": 0, "segment_type": "large",
                         "allocated_size": seg_size // 2, "active_size": seg_size // 2, "requested_size": seg_size // 2,
                         "blocks": [{"address": addr, "size": seg_size // 2, "requested_size": seg_size // 2,
                                     "state": "active_allocated", "frames": stacks[s]},
                                    {"address": addr + seg_size // 2, "size": seg_size // 2, "requested_size": 0,
                                     "state": "inactive", "frames": []}]})
    for slot in slots:
        trace.append({"action": "segment_alloc", "addr": slot, "size": 32 * MiB, "stream": 0, "frames": stacks[0]})
        segments.append({"device": 0, "address": slot, "total_size": 32 * MiB, "stream": 0, "segment_type": "large",
                         "allocated_size": 0, "active_size": 0, "requested_size": 0,
                         "blocks": [{"address": slot, "size": 32 * MiB, "requested_size": 0, "state": "inactive",
                                     "frames": []}]})
    t = 1_795_000_000_000_000
    while len(trace) < entries:
        order = list(range(per_step))
        for i in order:  # forward: allocate
            t += 3
            trace.append({"action": "alloc", "addr": slots[i], "size": sizes[i], "stream": 0, "time_us": t,
                          "frames": stacks[(i * 7) % len(stacks)]})
        rng.shuffle(order)
        for i in order:  # backward: free (request, then completion)
            t += 3
            frames = stacks[(i * 11) % len(stacks)]
            trace.append({"action": "free_requested", "addr": slots[i], "size": sizes[i], "stream": 0, "time_us": t, "frames": frames})
            trace.append({"action": "free_completed", "addr": slots[i], "size": sizes[i], "stream": 0, "time_us": t, "frames": frames})
    return {"segments": segments, "device_traces": [trace], "allocator_settings": {"expandable_segments": False}}


def _child(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("snapshots", nargs="*")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-synthetic", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_synthetic:
        Path(args.write_synthetic).write_bytes(pickle.dumps(synthetic(args.entries), protocol=4))
        return
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(p) for p in args.snapshots]
        if not paths:
            paths = [FIXTURE] if FIXTURE.exists() else []
            synth = Path(tmp) / f"synthetic_{args.entries}.pickle"
            # Written by a child, so this process stays small: the timed children inherit
            # nothing, but ru_maxrss would count a big parent's pages after fork.
            subprocess.run([sys.executable, __file__, "--write-synthetic", str(synth),
                            "--entries", str(args.entries)], check=True)
            paths.append(synth)
        results = []
        for path in paths:
            runs = [_child(path) for _ in range(args.repeat)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            results.append({"snapshot": str(path), "file_bytes": path.stat().st_size, "median": med, "runs": runs})
            print(f"{path.name} ({path.stat().st_size / MiB:.1f} MiB, {med['entries']:.0f} entries): "
                  f"load {med['load_s']:.3f} s + summary {med['summary_s']:.3f} s + timeline {med['timeline_s']:.3f} s "
                  f"= {med['load_summary_timeline_s']:.3f} s; then state {1000 * med['state_s']:.0f} ms, "
                  f"top sites {1000 * med['sites_s']:.0f} ms; timeline JSON {med['timeline_json_bytes'] / 1024:.0f} KiB; "
                  f"peak RSS {med['peak_rss_bytes'] / MiB:.0f} MiB (medians of {len(runs)})", file=sys.stderr)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
