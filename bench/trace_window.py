"""Benchmark: the Trace view's window queries over a scripted pan/zoom, against issue 4's targets.

    .venv/bin/python bench/trace_window.py [TRACE] [--repeat 3] [--width 1400]

Each repeat starts a fresh `profboard` server (empty cache), waits for the trace, asks for the
lanes (reported as "first"), then walks 61 windows: the whole trace, zooming in by 1.25x a step
towards a point 43 % of the way in while panning a little, down to a few microseconds (single
kernels), then back out with pans. Reports medians over repeats of the per-window p50/p95
latency, overall and per zoom (`ZOOMS`: windows showing at least 10 % of the trace, 0.1-10 %,
less; without the first window, which may wait for the view's derived data and is reported
alone), the largest body, and the server's peak RSS.
Targets: every window <= 100 ms p95, body <= 1 MB; RSS within DESIGN.md's limits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from load import DEFAULT_TRACE
from serving import get, peak_rss_bytes, percentiles, serve

STEPS_IN = 45
STEPS_OUT = 15
# Zoom groups: name and the least share of the trace a window of the group shows.
ZOOMS = (("out", 0.1), ("mid", 0.001), ("in", 0.0))


def windows(lo: float, hi: float) -> list[tuple[float, float]]:
    """The scripted sequence: zoom in towards 43 % with a small pan each step, then out."""
    out = []
    span = hi - lo
    center = lo + 0.43 * span
    width = span
    for i in range(STEPS_IN):
        width = max(width / 1.25, 2.0)
        center += (0.02 if i % 2 else -0.01) * width
        out.append((center - width / 2, center + width / 2))
    for i in range(STEPS_OUT):
        width = min(width * 2.5, span)
        center += 0.1 * width
        out.append((max(lo, center - width / 2), min(hi, center + width / 2)))
    return [(lo, hi)] + out


def walk(base: str, width: int, run: str = "run") -> dict:
    """Asks a server for the lanes of `run`, then for the scripted windows: the lanes' first answer, the
    first window's, the windows' latency percentiles (all, and per zoom), count, largest body and most boxes."""
    status, first, body = get(f"{base}/api/trace/lanes?run={run}")
    assert status == 200, body
    lanes = json.loads(body)
    times, sizes, boxes, zooms = [], [], [], []
    span = lanes["end_us"] - lanes["start_us"]
    for start, end in windows(lanes["start_us"], lanes["end_us"]):
        zooms.append(next(name for name, least in ZOOMS if end - start >= least * span))
        status, seconds, body = get(f"{base}/api/trace/window?run={run}&start_us={start!r}&end_us={end!r}&width_px={width}")
        assert status == 200, body
        data = json.loads(body)
        times.append(seconds)
        sizes.append(len(body))
        boxes.append(sum(len(l["boxes"]["id"]) for l in data["lanes"]))
    by_zoom = {f"{name}_{key}": value for name, _ in ZOOMS
               for key, value in percentiles([t for t, z in zip(times[1:], zooms[1:]) if z == name]).items()}
    return {"lanes_first_ms": 1000 * first, "window_first_ms": 1000 * times[0], **percentiles(times), **by_zoom,
            "windows": len(times), "max_body_bytes": max(sizes), "max_boxes": max(boxes)}


def _one_server(trace: Path, width: int) -> dict:
    with serve(trace) as (base, ready, pid):
        return {"ready_s": ready, **walk(base, width), "server_peak_rss_bytes": peak_rss_bytes(pid)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--width", type=int, default=1400)
    args = parser.parse_args()
    trace = Path(args.trace).resolve()
    runs = [_one_server(trace, args.width) for _ in range(args.repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(json.dumps({"trace": str(trace), "median": med, "runs": runs}, indent=1))
    print(f"{trace.name}: ready {med['ready_s']:.2f} s; lanes (layout) {med['lanes_first_ms']:.0f} ms; "
          f"first window {med['window_first_ms']:.0f} ms; "
          f"{med['windows']:.0f} windows p50 {med['p50_ms']:.1f} ms, p95 {med['p95_ms']:.1f} ms [<= 100 ms] ("
          + ", ".join(f"{name} p50 {med[name + '_p50_ms']:.1f} p95 {med[name + '_p95_ms']:.1f}" for name, _ in ZOOMS)
          + "); "
          f"largest body {med['max_body_bytes'] / 1024:.0f} KiB [<= 1 MiB]; most boxes {med['max_boxes']:.0f}; "
          f"server peak RSS {med['server_peak_rss_bytes'] / 2**20:.0f} MiB (medians of {len(runs)})", file=sys.stderr)


if __name__ == "__main__":
    main()
