"""The `profboard` command: serve a logdir, or print a worker's overview as JSON.

    profboard --logdir ./runs [--port 6006] [--bind_all] [--token T]
    profboard summary ./runs --run R --worker W --span S --json
    profboard diff ./runs --base RUN[/WORKER[/SPAN]] --new RUN[/WORKER[/SPAN]] [--json] [--fail-on-regression PCT]
    profboard index ./runs [--cache-dir DIR|URL] [--scheduler tcp://host:8786 | --workers N]
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from . import __version__
from .settings import DEFAULT_MAX_BYTES, Settings

if TYPE_CHECKING:
    from .analysis.diff import Grouping, Side
    from .items import Derivation
    from .logdir import Run, TraceFile

# The demo logdir shipped in a source checkout; served when no --logdir is given.
_DEMO_LOGDIR = Path(__file__).resolve().parent.parent / "examples" / "logdir"


def _default_cache_dir() -> str:
    from platformdirs import user_cache_dir

    return os.environ.get("PROFBOARD_CACHE_DIR") or user_cache_dir("profboard")


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    text = text.strip().lower().removesuffix("b").removesuffix("i")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", default=None,
                        help="the store: where parsed traces and their derived data are kept "
                             "(default: $PROFBOARD_CACHE_DIR or the user cache folder)")
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the store (parsed traces go to a temporary folder, deleted at exit)")
    parser.add_argument("--max-trace-size", type=_size, default=DEFAULT_MAX_BYTES, metavar="SIZE",
                        help="refuse traces that inflate beyond this many bytes, e.g. 4G (default: 4G)")
    parser.add_argument("--max-snapshot-size", type=_size, default=Settings.max_snapshot_bytes, metavar="SIZE",
                        help="refuse memory snapshots larger than this, e.g. 2G (default: 1G; a loaded snapshot "
                             "takes several times its size in memory)")


def _settings(args: argparse.Namespace, logdir: str) -> Settings:
    cache = None if args.no_cache else (args.cache_dir or _default_cache_dir())
    # `profboard summary` serves nothing: it has neither a host nor allowed names.
    host = "0.0.0.0" if getattr(args, "bind_all", False) else getattr(args, "host", Settings.host)
    return Settings(logdir=logdir, cache_dir=cache, max_trace_bytes=args.max_trace_size,
                    max_snapshot_bytes=args.max_snapshot_size, token=getattr(args, "token", None),
                    memory_budget=getattr(args, "memory_budget", Settings.memory_budget),
                    host=host, allow_hosts=tuple(getattr(args, "allow_hosts", ())),
                    source_roots=tuple(getattr(args, "source_roots", ())))


def _storage_options(urls: list[str | None], options: list[str]) -> None:
    """Pass --storage-option to the filesystem of each remote logdir or store among `urls`; raises
    ValueError with a message for the user."""
    from .logdir import apply_storage_options, is_remote

    remote = [url for url in urls if url and is_remote(url)]
    if options and not remote:
        raise ValueError("--storage-option applies to remote logdirs and stores (s3://, gs://, ...) only")
    for url in remote:
        apply_storage_options(url, options)


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="profboard",
        description="A dashboard for PyTorch profiler traces. `profboard summary --help` for the headless summary.")
    parser.add_argument("--logdir", help="folder or fsspec URL holding runs of *.pt.trace.json[.gz] "
                                         "(default: the bundled demo logdir)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=6006, help="port (default: 6006)")
    parser.add_argument("--bind_all", action="store_true", help="bind all interfaces (0.0.0.0), e.g. inside Docker")
    parser.add_argument("--token", default=os.environ.get("PROFBOARD_TOKEN") or None,
                        help="require this token (or password) for every page and API request; "
                             "prefer the PROFBOARD_TOKEN environment variable: other users can read a command line")
    parser.add_argument("--source-root", action="append", default=[], metavar="PATH", dest="source_roots",
                        help="a folder where the relative file paths of call stacks are found (PyTorch 2.x records "
                             "them relative to sys.path), e.g. your checkout or a site-packages; repeatable, looked "
                             "in in order: their frames then open in VS Code")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME", dest="allow_hosts",
                        help="also answer requests for this host name (repeatable); by default only localhost, "
                             "IP addresses, the --host name and this machine's names are, against DNS rebinding. "
                             "'.example.com' allows example.com and its subdomains; '*' allows any name "
                             "(e.g. behind a proxy that rewrites the Host header)")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE", dest="storage_options",
                        help="option for the fsspec filesystem of a remote logdir or --cache-dir, e.g. "
                             "endpoint_url=http://minio:9000 "
                             "(repeatable; JSON values allowed; secrets go in environment variables)")
    parser.add_argument("--idle-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="close a connection whose client has not sent a complete request within this many "
                             "seconds of connecting or of the previous answer, or that stops reading an answer "
                             "this long; a request being worked on is never timed out (default: %(default)g)")
    parser.add_argument("--memory-budget", type=_size, default=Settings.memory_budget, metavar="SIZE",
                        help="memory the server may hold for the traces it serves, e.g. 2G (default: 1G): "
                             "categories, derived data computed in the server and answers kept for reuse; past it, "
                             "the traces viewed least recently let go of theirs (read back from the store when "
                             "viewed again). The store's files are memory-mapped: the OS's page cache, not counted")
    parser.add_argument("--max-connections", type=int, default=None, metavar="N",
                        help="keep at most N connections open; one more closes the connection idle longest, so "
                             "idle clients cannot lock others out (default: what the open-file limit allows, "
                             "at most 1000)")
    parser.add_argument("--version", action="version", version=f"profboard {__version__}")
    _add_common(parser)
    return parser


def _summary_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="profboard summary",
                                     description="Print one worker's overview (the /api/overview object).")
    parser.add_argument("logdir", help="folder or fsspec URL")
    parser.add_argument("--run", help="run name (default: the only run, else required)")
    parser.add_argument("--worker", help="worker (default: the run's first)")
    parser.add_argument("--span", default="1", help="span id (default: 1)")
    parser.add_argument("--json", action="store_true", help="print JSON (the only format for now)")
    _add_common(parser)
    return parser


def serve(argv: list[str]) -> int:
    args = _serve_parser().parse_args(argv)
    logdir = args.logdir
    if logdir is None:
        if not _DEMO_LOGDIR.is_dir():
            print("profboard: pass --logdir (no bundled demo logdir in this installation)", file=sys.stderr)
            return 2
        logdir = str(_DEMO_LOGDIR)
    from .logdir import display_url

    try:
        _storage_options([logdir, args.cache_dir], args.storage_options)
    except ValueError as exc:
        print(f"profboard: {exc}", file=sys.stderr)
        return 2
    if not 0 < args.idle_timeout < float("inf") or (args.max_connections is not None and args.max_connections < 1):
        print("profboard: --idle-timeout and --max-connections must be positive", file=sys.stderr)
        return 2
    settings = _settings(args, logdir)
    # Stopping kills the loaders mid-load (TraceStore.close), so the semaphores of their helper pools are
    # left to multiprocessing's resource tracker, which removes them and warns about each: expected, not
    # news. The tracker, started with the loaders, takes its warning filters from these options.
    sys.warnoptions.append("ignore::UserWarning:multiprocessing.resource_tracker")
    from .loaders import Loaders

    # A loader imports what loading needs while this process imports the app.
    loaders = Loaders(settings.load_workers)
    loaders.warm()
    import uvicorn

    from .app import create_app
    from .connections import server_options

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host = settings.host
    print(f"profboard {__version__}: serving {display_url(logdir)} at "
          f"http://{'localhost' if host == '0.0.0.0' else host}:{args.port}/", file=sys.stderr)
    if args.token:
        print("profboard: a token is required (open the page once with ?token=..., "
              "or send 'Authorization: Bearer ...')", file=sys.stderr)
    elif host not in ("127.0.0.1", "localhost", "::1"):
        print(f"profboard: WARNING: listening on {host} without a token: anyone who can reach port {args.port} can "
              "read these traces. Set PROFBOARD_TOKEN (or --token) unless a firewall or proxy guards the port.",
              file=sys.stderr)
    app = create_app(settings, loaders)
    # uvicorn stops on SIGTERM as on Ctrl-C, then raises the signal again for its default action, which
    # killed the process before Python's exit ran: the loader pool's semaphores were left to the
    # resource tracker, which warned about them. Raised here, it ends the process as Ctrl-C does.
    signal.signal(signal.SIGTERM, _stopped)
    logging.getLogger("uvicorn.error").addFilter(_not_cancelled)
    try:
        uvicorn.run(app, host=host, port=args.port, log_level="warning",
                    timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
                    **server_options(args.idle_timeout, args.max_connections))
    except _Stop:
        pass
    finally:
        app.state.store.close()  # a second Ctrl-C skips the app's shutdown
    _exit_now(0)


# Seconds a stopping server lets the answers under way finish, before it drops them.
SHUTDOWN_GRACE_S = 0.5


def _not_cancelled(record: logging.LogRecord) -> bool:
    """uvicorn logs each answer it drops at the end of the grace period with the traceback of its
    cancellation, after saying how many it drops: one line is news, the tracebacks are not."""
    import asyncio  # here: `profboard summary` has no event loop to import

    return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


class _Stop(Exception):
    """SIGTERM, after uvicorn's graceful shutdown."""


def _stopped(signum: int, frame: object) -> None:
    raise _Stop


def _exit_now(code: int) -> NoReturn:
    """End the stopped server's process now. The exit handlers run (multiprocessing's: semaphores, snapshot
    readers), but not the rest of Python's exit: it waits for every thread, and an answer still computing
    past the grace period goes on in its thread (a thread cannot be interrupted; seconds on a big trace),
    for nobody; then it collects and frees every object one by one (a second of CPU on this machine), for
    memory the process gives back whole. Nothing a thread does needs finishing: store items are written
    to a temporary file and renamed into place."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _derivation(trace: TraceFile, settings: Settings, worker: str, names: tuple[str, ...]) -> Derivation:
    """The derived items of one trace file, through the store: the items of `names` are computed while
    a newly parsed trace's entry is written. Raises TraceFormatError."""
    from functools import partial

    from .derived import derive_parsed
    from .items import Derivation
    from .trace.load import store_trace

    computed: dict = {}
    entry, tables = store_trace(trace.path, trace.size, trace.mtime, [settings.cache_dir] if settings.cache_dir else [],
                                max_bytes=settings.max_trace_bytes,
                                meanwhile=partial(derive_parsed, worker, computed, names=names))
    return Derivation(entry, lambda: tables, worker, computed=computed)


def _stored_overview(trace: TraceFile, settings: Settings, worker: str) -> dict | None:
    """The worker's overview read from the trace's store entry, where it is stored at its current version
    (else None): a warm summary reads neither the trace nor its tables, and imports no analysis."""
    from .items import Derivation, current_items
    from .trace.entry import Damaged, discard
    from .trace.keys import entry_key
    from .trace.mirror import local_stores
    from .trace.shared import open_entry_from

    stores, shared = local_stores([settings.cache_dir] if settings.cache_dir else [])
    if not stores:
        return None
    key = entry_key(trace.path, trace.size, trace.mtime)
    entry = open_entry_from(stores[0], key, shared, trace.path, check=False)  # the tables are not read
    if entry is None or "overview" not in current_items(entry, worker):
        return None
    try:
        entry.check_tables()  # a damaged entry is parsed again, as when the tables are read
    except Damaged as exc:
        discard(entry.folder, str(exc), trace.path)
        return None
    found, overview = Derivation(entry, entry.tables, worker).stored("overview")
    return overview if found else None


def summary(argv: list[str]) -> int:
    from .logdir import discover
    from .trace.decode import TraceFormatError

    args = _summary_parser().parse_args(argv)
    try:
        runs = discover(args.logdir)
    except (OSError, ValueError) as exc:  # missing folder, unknown protocol, unreachable store
        print(f"profboard summary: cannot list {args.logdir}: {exc}", file=sys.stderr)
        return 2
    if args.run is None:
        if len(runs) != 1:
            print(f"profboard summary: pass --run (runs: {', '.join(runs) or 'none found'})", file=sys.stderr)
            return 2
        args.run = next(iter(runs))
    run = runs.get(args.run)
    if run is None:
        print(f"profboard summary: no run {args.run!r} (runs: {', '.join(runs) or 'none found'})", file=sys.stderr)
        return 2
    worker = args.worker or next(iter(run.workers))
    trace = run.file(worker, args.span)
    if trace is None:
        print(f"profboard summary: run {args.run!r} has no worker {worker!r} span {args.span!r} "
              f"(workers: {', '.join(run.workers)})", file=sys.stderr)
        return 2
    # The worker's overview as the server shows it when the run has no other worker: from the store.
    settings = _settings(args, args.logdir)
    overview = _stored_overview(trace, settings, worker)
    if overview is None:
        try:
            overview = _derivation(trace, settings, worker, ("overview",)).get("overview")
        except TraceFormatError as exc:
            print(f"profboard summary: cannot read {trace.path}: {exc}", file=sys.stderr)
            return 1
    json.dump(overview, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _diff_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="profboard diff",
        description="Compare two runs of a logdir per training step (the /api/diff object). Exit status: 1 when "
                    "--fail-on-regression PCT is given and the new average step is slower than the base's by more "
                    "than PCT percent, 2 for bad input (unknown run, unreadable trace), else 0.")
    parser.add_argument("logdir", help="folder or fsspec URL")
    parser.add_argument("--base", required=True, metavar="RUN[/WORKER[/SPAN]]",
                        help="the baseline (default worker: the run's first; span: 1)")
    parser.add_argument("--new", required=True, metavar="RUN[/WORKER[/SPAN]]", help="the candidate")
    parser.add_argument("--json", action="store_true", help="print the diff as JSON instead of a short summary")
    parser.add_argument("--fail-on-regression", type=float, default=None, metavar="PCT",
                        help="exit 1 when the new average step is slower than the base's by more than PCT percent")
    parser.add_argument("--group-by", choices=("name", "name_shape"), default="name",
                        help="match operators by name, or by name and input shapes (default: name)")
    parser.add_argument("--top", type=int, default=5, metavar="N",
                        help="changes listed per table in the summary (default: 5)")
    _add_common(parser)
    return parser


def _pick(runs: dict[str, Run], spec: str) -> tuple[Run, str, str, TraceFile]:
    """The run, worker and trace file that RUN[/WORKER[/SPAN]] names (run names may hold slashes: the
    longest run name that `spec` starts with); raises ValueError with a message for the user."""
    names = [name for name in runs if spec == name or spec.startswith(name + "/")]
    if not names:
        raise ValueError(f"no run {spec!r} (runs: {', '.join(runs) or 'none found'})")
    run = runs[max(names, key=len)]
    rest = spec[len(run.name) + 1:].split("/") if spec != run.name else []
    if len(rest) > 2:
        raise ValueError(f"{spec!r}: expected RUN[/WORKER[/SPAN]]")
    worker = rest[0] if rest and rest[0] else next(iter(run.workers), None)
    span = rest[1] if len(rest) == 2 else "1"
    trace = run.file(worker, span) if worker is not None else None
    if trace is None:
        raise ValueError(f"run {run.name!r} has no worker {worker!r} span {span!r} "
                         f"(workers: {', '.join(run.workers) or 'none'})")
    return run, worker, span, trace


def _diff_side(trace: TraceFile, settings: Settings, worker: str, group_by: Grouping) -> Side:
    from .analysis.diff import side
    from .analysis.modules import module_view

    items = _derivation(trace, settings, worker, ("overview", "flows"))
    tables, tree = items.tables(), items.get("optree")
    return side(tables, items.get("overview"), tree, module_view(tables, tree, items.get("flows"))["modules"], group_by)


def _short(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def _diff_summary(result: dict, top: int) -> str:
    """The diff in a few lines: verdict, step delta, the largest changes of each table."""
    steps = result["steps"]
    ratio = result["step_delta_ratio"]
    lines = [f"{result['verdict']}: average step {steps['base']['total_us'] / 1000:.2f} ms -> "
             f"{steps['new']['total_us'] / 1000:.2f} ms" + (f" ({round(ratio, 3) or 0.0:+.1%})" if ratio is not None else "")]
    for table in ("operators", "kernels", "modules"):
        changed = [row for row in result[table] if row["status"] != "unchanged"][:top]
        if changed:
            lines.append(f"{table} (change per step):")
            lines += [f"  {row['status']:<9} device {row['delta_device_us']:+9.1f} us"
                      + (f", host {row['delta_host_us']:+9.1f} us" if "delta_host_us" in row else "")
                      + f"  {_short(' '.join(filter(None, (row['name'], row.get('input_shape')))))}" for row in changed]
    recommendations = result["recommendations"]
    for key in ("resolved", "new"):
        if recommendations[key]:
            lines.append(f"recommendations {key}: {', '.join(recommendations[key])}")
    return "\n".join(lines)


def diff(argv: list[str]) -> int:
    from .analysis.diff import compare
    from .logdir import discover
    from .trace.decode import TraceFormatError

    args = _diff_parser().parse_args(argv)
    try:
        runs = discover(args.logdir)
    except (OSError, ValueError) as exc:
        print(f"profboard diff: cannot list {args.logdir}: {exc}", file=sys.stderr)
        return 2
    settings = _settings(args, args.logdir)
    sides, chosen = [], []
    for spec in (args.base, args.new):
        try:
            run, worker, span, trace = _pick(runs, spec)
            sides.append(_diff_side(trace, settings, worker, args.group_by))
        except (TraceFormatError, OSError) as exc:
            print(f"profboard diff: cannot read {trace.path}: {exc}", file=sys.stderr)
            return 2
        except ValueError as exc:
            print(f"profboard diff: {exc}", file=sys.stderr)
            return 2
        chosen.append({"run": run.name, "worker": worker, "span": span})
    result = {"base": chosen[0], "new": chosen[1], **compare(*sides)}
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(_diff_summary(result, args.top))
    ratio = result["step_delta_ratio"]
    limit = args.fail_on_regression
    return 1 if limit is not None and ratio is not None and ratio * 100 > limit else 0


def _index_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="profboard index",
        description="Parse every trace of a logdir into the store ahead of the server, in parallel on Dask "
                    "(pip install 'profboard[index]'). Exit status: 0 every trace indexed, 1 some could not be "
                    "read (listed), 2 bad input.")
    parser.add_argument("logdir", help="folder or fsspec URL")
    parser.add_argument("--cache-dir", default=None,
                        help="the store: a folder, or an fsspec URL on storage the server reads too "
                             "(s3://bucket/profboard-cache) (default: $PROFBOARD_CACHE_DIR or the user cache folder)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="run on this Dask cluster (e.g. tcp://host:8786); its workers need this profboard version")
    where.add_argument("--workers", type=int, default=None, metavar="N",
                       help="worker processes of a local Dask cluster (default: one per core; 0: in this process)")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE", dest="storage_options",
                        help="option for the fsspec filesystem of a remote logdir or store (repeatable; see profboard --help)")
    parser.add_argument("--max-trace-size", type=_size, default=DEFAULT_MAX_BYTES, metavar="SIZE",
                        help="refuse traces that inflate beyond this many bytes, e.g. 4G (default: 4G)")
    return parser


def index(argv: list[str]) -> int:
    args = _index_parser().parse_args(argv)
    store = args.cache_dir or _default_cache_dir()
    if args.workers is not None and args.workers < 0:
        print("profboard index: --workers must be 0 or more", file=sys.stderr)
        return 2
    try:
        _storage_options([args.logdir, store], args.storage_options)
    except ValueError as exc:
        print(f"profboard index: {exc}", file=sys.stderr)
        return 2
    from .index import BadInput, Progress
    from .index import index as run_index

    try:
        report = run_index(args.logdir, store, scheduler=args.scheduler, workers=args.workers,
                           max_bytes=args.max_trace_size, on_done=Progress(sys.stderr))
    except BadInput as exc:
        print(f"profboard index: {exc}", file=sys.stderr)
        return 2
    if not report.total:
        print(f"profboard index: no traces under {args.logdir}", file=sys.stderr)
        return 2
    print(f"profboard index: {report.total} traces: {report.indexed} indexed, {report.present} already in the store, "
          f"{len(report.failures)} could not be read, in {report.seconds:.1f} s", file=sys.stderr)
    for failed in report.failures:
        print(f"  {failed.path}: {failed.reason}", file=sys.stderr)
    return 1 if report.failures else 0


def collect(argv: list[str]) -> int:
    """`profboard collect`: the collectors need PyTorch, which the dashboard never imports."""
    try:
        from profboard.collectors.cli import main as collect_main
    except ModuleNotFoundError as err:
        if err.name != "torch":
            raise
        print("profboard collect needs PyTorch: pip install 'profboard[collect]'", file=sys.stderr)
        return 2
    return collect_main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # numpy asks for huge pages for arrays of 4 MB and more; on a VM whose host takes back free memory,
    # each one faults in at about 6 ms per MB, ten times the cost of ordinary pages (400 MB: 2.2-3.0 s,
    # against 0.16-0.23 s, on the machine measured), and profboard's arrays are written once and read a
    # few times. Set before numpy is imported, here and in every process this one starts (loaders, helpers).
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    if argv and argv[0] == "summary":
        return summary(argv[1:])
    if argv and argv[0] == "collect":
        return collect(argv[1:])
    if argv and argv[0] == "diff":
        return diff(argv[1:])
    if argv and argv[0] == "index":
        return index(argv[1:])
    if argv and argv[0] == "serve":
        argv = argv[1:]
    return serve(argv)


if __name__ == "__main__":
    sys.exit(main())
