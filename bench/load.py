"""Benchmark: cold load, cache reopen and API latency on one trace, against DESIGN.md's targets.

    .venv/bin/python bench/load.py [TRACE] [--repeat 5] [--reference]

Each cold/cached measurement runs in a fresh subprocess (nothing warm but the OS page cache)
and reports the median over --repeat runs, with peak RSS. `server` measures the real
`profboard` command: start to the first successful /api/overview answer, then the p50/p95
latency of repeated API calls. --reference also times torch-tb-profiler 0.4.3 on the same
trace (bench/reference_plugin.py; it installs into bench/.ref-venv).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from serving import get, percentiles, serve

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT.parent / "shared/fixtures/big/gpt_big_bf16/h100_worker0.1795349296458661465.pt.trace.json.gz"

# Runs in a child: load (no cache or a given cache) and compute the overview.
_CHILD = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
from profboard.server.trace.load import load_trace
from profboard.server.analysis.overview import overview
t_import = time.perf_counter()
path, cache = sys.argv[1], (sys.argv[2] or None)
st = os.stat(path)
tables = load_trace(path, st.st_size, st.st_mtime, cache_dir=cache)
t_load = time.perf_counter()
overview(tables)
t_done = time.perf_counter()
print(json.dumps({"import_s": t_import - t0, "load_s": t_load - t_import, "overview_s": t_done - t_load,
                  "ready_s": t_done - t_import, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def _child(trace: Path, cache: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(trace), cache], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def _median_runs(trace: Path, cache: str, repeat: int) -> dict:
    runs = [_child(trace, cache) for _ in range(repeat)]
    keys = runs[0].keys()
    return {k: statistics.median(r[k] for r in runs) for k in keys} | {"runs": runs}


def _server(trace: Path, requests: int) -> dict:
    with serve(trace) as (base, ready, _):
        lat = {path: percentiles([get(base + path)[1] for _ in range(requests)])
               for path in ("/api/runs", "/api/views", "/api/overview?run=run")}
    return {"start_to_overview_s": ready, "latency": lat}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--reference", action="store_true", help="also time torch-tb-profiler 0.4.3")
    args = parser.parse_args()
    trace = Path(args.trace).resolve()
    result: dict = {"trace": str(trace), "size_bytes": trace.stat().st_size}
    result["cold"] = _median_runs(trace, "", args.repeat)
    with tempfile.TemporaryDirectory() as cache:
        _child(trace, cache)  # fill the cache
        result["cached"] = _median_runs(trace, cache, args.repeat)
    result["server"] = _server(trace, args.requests)
    if args.reference:
        sys.path.insert(0, str(Path(__file__).parent))
        from reference_plugin import measure

        result["reference"] = measure(str(trace), args.repeat)
    cold, cached = result["cold"], result["cached"]
    print(f"cold load to overview ready: median {cold['ready_s']:.2f} s (load {cold['load_s']:.2f} s, "
          f"overview {cold['overview_s']:.3f} s), peak RSS {cold['peak_rss_bytes'] / 2**20:.0f} MiB [target <= 3 s, 1 GiB]",
          file=sys.stderr)
    print(f"reopen from cache: median {cached['ready_s']:.3f} s, peak RSS {cached['peak_rss_bytes'] / 2**20:.0f} MiB "
          "[target <= 0.5 s]", file=sys.stderr)
    srv = result["server"]
    print(f"server start to first overview: {srv['start_to_overview_s']:.2f} s", file=sys.stderr)
    for path, lat in srv["latency"].items():
        print(f"  {path}: p50 {lat['p50_ms']:.1f} ms, p95 {lat['p95_ms']:.1f} ms [target p95 <= 100 ms]", file=sys.stderr)
    if "reference" in result:
        ref = result["reference"]
        if "median_s" in ref:
            print(f"torch-tb-profiler 0.4.3: median {ref['median_s']:.2f} s, "
                  f"x{ref['median_s'] / cold['ready_s']:.1f} slower than profboard cold", file=sys.stderr)
        else:
            print(f"torch-tb-profiler 0.4.3: {ref.get('error')}", file=sys.stderr)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
