"""Benchmark: cold load of a large trace (e.g. bench/make_big_trace.py's) to overview ready.

    .venv/bin/python bench/scale.py TRACE [--repeat 3] [--source SRC] [--copies N] [--no-source]

Each run is a fresh subprocess (nothing warm but the OS page cache) that times
`profboard.server.trace.load.load_trace(path, size, mtime, cache_dir=None)` and then
`profboard.server.analysis.overview.overview(tables)`, and reports its peak RSS
(`resource.getrusage(RUSAGE_SELF).ru_maxrss`) and its helpers' (the processes that decode
pieces of a big trace alongside, `--helpers`, as many as the server's loaders get). Reported: the median and every run's value
of load s, overview s, ready s (load + overview), its CPU time (steadier than wall time on
a shared machine) and peak RSS, against DESIGN.md's 1 GB
targets (<= 20 s cold, RSS <= 4 GB, taken as 4 * 10^9 bytes).

Sanity check: the overview's step count must be copies x the source's steps, and each
GPU's utilization, SM efficiency, occupancy and tensor-core ratio must be close to the
source's (the gaps between copies are idle, so utilization drops by about gap / period).
The source and the number of copies come from TRACE.bench.json (the manifest that
make_big_trace.py writes) unless given; the source is run once, the same way.

A human summary goes to stderr, JSON to stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from profboard.server.trace.parallel import helper_count
from serving import code_version

TARGET_S = 20.0
TARGET_RSS_BYTES = 4_000_000_000
# Ratios of the big trace may differ from the source's by this much (absolute).
RATIO_TOLERANCE = 0.01

_CHILD = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
from profboard.server.trace.load import load_trace
from profboard.server.trace.parallel import Helpers
from profboard.server.analysis.overview import overview
t_import = time.perf_counter()
helpers = Helpers.start(int(sys.argv[2])) if int(sys.argv[2]) else None
cpu_import = time.process_time()
rss_import = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
path = sys.argv[1]
st = os.stat(path)
tables = load_trace(path, st.st_size, st.st_mtime, cache_dir=None, helpers=helpers)
t_load = time.perf_counter()
rss_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
ov = overview(tables)
t_done = time.perf_counter()
if helpers:
    helpers.pool.shutdown(wait=True)
print(json.dumps({
    "import_s": t_import - t0, "load_s": t_load - t_import, "overview_s": t_done - t_load,
    "ready_s": t_done - t_import, "ready_cpu_s": time.process_time() - cpu_import,
    "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "peak_rss_helper_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    "peak_rss_after_import_bytes": rss_import, "peak_rss_after_load_bytes": rss_load,
    "event_rows": len(tables.events), "memory_rows": len(tables.memory), "flow_rows": len(tables.flows),
    "steps": [s["step"] for s in ov["steps"]], "average": ov["average"], "gpus": ov["gpus"],
    "warnings": ov["warnings"],
}))
"""


def _child(trace: Path, timeout: float, helpers: int) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(trace), str(helpers)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        reason = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        return {"error": f"{reason}: {proc.stderr.strip()[-2000:]}"}
    return json.loads(proc.stdout)


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def _summary(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    keys = ("import_s", "load_s", "overview_s", "ready_s", "ready_cpu_s", "peak_rss_bytes")
    return {
        "median": {k: _median(ok, k) for k in keys},
        "values": {k: [r.get(k) for r in ok] for k in keys},
        "errors": [r["error"] for r in runs if "error" in r],
        "runs": runs,
    }


def _sanity(big: dict, source: dict | None, copies: int | None) -> tuple[dict, list[str]]:
    lines: list[str] = []
    out: dict = {"steps": len(big["steps"]), "step_names": [big["steps"][0], big["steps"][-1]] if big["steps"] else []}
    if source is None or "error" in source:
        lines.append(f"steps: {len(big['steps'])} (no source run to compare with)")
        return out, lines
    out["source_steps"] = len(source["steps"])
    if copies:
        expect = copies * len(source["steps"])
        out["expected_steps"] = expect
        out["steps_ok"] = len(big["steps"]) == expect
        lines.append(f"steps: {len(big['steps'])} = {copies} copies x {len(source['steps'])} source steps: "
                     f"{'OK' if out['steps_ok'] else 'MISMATCH'} ({big['steps'][0]}..{big['steps'][-1]})")
    src_gpus = {g["device"]: g for g in source["gpus"]}
    gpus = []
    for g in big["gpus"]:
        s = src_gpus.get(g["device"], {})
        row = {"device": g["device"]}
        for key in ("utilization_ratio", "sm_efficiency_ratio", "achieved_occupancy_ratio", "tensor_core_ratio"):
            a, b = g.get(key), s.get(key)
            row[key] = a
            row[f"source_{key}"] = b
            row[f"{key}_ok"] = a is not None and b is not None and abs(a - b) <= RATIO_TOLERANCE
        gpus.append(row)
        lines.append(
            f"GPU {g['device']}: " + ", ".join(
                f"{key.removesuffix('_ratio')} {row[key]:.4f} vs {row['source_' + key]:.4f}"
                + ("" if row[f'{key}_ok'] else " DIFFERS")
                for key in ("utilization_ratio", "sm_efficiency_ratio", "achieved_occupancy_ratio", "tensor_core_ratio")
                if row[key] is not None and row["source_" + key] is not None))
    out["gpus"] = gpus
    a, b = big["average"].get("total_us"), source["average"].get("total_us")
    if a and b:
        out["average_step_us"] = a
        out["source_average_step_us"] = b
        lines.append(f"average step: {a / 1e3:.1f} ms vs source {b / 1e3:.1f} ms")
    return out, lines


def _fmt(values: list, scale: float = 1.0, digits: int = 2) -> str:
    return ", ".join(f"{v / scale:.{digits}f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--source", help="the trace TRACE was made from (default: from TRACE.bench.json)")
    parser.add_argument("--copies", type=int, help="copies of the source in TRACE (default: from TRACE.bench.json)")
    parser.add_argument("--no-source", action="store_true", help="skip the source run and the sanity comparison")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per child run")
    parser.add_argument("--helpers", type=int, default=helper_count(),
                        help="helper processes decoding pieces, as the server's loaders get (default: %(default)s)")
    args = parser.parse_args()
    trace = Path(args.trace).resolve()
    manifest_path = Path(str(trace) + ".bench.json")
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    source = args.source or manifest.get("source")
    copies = args.copies or manifest.get("copies")

    result: dict = {"trace": str(trace), "size_bytes": trace.stat().st_size, "code": code_version(),
                    "manifest": manifest or None,
                    "targets": {"ready_s": TARGET_S, "peak_rss_bytes": TARGET_RSS_BYTES}}
    runs = []
    for i in range(args.repeat):
        run = _child(trace, args.timeout, args.helpers)
        runs.append(run)
        if "error" in run:
            print(f"run {i + 1}: FAILED {run['error']}", file=sys.stderr, flush=True)
        else:
            print(f"run {i + 1}: load {run['load_s']:.2f} s, overview {run['overview_s']:.2f} s "
                  f"(CPU {run['ready_cpu_s']:.2f} s), peak RSS {run['peak_rss_bytes'] / 1e9:.2f} GB "
                  f"(+ helpers {run['peak_rss_helper_bytes'] / 1e9:.2f} GB)",
                  file=sys.stderr, flush=True)
    result["big"] = _summary(runs)
    ok = [r for r in runs if "error" not in r]
    src_run = None
    if source and not args.no_source:
        src_run = _child(Path(source), args.timeout, args.helpers)
        result["source"] = {"trace": source, "run": src_run}
    lines: list[str] = [f"code {result['code']}"]
    if ok:
        med = result["big"]["median"]
        vals = result["big"]["values"]
        passed = med["ready_s"] <= TARGET_S and med["peak_rss_bytes"] <= TARGET_RSS_BYTES
        result["pass"] = passed
        lines.append(
            f"{trace.name} ({result['size_bytes'] / 1e9:.2f} GB file, {ok[0]['event_rows']:,} complete events), "
            f"{len(ok)} runs: load median {med['load_s']:.2f} s [{_fmt(vals['load_s'])}], "
            f"overview {med['overview_s']:.2f} s [{_fmt(vals['overview_s'])}], "
            f"ready {med['ready_s']:.2f} s (CPU {med['ready_cpu_s']:.2f} s), peak RSS median {med['peak_rss_bytes'] / 1e9:.2f} GB "
            f"[{_fmt(vals['peak_rss_bytes'], 1e9)}] -- targets <= {TARGET_S:.0f} s, <= {TARGET_RSS_BYTES / 1e9:.0f} GB: "
            f"{'PASS' if passed else 'FAIL'}")
        sanity, sanity_lines = _sanity(ok[0], src_run, copies)
        result["sanity"] = sanity
        lines += sanity_lines
        if src_run and "error" not in src_run:
            lines.append(f"source: load {src_run['load_s']:.2f} s, overview {src_run['overview_s']:.2f} s, "
                         f"peak RSS {src_run['peak_rss_bytes'] / 1e9:.2f} GB")
    else:
        result["pass"] = False
        lines.append(f"{trace.name}: every run failed: {result['big']['errors'][0]}")
    for err in result["big"]["errors"]:
        lines.append(f"failed run: {err[:300]}")
    print("\n".join(lines), file=sys.stderr)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
