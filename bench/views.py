"""Benchmark: latency of the Operator, Kernel, Module and Distributed views' endpoints on one
trace, or on a run folder of several workers' traces (the Distributed view then compares them
all; the other views show the first worker), after load.

    .venv/bin/python bench/views.py [TRACE | RUN_FOLDER] [--repeat 3] [--requests 30]

Each repeat starts a fresh `profboard` server (empty cache) and waits for the trace to load.
The first answer of each endpoint on that server is "cold" (it builds the operator tree and
the tables); then each is requested --requests times ("warm", memoised). Reports the median
over repeats of the cold latency and of the warm p50/p95, and the body sizes.
Target (DESIGN.md): each endpoint <= 100 ms p95 after load on fixtures/big.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

from load import DEFAULT_TRACE
from serving import get, percentiles, serve


def _paths(base: str, workers: int) -> dict[str, str]:
    """The endpoints to time; the operator-specific ones use this trace's busiest operator."""
    ops = json.loads(get(f"{base}/api/operators?run=run")[2])["rows"]
    top = ops[0]["name"]
    with_stack = next((r["name"] for r in ops if r["has_call_stack"]), top)
    quote = urllib.parse.quote
    return {
        "operators name": "/api/operators?run=run",
        "operators name_shape": "/api/operators?run=run&group_by=name_shape",
        "kernels name": "/api/kernels?run=run",
        "kernels name_op": "/api/kernels?run=run&group_by=name_op",
        f"kernels op={top}": f"/api/kernels?run=run&group_by=name_op&op={quote(top)}",
        f"stacks {with_stack}": f"/api/operators/stacks?run=run&name={quote(with_stack)}",
        "modules": "/api/modules?run=run",
        "modules optree": "/api/modules/optree?run=run",
        f"distributed ({workers} worker{'s' if workers > 1 else ''})": "/api/distributed?run=run",
    }


def _one_server(trace: Path, requests: int) -> dict:
    with serve(trace) as (base, ready, _):
        cold = {}
        status, first, body = get(f"{base}/api/operators?run=run")  # also builds the shared operator tree
        assert status == 200, body
        while (run := json.loads(get(f"{base}/api/runs")[2])["runs"][0])["status"] == "loading":
            time.sleep(0.05)  # a run folder's other workers
        workers = len(run["workers"])
        paths = _paths(base, workers)
        cold["operators name"] = first
        for label, path in paths.items():
            if label not in cold:
                cold[label] = get(base + path)[1]
        warm = {label: percentiles([get(base + path)[1] for _ in range(requests)]) for label, path in paths.items()}
        sizes = {label: len(get(base + path)[2]) for label, path in paths.items()}
    return {"ready_s": ready, "cold_ms": {k: 1000 * v for k, v in cold.items()}, "warm": warm, "bytes": sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    trace = Path(args.trace).resolve()
    runs = [_one_server(trace, args.requests) for _ in range(args.repeat)]
    labels = list(runs[0]["cold_ms"])
    summary = {
        label: {
            "cold_ms": statistics.median(r["cold_ms"][label] for r in runs),
            "p50_ms": statistics.median(r["warm"][label]["p50_ms"] for r in runs),
            "p95_ms": statistics.median(r["warm"][label]["p95_ms"] for r in runs),
            "bytes": runs[0]["bytes"][label],
        }
        for label in labels
    }
    print(json.dumps({"trace": str(trace), "summary": summary, "runs": runs}, indent=1))
    print(f"{trace.name}: server ready in {statistics.median(r['ready_s'] for r in runs):.2f} s (median of {len(runs)})",
          file=sys.stderr)
    for label, s in summary.items():
        print(f"  {label}: first {s['cold_ms']:.0f} ms, then p50 {s['p50_ms']:.1f} ms, p95 {s['p95_ms']:.1f} ms, "
              f"{s['bytes'] / 1024:.0f} KiB [target p95 <= 100 ms]", file=sys.stderr)


if __name__ == "__main__":
    main()
