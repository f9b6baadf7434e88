"""Time the reference plugin (torch-tb-profiler 0.4.3) loading one trace cold.

    python bench/reference_plugin.py TRACE_PATH [--repeat N] [--json] [--loader]

The reference lives in its own venv (bench/.ref-venv) so that its pins never touch
ours. Each repetition is a fresh interpreter, so nothing is warm between runs; the
timed region is file read + gunzip + json + parse + overview generation, not imports.
--loader times the plugin's full RunLoader.load() instead, which is what its UI waits
for (about 1.5x longer on a big trace: the parsed profile crosses a process boundary).
Standard library only: this must run without profboard's dependencies.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOL = "torch-tb-profiler 0.4.3"
BENCH_DIR = Path(__file__).resolve().parent
VENV_DIR = BENCH_DIR / ".ref-venv"
# The profiler package imports only numpy and pandas, plus absl-py in the loader's
# worker process; tensorboard serves the plugin's web shell, which we never start. So the
# plugin goes in with --no-deps: no tensorboard, grpcio or torch. Pinned for repeatable timings.
PLUGIN_REQ = "torch-tb-profiler==0.4.3"
RUNTIME_REQS = ["pandas==2.2.3", "numpy==1.26.4", "absl-py==2.5.1"]
_READY_MARK = VENV_DIR / ".profboard-ready"


def ref_python() -> Path:
    return VENV_DIR / "bin" / "python"


def ensure_ref_venv() -> Path:
    """Create and fill the reference venv once; return its interpreter."""
    wanted = "\n".join([PLUGIN_REQ, *RUNTIME_REQS]) + "\n"
    if _READY_MARK.exists() and _READY_MARK.read_text() == wanted and ref_python().exists():
        return ref_python()
    if not ref_python().exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV_DIR)], check=True)
    pip = [str(ref_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", PLUGIN_REQ], check=True, stdout=sys.stderr)
    # --no-warn-conflicts: pip would otherwise flag the tensorboard we leave out on purpose.
    subprocess.run([*pip, "--no-warn-conflicts", *RUNTIME_REQS], check=True, stdout=sys.stderr)
    _READY_MARK.write_text(wanted)
    return ref_python()


# The plugin's file naming: "<worker>[.<timestamp>].pt.trace.json[.gz]"; the timestamp names the span.
TRACE_NAME = re.compile(r"^(.*?)(?:\.(\d+))?\.pt\.trace\.json(?:\.gz)?$")


def worker_name(trace_path: str) -> str:
    name = os.path.basename(trace_path)
    match = TRACE_NAME.match(name)
    return match.group(1) if match else name


def _child(mode: str, trace_path: str, tmp: str, out_path: str) -> None:
    """Runs inside the ref venv: the plugin's per-file work, as loader.py chains it."""
    from torch_tb_profiler import io as ref_io
    from torch_tb_profiler.profiler import RunLoader
    from torch_tb_profiler.profiler.data import DistributedRunProfileData, RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    worker = worker_name(trace_path)
    run_dir = os.path.join(tmp, "run")
    os.mkdir(run_dir)
    os.symlink(trace_path, os.path.join(run_dir, os.path.basename(trace_path)))
    # Imports stay outside the timed region: we time the load, not interpreter start.
    start = time.perf_counter()
    if mode == "parse":
        data = RunProfileData.parse(worker, 1, trace_path, tmp)
        RunGenerator(worker, 1, data).generate_run_profile()
        DistributedRunProfileData(data)
    else:
        # What the plugin's UI actually waits for: the same work in a spawned worker
        # process, whose RunProfile is then pickled back through a multiprocessing queue.
        run = RunLoader("run", run_dir, ref_io.Cache(tmp)).load()
        if not run.get_profiles():
            raise RuntimeError("the plugin's loader produced no profile (its worker failed)")
    seconds = time.perf_counter() - start
    Path(out_path).write_text(json.dumps({"seconds": seconds, "torch_imported": "torch" in sys.modules}))


def _maxrss_bytes(ru_maxrss: int) -> int:
    return ru_maxrss if sys.platform == "darwin" else ru_maxrss * 1024


def _run_once(python: Path, trace_path: str, mode: str, timeout_s: float) -> tuple[float, int, float]:
    """One cold load in a fresh process: (load seconds, peak RSS bytes, process seconds)."""
    with tempfile.TemporaryDirectory(prefix="ref-bench-") as tmp:
        out_path = os.path.join(tmp, "result.json")
        log_path = os.path.join(tmp, "stderr.txt")
        cmd = [str(python), str(Path(__file__).resolve()), "--child", mode, trace_path, tmp, out_path]
        begin = time.perf_counter()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            # wait4 gives this child's own rusage; RUSAGE_CHILDREN would be a running max
            # over every child so far, useless for per-repetition numbers.
            deadline = begin + timeout_s
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    proc.kill()
                    os.wait4(proc.pid, 0)
                    proc.returncode = -9
                    raise TimeoutError(f"no result after {timeout_s:.0f} s")
                time.sleep(0.02)
        wall = time.perf_counter() - begin
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            # The traceback's last line names the exception; that is what a report needs.
            lines = Path(log_path).read_text(errors="replace").strip().splitlines()
            how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
            raise RuntimeError(f"reference failed ({how}): " + (lines[-1] if lines else "no output"))
        result = json.loads(Path(out_path).read_text())
        if result.get("torch_imported"):
            print("warning: the reference imported torch", file=sys.stderr)
        return result["seconds"], _maxrss_bytes(usage.ru_maxrss), wall


def measure(trace_path: str, repeat: int = 3, loader: bool = False, timeout_s: float = 900.0) -> dict:
    """Cold-load `trace_path` with the reference `repeat` times; never raises on its failures.

    Default path: RunProfileData.parse + RunGenerator.generate_run_profile in one process.
    loader=True: the plugin's RunLoader.load(), adding its worker process and the queue
    hand-off of the parsed profile. Peak RSS is that of the largest single process.
    """
    mode = "loader" if loader else "parse"
    report: dict = {"tool": TOOL, "trace": str(trace_path),
                    "path": "RunLoader.load" if loader else "RunProfileData.parse+RunGenerator",
                    "seconds": [], "median_s": None,
                    "peak_rss_bytes": [], "median_peak_rss_bytes": None, "process_seconds": []}
    try:
        python = ensure_ref_venv()
        for _ in range(repeat):
            seconds, rss, wall = _run_once(python, os.path.abspath(trace_path), mode, timeout_s)
            report["seconds"].append(seconds)
            report["peak_rss_bytes"].append(rss)
            report["process_seconds"].append(wall)
    except Exception as exc:  # a crash of the reference is a result to report, not ours to raise
        report["error"] = f"{type(exc).__name__}: {exc}"
    if report["seconds"]:
        report["median_s"] = statistics.median(report["seconds"])
        report["median_peak_rss_bytes"] = int(statistics.median(report["peak_rss_bytes"]))
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(*argv[1:5])
        return 0
    ap = argparse.ArgumentParser(description=f"Cold-load time and peak RSS of {TOOL} on one trace.")
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--loader", action="store_true",
                    help="time the plugin's whole RunLoader.load() (worker process + queue hand-off)")
    args = ap.parse_args(argv)
    report = measure(args.trace, args.repeat, loader=args.loader)
    if args.json:
        print(json.dumps(report))
    elif report["median_s"] is not None:
        runs = ", ".join(f"{s:.2f}" for s in report["seconds"])
        print(f"{TOOL}: median {report['median_s']:.2f} s ({runs}), "
              f"peak RSS {report['median_peak_rss_bytes'] / 2**20:.0f} MiB  {args.trace}"
              + (f"  [error: {report['error']}]" if "error" in report else ""))
    else:
        print(f"{TOOL}: failed on {args.trace}: {report.get('error')}")
    # With --json the error travels in the object; callers parse it rather than the exit code.
    return 0 if args.json or "error" not in report else 1


if __name__ == "__main__":
    sys.exit(main())
