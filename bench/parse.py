"""Benchmark: parse one trace into tables, phase by phase, without the store.

    .venv/bin/python bench/parse.py TRACE [--repeat 3] [--helpers 0 1]

Each run is a fresh subprocess (nothing warm but the OS page cache) that calls the parse path
of load_trace (`load.parse_trace`, no store) with N helper processes (the server's loaders get
`helper_count()`), started and ready before the clock starts, as a loader's are by the time
its file is read. Phases, timed by wrapping the functions parse_trace calls:

- read: the file's bytes (read_trace_bytes, gunzip for .gz; for a big local uncompressed file
  the ranges this process reads, TraceFile.read_into, included in `pieces` too)
- locate: finding the event array and the metadata (find_events, locate_events, decode_trace)
- pieces: decoding every piece of the array into columns, here and on the helpers (wall time);
  of which this process spent `decode` in msgspec and `columns` building columns
- assemble: joining the pieces' columns into the tables (tables.assemble)

Reported per helper count: the median of --repeat runs of each phase's wall and CPU time (the
loader's CPU, `_cpu`), the total wall time, the CPU time of the loader and its helpers, and the
peak RSS of the process tree (loader plus helpers, summed, sampled every 20 ms), with every
run's values. The machine is shared: take the CPU times as the steadier numbers and say what
else ran (the load average before and after is recorded).

A human summary goes to stderr, JSON to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from profboard.server.trace.parallel import helper_count
from serving import code_version, tree_memory_bytes

_CHILD = r"""
import json, os, resource, sys, time
from profboard.server.trace import load, parallel, parse, read

spent = {}

def timed(module, name, phase):
    real = getattr(module, name)
    def wrapper(*args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        try:
            return real(*args, **kwargs)
        finally:
            spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - t
            spent[phase + "_cpu"] = spent.get(phase + "_cpu", 0.0) + time.process_time() - c
    setattr(module, name, wrapper)

for module, name, phase in ((load, "read_trace_bytes", "read"), (read.TraceFile, "read_into", "read"),
                            (parse, "locate_events", "locate"), (parse, "find_events", "locate"),
                            (parse, "decode_trace", "locate"), (parse, "read_pieces", "pieces"),
                            (parse, "assemble", "assemble"), (parallel, "decode_events", "decode"),
                            (parallel, "decode_raw_events", "decode"), (parallel, "read_piece", "columns")):
    timed(module, name, phase)

def cpu_of(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

count = int(sys.argv[2])
helpers = parallel.Helpers.start(count) if count else None
pids = list(helpers.pool._processes) if helpers else []  # no public handle on them
if helpers:
    for future in [helpers.pool.submit(int) for _ in range(4 * count)]:
        future.result()  # every helper is up
print("ready", flush=True)
sys.stdin.readline()  # the parent samples memory from here on
before = [cpu_of(pid) for pid in pids]
cpu0, t0 = time.process_time(), time.perf_counter()
tables = load.parse_trace(sys.argv[1], helpers=helpers)
wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
helper_cpu = sum(cpu_of(pid) - b for pid, b in zip(pids, before))
print(json.dumps({
    "total_s": wall, **{f"{k}_s": v for k, v in spent.items()}, "cpu_s": cpu + helper_cpu, "loader_cpu_s": cpu,
    "helper_cpu_s": helper_cpu, "loader_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "event_rows": len(tables.events), "memory_rows": len(tables.memory), "flow_rows": len(tables.flows),
}), flush=True)
if helpers:
    helpers.pool.shutdown()
"""


def _run(trace: Path, helpers: int) -> dict:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(trace), str(helpers)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError(proc.communicate()[1][-2000:])
    base = tree_memory_bytes(proc.pid)[0]
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], tree_memory_bytes(proc.pid)[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    proc.stdin.write("\n")
    proc.stdin.flush()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(err[-2000:])
    return json.loads(out) | {"peak_tree_rss_bytes": peak[0], "tree_rss_before_bytes": base}


def _median(runs: list[dict]) -> dict:
    keys = [k for k in runs[0] if isinstance(runs[0][k], (int, float))]
    return {k: statistics.median(r.get(k, 0) for r in runs) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--helpers", type=int, nargs="+", default=sorted({0, helper_count()}),
                        help="helper counts to measure (default: %(default)s)")
    args = parser.parse_args()
    trace = Path(args.trace).resolve()
    result: dict = {"trace": str(trace), "size_bytes": trace.stat().st_size, "code": code_version(),
                    "load_before": os.getloadavg(), "modes": {}}
    for count in args.helpers:
        runs = [_run(trace, count) for _ in range(args.repeat)]
        result["modes"][str(count)] = {"median": _median(runs), "runs": runs}
        m = result["modes"][str(count)]["median"]
        phases = ", ".join(f"{k} {m[k + '_s']:.2f}/{m[k + '_cpu_s']:.2f}" for k in (
            "read", "locate", "pieces", "decode", "columns", "assemble") if k + "_s" in m)
        totals = ", ".join(f"{r['total_s']:.2f}" for r in runs)
        print(f"{count} helpers: total {m['total_s']:.2f} s (wall/cpu: {phases}); cpu {m['cpu_s']:.2f} s "
              f"(loader {m['loader_cpu_s']:.2f}); peak tree RSS {m['peak_tree_rss_bytes'] / 1e9:.2f} GB; "
              f"runs: {totals}", file=sys.stderr)
    result["load_after"] = os.getloadavg()
    print(f"load average before {result['load_before'][0]:.2f}, after {result['load_after'][0]:.2f}", file=sys.stderr)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
