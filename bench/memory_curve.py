"""Benchmark: the Memory view's curve over a million `[memory]` records, against issue 5's target.

    .venv/bin/python bench/memory_curve.py [--records 1000000] [--repeat 7] [--width 1500]

Builds the memory table of a synthetic trace in memory (no file: the curve reads only that
table): 90 % of the records on GPU0, 10 % on the CPU, tensors allocated and freed in a
random walk whose totals follow the records, so the curve has real peaks. Times `curve()` for
the whole trace, a 10 % window and a 0.1 % window, each with its answer serialised to JSON
(what the API adds), and reports the median of --repeat runs. Checks on the way that the
thinned curve keeps the exact peak.
Target: <= 200 ms for 1M records on the 2-core dev machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
import pandas as pd

from profboard.server.analysis.memory_curve import curve
from profboard.server.trace.tables import TraceTables


def _device_walk(rng: np.random.Generator, n: int, base_addr: int) -> dict[str, np.ndarray]:
    """n records of one device: allocations, then frees of live tensors, in a random order."""
    pairs = n // 2
    sizes = rng.choice([512, 4096, 1 << 20, 25 << 20, 100 << 20], size=pairs, p=[0.4, 0.3, 0.2, 0.08, 0.02])
    alloc_at = np.sort(rng.random(pairs))
    free_at = np.minimum(alloc_at + rng.exponential(0.002, pairs), 1.0)
    t = np.r_[alloc_at, free_at]
    nbytes = np.r_[sizes, -sizes]
    addr = np.r_[base_addr + np.arange(pairs) * 4096, base_addr + np.arange(pairs) * 4096]
    order = np.argsort(t, kind="stable")
    t, nbytes, addr = t[order], nbytes[order], addr[order]
    allocated = np.cumsum(nbytes).astype(np.float64)
    reserved = np.maximum.accumulate(allocated) + float(2 << 20)
    return {"t": t, "bytes": nbytes, "addr": addr, "allocated": allocated, "reserved": reserved}


def synthetic_tables(records: int, seed: int = 0) -> TraceTables:
    """TraceTables whose memory table holds `records` records over a 10 s trace."""
    rng = np.random.default_rng(seed)
    gpu = _device_walk(rng, int(records * 0.9), 0x7F0000000000)
    cpu = _device_walk(rng, records - len(gpu["t"]), 0x10000000)
    n_gpu, n_cpu = len(gpu["t"]), len(cpu["t"])
    ts = 1.0e9 + 1.0e7 * np.r_[gpu["t"], cpu["t"]]
    order = np.argsort(ts, kind="stable")
    memory = pd.DataFrame({
        "ts": ts,
        "pid": pd.Categorical(["426"] * (n_gpu + n_cpu)),
        "tid": pd.Categorical(["426"] * (n_gpu + n_cpu)),
        "device_type": np.r_[np.ones(n_gpu, np.int64), np.zeros(n_cpu, np.int64)],
        "device_id": np.r_[np.zeros(n_gpu, np.int64), np.full(n_cpu, -1, np.int64)],
        "addr": np.r_[gpu["addr"], cpu["addr"]].astype(np.int64),
        "bytes": np.r_[gpu["bytes"], cpu["bytes"]].astype(np.int64),
        "total_allocated": np.r_[gpu["allocated"], cpu["allocated"]],
        "total_reserved": np.r_[gpu["reserved"], cpu["reserved"]],
    }).iloc[order].reset_index(drop=True)
    return TraceTables(events=pd.DataFrame(), memory=memory, flows=pd.DataFrame(), counters=pd.DataFrame(),
                       metadata={})


def _time(fn, repeat: int) -> tuple[float, dict]:
    seconds = []
    answer: dict = {}
    for _ in range(repeat):
        start = time.perf_counter()
        answer = fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--width", type=int, default=1500)
    args = parser.parse_args()
    tables = synthetic_tables(args.records)
    ts = tables.memory["ts"].to_numpy()
    lo, hi = float(ts[0]), float(ts[-1])
    span = hi - lo
    windows = {"whole trace": (None, None), "10% window": (lo + 0.4 * span, lo + 0.5 * span),
               "0.1% window": (lo + 0.4 * span, lo + 0.401 * span)}
    report = {"records": args.records, "width_px": args.width, "repeat": args.repeat, "target_ms": 200, "runs": {}}
    gpu = tables.memory[tables.memory["device_type"] == 1]
    for label, (start, end) in windows.items():
        def one(start=start, end=end) -> dict:
            answer = curve(tables, "GPU0", start, end, args.width)
            json.dumps(answer)
            return answer
        median, answer = _time(one, args.repeat)
        inside = gpu[(gpu["ts"] >= (start if start is not None else lo)) & (gpu["ts"] <= (end if end is not None else hi))]
        expected_peak = int(inside["total_allocated"].max())
        assert max(answer["allocated_bytes"]) == expected_peak == answer["peak_allocated"]["bytes"], label
        report["runs"][label] = {"median_ms": round(1000 * median, 1), "records_in_range": answer["records"],
                                 "points": answer["points"], "bytes_json": len(json.dumps(answer))}
    print(json.dumps(report, indent=1))
    for label, run in report["runs"].items():
        print(f"  {label}: median {run['median_ms']:.1f} ms over {args.repeat} runs, {run['records_in_range']} records "
              f"-> {run['points']} points, {run['bytes_json'] / 1024:.0f} KiB JSON [target <= 200 ms]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
