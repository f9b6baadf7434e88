"""Print the reference plugin's memory stats (and events) for one trace, unrounded, as JSON.

    python bench/reference_memory.py TRACE_PATH [--start-us T] [--end-us T] [--events]
    python bench/reference_memory.py --samples-data tests/fixtures_agreement/data/reference_memory_stats.json.gz

A correctness aid for profboard's memory view: the plugin's HTTP responses round sizes to
two decimals of KB, so this reads its internal objects instead (the MemorySnapshot after
RunProfileData.parse). It re-executes itself in the reference venv (bench/.ref-venv, see
reference_plugin.py). Standard library only.

Output: {"tool", "trace", "start_us", "end_us", "stats": {device: {op: {...}}}, "events"?}
with profboard's key names: calls, size_increase_bytes, self_size_increase_bytes,
allocation_count, self_allocation_count, allocation_size_bytes, self_allocation_size_bytes.
`--events` adds the plugin's memory events table per device, times in microseconds since
the plugin's profiler start and sizes in bytes, as its rows are (operator, size,
allocation time, release time, duration).

`--samples-data OUT` writes the test data of tests/fixtures_agreement/test_memory_agreement.py:
the stats of every kineto sample trace (`SAMPLE_CASES`: whole trace, and a window cutting
through steps for two of them), each as [7 numbers] per operator in METRIC_KEYS order, gzipped.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_plugin  # noqa: E402  (shared venv handling)

# Order of the plugin's per-op metric list (memory_parser.MemoryMetrics), then calls.
METRIC_KEYS = ["self_size_increase_bytes", "self_allocation_size_bytes", "self_allocation_count",
               "size_increase_bytes", "allocation_size_bytes", "allocation_count", "calls"]


SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "kineto_samples"
# (trace under SAMPLES, start_us, end_us): whole traces, and windows cutting through steps and operators.
SAMPLE_CASES = [
    ("resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz", None, None),
    ("resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz", None, None),
    ("resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz", None, None),
    ("resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz", None, None),
    ("resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz", 1623142623772466, 1623142624066910),
    ("resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz", 1623212388739264, 1623212389033708),
]


def _in_ref_venv() -> bool:
    return Path(sys.prefix).resolve() == reference_plugin.VENV_DIR.resolve()


def memory(trace_path: str, start_us: int | None, end_us: int | None, with_events: bool) -> dict:
    """Parse with the reference and collect its memory numbers. Runs inside the ref venv."""
    import tempfile

    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    worker = reference_plugin.worker_name(trace_path)
    with tempfile.TemporaryDirectory(prefix="ref-memory-") as cache_dir:
        data = RunProfileData.parse(worker, 1, trace_path, cache_dir)
    out: dict = {"tool": reference_plugin.TOOL, "trace": trace_path, "start_us": start_us, "end_us": end_us,
                 "stats": {}}
    snapshot = data.memory_snapshot
    if snapshot is None:
        return out
    raw = snapshot.get_memory_statistics(data.tid2tree, start_ts=start_us, end_ts=end_us)
    out["stats"] = {device: {op: dict(zip(METRIC_KEYS, values, strict=True)) for op, values in sorted(ops.items())}
                    for device, ops in sorted(raw.items())}
    out["peaks"] = {f"{int(t)}:{i}": v for (t, i), v in snapshot.get_peak_memory().items()}
    if with_events:
        run = RunGenerator(worker, 1, data).generate_run_profile()
        answer = run.get_memory_events(start_us, end_us, time_metric="us", memory_metric="B")
        out["profiler_start_us"] = run.profiler_start_ts
        out["events"] = answer["rows"]
    return out


def samples_data(out_path: str) -> None:
    """The stats of SAMPLE_CASES, compact, gzipped: what the agreement test compares with."""
    cases = []
    for trace, start_us, end_us in SAMPLE_CASES:
        stats = memory(str(SAMPLES / trace), start_us, end_us, with_events=False)["stats"]
        cases.append({"trace": trace, "start_us": start_us, "end_us": end_us,
                      "stats": {device: {op: [row[k] for k in METRIC_KEYS] for op, row in ops.items()}
                                for device, ops in stats.items()}})
    body = {"tool": reference_plugin.TOOL, "metric_keys": METRIC_KEYS, "cases": cases,
            "command": "python bench/reference_memory.py --samples-data " + out_path}
    Path(out_path).write_bytes(gzip.compress(json.dumps(body, separators=(",", ":")).encode(), mtime=0))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description="The reference plugin's memory stats for one trace, as JSON.")
    ap.add_argument("trace", nargs="?")
    # The plugin's route reads its range as integers (plugin.py int(start_ts)).
    ap.add_argument("--start-us", type=int, default=None)
    ap.add_argument("--end-us", type=int, default=None)
    ap.add_argument("--events", action="store_true", help="add the memory events table")
    ap.add_argument("--samples-data", metavar="OUT", help="write the agreement test's data (see above)")
    args = ap.parse_args(argv)
    if not args.trace and not args.samples_data:
        ap.error("give a trace or --samples-data OUT")
    if not _in_ref_venv():
        python = reference_plugin.ensure_ref_venv()
        os.execv(python, [str(python), str(Path(__file__).resolve()), *argv])
    if args.samples_data:
        samples_data(args.samples_data)
        return 0
    print(json.dumps(memory(os.path.abspath(args.trace), args.start_us, args.end_us, args.events), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
