"""Benchmark: every target of issue 15 (traces of any size), on whole processes of the real `profboard`.

    .venv/bin/python bench/store.py [TRACE ...] [--repeat 3] [--only cold,views,window,reopen,shutdown,summary,runs]

For each TRACE (default: the four big traces of DEFAULT_TRACES), each repeat starts a server on an
empty cache and measures
- cold: start to the first /api/overview answer;
- views: then the first answer of each request the page of every other view makes (the views come
  from /api/runs; FIRST_REQUESTS says what their pages ask for), one after the other;
- window: the Trace view's scripted zoom and pan (bench/trace_window.py): p95 over the windows;
- memory: the resident memory of the server's whole process tree (server, loaders, their helpers,
  summed), sampled every 0.1 s: the peak over the run, and "steady" after SETTLE_S idle seconds
  at the end; then Ctrl-C (SIGINT), timed until the whole tree is gone;
- reopen: a second server on the cache the first one wrote: start to the first overview.
shutdown: a server on an empty cache gets SIGINT, in another run SIGTERM, SIGNAL_AFTER_S seconds
after its first /api/runs answer, while the trace is still loading: until the whole tree is gone.
summary: `profboard summary` of fixtures/big as a whole process, on an empty cache (cold) and again
(warm); its load alone, timed after the imports in a process of its own (bench/summary_load.py), as the
reference is timed; and torch-tb-profiler 0.4.3's RunLoader.load of the same file in the same run
(bench/reference_plugin.py installs it into bench/.ref-venv on first use), whose ratio to profboard's load
is the target, whole processes compared beside it.
runs: a logdir of --runs runs (hard links of one small trace of the repository): start to the first
/api/runs answer that lists them all (and how long that answer took: the rest is the server's start,
imports and discovery before it listens); then the overview of the run listed last (the last in the
load queue unless a request moves it forward); the tree's resident memory once idle (every run
loaded, or --idle-wait seconds after the listing, loads still under way; then the seconds loaders wait
before they leave), and the server process's own.

Before each cold server the trace is read once, so that it is in the OS page cache as "cold" means
here (this VM pages out cold page cache within minutes, which made runs measure its disk instead), and
profboard's modules are compiled to bytecode once at the start (as a pip install does; an editable
checkout under PYTHONDONTWRITEBYTECODE compiled them in every process, server and loaders alike).

Medians over --repeat; a table with the targets goes to stderr, the JSON of every run to stdout.
Sizes in the table are in GB of 10^9 bytes, as the issue's targets.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from load import DEFAULT_TRACE as SUMMARY_TRACE
from profboard.server.store import LOADERS_IDLE_S
from serving import answers, code_version, get, logdir_of, serve_logdir, tree_memory_bytes
from trace_window import walk

ROOT = Path(__file__).resolve().parent.parent
# The recorded traces (bench/record_llama.py, record_compiled.py, record_decode.py; their file names carry the
# recording machine's name and time) and make_big_trace.py's.
DEFAULT_TRACES = [next(Path(f"/work/big/{run}").glob("*.pt.trace.json"), Path(f"/work/big/{run}/missing.pt.trace.json"))
                  for run in ("llama_32l", "gpt2_compiled", "llama_decode")] + [
                  Path("/work/big/synth/h100_worker0.1795349296458661465.pt.trace.json")]
SMALL_TRACE = ROOT / "examples/logdir/loss_sync_after/vm_471.1796155657212980565.pt.trace.json.gz"
MEASURES = ("cold", "views", "window", "reopen", "shutdown", "summary", "runs")
# What each view's page asks for when it opens (web/static/js/<view>.js); any other view, /api/<view>.
FIRST_REQUESTS = {
    "trace": ["/api/trace/lanes", "/api/trace/window?width_px=1400", "/api/trace/counters"],
    "memory": ["/api/memory/devices", "/api/memory/curve", "/api/memory/stats", "/api/memory/events"],
    "modules": ["/api/modules", "/api/modules/optree"],
    "compile": ["/api/compile", "/api/recommendations"],
}
SETTLE_S = 3.0
SIGNAL_AFTER_S = 5.0
GB = 1e9
TARGETS = {  # key: (target, "max" when the figure must stay at or below it, "min" at or above)
    "cold_s": (10.0, "max"), "slowest_view_s": (2.0, "max"), "window_p95_ms": (100.0, "max"),
    "peak_rss_gb": (2.5, "max"), "steady_rss_gb": (1.0, "max"), "stop_after_load_s": (2.0, "max"),
    "reopen_s": (1.5, "max"), "sigint_loading_s": (2.0, "max"), "sigterm_loading_s": (2.0, "max"),
    "summary_warm_s": (1.0, "max"), "reference_ratio": (15.0, "min"),
    "runs_listed_s": (1.0, "max"), "idle_tree_rss_gb": (0.4, "max"),
}


def _json(base: str, path: str) -> Any:
    status, _, body = get(base + path)
    assert status == 200, f"{path}: {status}"
    return json.loads(body)


def _with_run(path: str, run: str = "run") -> str:
    return path + ("&" if "?" in path else "?") + f"run={run}"


def _view_requests(views: list[str]) -> list[str]:
    return [path for view in views if view != "overview" for path in FIRST_REQUESTS.get(view, [f"/api/{view}"])]


def _into_page_cache(path: Path) -> None:
    with open(path, "rb") as fh:
        while fh.read(64 << 20):
            pass


def _compile_bytecode() -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "server")], check=True,
                   stdout=subprocess.DEVNULL)


def _open_trace(trace: Path, only: set[str], cache: Path) -> dict:
    """One cold server on `trace` with `cache` (empty): the cold measurements, then a second server on it."""
    out: dict = {}
    _into_page_cache(trace)
    with logdir_of(trace) as logdir:
        with serve_logdir(logdir, answers("/api/overview?run=run"), cache) as served:
            out["cold_s"] = served.ready_s
            if "views" in only:
                views = next(r for r in _json(served.base, "/api/runs")["runs"] if r["name"] == "run")["views"]
                first = {}
                for path in _view_requests(views):
                    status, seconds, _ = get(served.base + _with_run(path))
                    first[path] = seconds if status == 200 else f"status {status}"
                out["views"] = views
                out["view_first_s"] = first
                timed = [s for s in first.values() if isinstance(s, float)]
                out["slowest_view_s"] = max(timed, default=None)
            if "window" in only:
                out["window"] = walk(served.base, 1400)
                out["window_p95_ms"] = out["window"]["p95_ms"]
            time.sleep(SETTLE_S)
            out["steady_rss_gb"] = served.sample()[0] / GB
            out["peak_rss_gb"] = served.peak_rss_bytes / GB
            out["peak_anon_gb"] = served.peak_anon_bytes / GB
            out["stop_after_load_s"] = served.stop(signal.SIGINT)
        if "reopen" in only:
            with serve_logdir(logdir, answers("/api/overview?run=run"), cache) as served:
                out["reopen_s"] = served.ready_s
    return out


def _signal_while_loading(trace: Path, how: int) -> dict:
    with logdir_of(trace) as logdir, serve_logdir(logdir, answers("/api/runs")) as served:
        time.sleep(SIGNAL_AFTER_S)
        status = _json(served.base, "/api/runs")["runs"][0]["status"]
        return {"status_at_signal": status, "seconds": served.stop(how)}


def _shutdown(trace: Path) -> dict:
    sigint, sigterm = _signal_while_loading(trace, signal.SIGINT), _signal_while_loading(trace, signal.SIGTERM)
    return {"sigint": sigint, "sigterm": sigterm, "sigint_loading_s": sigint["seconds"],
            "sigterm_loading_s": sigterm["seconds"]}


def _summary_seconds(logdir: Path, cache: Path) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "profboard.server.cli", "summary", str(logdir), "--json",
                    "--cache-dir", str(cache)], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def _summary_load_seconds(logdir: Path, cache: Path) -> float:
    """The load alone, after the imports, in a process of its own (bench/summary_load.py)."""
    with logdir_of(SMALL_TRACE) as small:
        done = subprocess.run([sys.executable, str(Path(__file__).with_name("summary_load.py")), str(small),
                               str(logdir), str(cache)], check=True, capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def _summary(trace: Path) -> dict:
    _into_page_cache(trace)
    with logdir_of(trace) as logdir, tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as other:
        cold = _summary_seconds(logdir, Path(cache))
        return {"summary_cold_s": cold, "summary_warm_s": _summary_seconds(logdir, Path(cache)),
                "summary_load_s": _summary_load_seconds(logdir, Path(other))}


@contextmanager
def _many_runs(count: int) -> Iterator[Path]:
    """A logdir of `count` runs, each a hard link (a copy across file systems) of SMALL_TRACE."""
    with tempfile.TemporaryDirectory() as logdir:
        for i in range(count):
            folder = Path(logdir) / f"run{i:05d}"
            folder.mkdir()
            try:
                os.link(SMALL_TRACE, folder / SMALL_TRACE.name)
            except OSError:
                (folder / SMALL_TRACE.name).write_bytes(SMALL_TRACE.read_bytes())
        yield Path(logdir)


def _lists(count: int, answers_s: list[float]) -> Callable[[str], bool]:
    """A `ready` check: /api/runs lists `count` runs; each answer's seconds go to `answers_s`."""
    def ready(base: str) -> bool:
        status, seconds, body = get(base + "/api/runs")
        answers_s.append(seconds)
        return status == 200 and len(json.loads(body)["runs"]) == count
    return ready


def _runs(count: int, idle_wait_s: float) -> dict:
    answers_s: list[float] = []
    with _many_runs(count) as logdir, serve_logdir(logdir, _lists(count, answers_s)) as served:
        # The server listened from about the start of the answer that listed them all.
        out: dict = {"runs_listed_s": served.ready_s, "runs_answer_s": answers_s[-1],
                     "listening_s": served.ready_s - answers_s[-1]}
        last = _json(served.base, "/api/runs")["runs"][-1]["name"]
        t = time.perf_counter()
        while get(served.base + _with_run("/api/overview", last))[0] != 200:
            time.sleep(0.05)
        out["last_run_overview_s"] = time.perf_counter() - t
        deadline = t + idle_wait_s
        while (loading := sum(r["status"] == "loading" for r in _json(served.base, "/api/runs")["runs"])) and (
                time.perf_counter() < deadline):
            time.sleep(1.0)
        out["all_loaded_s"] = None if loading else time.perf_counter() - t + served.ready_s
        out["loading_when_idle"] = loading
        time.sleep(LOADERS_IDLE_S + SETTLE_S)  # idle loaders leave after LOADERS_IDLE_S
        out["idle_tree_rss_gb"] = served.sample()[0] / GB
        out["idle_server_rss_gb"] = tree_memory_bytes(served.pid, descendants=False)[0] / GB
        out["peak_rss_gb"] = served.peak_rss_bytes / GB
    return out


def _safely(measure: Callable[..., dict], *args: Any) -> dict:
    """`measure(*args)`, or what went wrong: one failed measurement must not lose the others' figures."""
    try:
        return measure(*args)
    except Exception as exc:  # reported beside the figures
        return {"error": f"{measure.__name__.strip('_')}: {type(exc).__name__}: {exc}"}


def _still_loading(runs: list[dict]) -> str:
    """What the idle figures of the many runs are not, when loads were still under way."""
    loading = [r["loading_when_idle"] for r in runs if r.get("loading_when_idle")]
    return f" ({max(loading)} runs loading)" if loading else ""


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    return statistics.median(values) if values else None


def _row(label: str, key: str, value: float | None, unit: str, fails: int = 0) -> str:
    """One table line: the figure, its target, and whether it meets it."""
    shown = "-" if value is None else f"{value:.3g} {unit}"
    if key not in TARGETS:
        return f"  {label:<46} {shown:>12}"
    target, sense = TARGETS[key]
    met = value is not None and not fails and (value <= target if sense == "max" else value >= target)
    bound = "<=" if sense == "max" else ">="
    note = f" ({fails} run(s) failed)" if fails else ""
    return f"  {label:<46} {shown:>12}   target {bound} {target:g} {unit}: {'PASS' if met else 'FAIL'}{note}"


TRACE_ROWS = [("cold start to first overview", "cold_s", "s"), ("slowest first answer of another view", "slowest_view_s", "s"),
              ("trace window p95", "window_p95_ms", "ms"), ("peak RSS of the process tree", "peak_rss_gb", "GB"),
              ("steady RSS of the process tree", "steady_rss_gb", "GB"),
              ("Ctrl-C after load: tree gone", "stop_after_load_s", "s"), ("reopen from the store to first overview", "reopen_s", "s"),
              ("Ctrl-C while loading: tree gone", "sigint_loading_s", "s"),
              ("SIGTERM while loading: tree gone", "sigterm_loading_s", "s")]


def _report_trace(trace: Path, runs: list[dict]) -> list[str]:
    lines = [f"{trace.name} ({trace.stat().st_size / GB:.2f} GB), medians of {len(runs)}:"]
    for label, key, unit in TRACE_ROWS:
        if any(key in r for r in runs):
            lines.append(_row(label, key, _median(runs, key), unit, sum(key in r and r[key] is None for r in runs)))
    paths = [p for r in runs for p in r.get("view_first_s", {})]
    for path in dict.fromkeys(paths):
        values = [r["view_first_s"][path] for r in runs if isinstance(r.get("view_first_s", {}).get(path), float)]
        lines.append(_row(f"  first {path}", "", statistics.median(values) if values else None, "s"))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default=",".join(MEASURES),
                        help=f"comma-separated measurements among {', '.join(MEASURES)} (default: all); "
                             "views, window and reopen include cold, which they follow")
    parser.add_argument("--summary-trace", type=Path, default=SUMMARY_TRACE, help="the trace `summary` reads")
    parser.add_argument("--runs", type=int, default=2000, help="runs in the many-runs logdir")
    parser.add_argument("--idle-wait", type=float, default=300,
                        help="seconds to wait for the many runs to load before their idle RSS (default: %(default)g)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(MEASURES):
        parser.error(f"unknown measurement(s): {', '.join(sorted(only - set(MEASURES)))}")
    _compile_bytecode()
    result: dict = {"code": code_version(), "repeat": args.repeat, "only": sorted(only), "load": os.getloadavg()}
    lines = [f"code {result['code']}; load average at start {result['load'][0]:.2f}"]
    for trace in args.traces if only & {"cold", "views", "window", "reopen", "shutdown"} else []:
        runs: list[dict] = [{} for _ in range(args.repeat)]
        for run in runs:
            if only & {"cold", "views", "window", "reopen"}:
                with tempfile.TemporaryDirectory() as cache:
                    run.update(_safely(_open_trace, trace, only, Path(cache)))
            if "shutdown" in only:
                run.update(_safely(_shutdown, trace))
            print(f"{trace.name}: {json.dumps(run)}", file=sys.stderr, flush=True)
        result[str(trace)] = runs
        lines += _report_trace(trace, runs)
    if "summary" in only:
        from reference_plugin import measure

        runs = [_safely(_summary, args.summary_trace) for _ in range(args.repeat)]
        reference = measure(str(args.summary_trace), args.repeat, loader=True)
        result["summary"] = {"runs": runs, "reference": reference}
        cold, load = _median(runs, "summary_cold_s"), _median(runs, "summary_load_s")
        # The reference is timed from after its imports (reference_plugin.py); so is profboard's load. Whole
        # processes are compared too: the reference's includes its imports and the spawn of its worker.
        ref_process = statistics.median(reference["process_seconds"]) if reference.get("process_seconds") else None
        ratio = reference["median_s"] / load if reference.get("median_s") and load else None
        lines += [f"profboard summary of {args.summary_trace.name}, medians of {args.repeat}:",
                  _row("cold, whole process", "summary_cold_s", cold, "s"),
                  _row("cold, the load alone (after the imports)", "", load, "s"),
                  _row("warm, whole process", "summary_warm_s", _median(runs, "summary_warm_s"), "s"),
                  _row("torch-tb-profiler 0.4.3 RunLoader.load", "", reference.get("median_s"), "s")
                  + (f"   ({reference['error']})" if "error" in reference else ""),
                  _row("  its whole process", "", ref_process, "s"),
                  _row("  its load / profboard's load", "reference_ratio", ratio, "x"),
                  _row("  its whole process / profboard's", "", ref_process / cold if ref_process and cold else None,
                       "x")]
    if "runs" in only:
        runs = [_safely(_runs, args.runs, args.idle_wait) for _ in range(args.repeat)]
        result["runs"] = runs
        lines += [f"a logdir of {args.runs:,} runs, medians of {args.repeat}:",
                  _row("start to /api/runs listing them all", "runs_listed_s", _median(runs, "runs_listed_s"), "s"),
                  _row("  of which: start to listening", "", _median(runs, "listening_s"), "s"),
                  _row("  of which: that answer", "", _median(runs, "runs_answer_s"), "s"),
                  _row("then the last run's overview", "", _median(runs, "last_run_overview_s"), "s"),
                  _row("all loaded (from start)", "", _median(runs, "all_loaded_s"), "s"),
                  _row("idle RSS of the process tree" + _still_loading(runs), "idle_tree_rss_gb",
                       _median(runs, "idle_tree_rss_gb"), "GB"),
                  _row("idle RSS of the server process", "", _median(runs, "idle_server_rss_gb"), "GB"),
                  _row("peak RSS of the process tree", "", _median(runs, "peak_rss_gb"), "GB")]
    errors = [r["error"] for value in result.values() if isinstance(value, list) for r in value if "error" in r]
    errors += [r["error"] for r in result.get("summary", {}).get("runs", []) if "error" in r]
    lines += [f"failed: {error}" for error in errors]
    print("\n".join(lines), file=sys.stderr)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
