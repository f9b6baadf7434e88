"""`profboard collect`: run a profiled workload and write its runs into a logdir."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .workloads import WORKLOADS
from .workloads import ddp as ddp_workload
from .workloads.common import options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="profboard collect",
        description="Run a profiled training workload and write its traces as runs of a logdir.")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    sub = parser.add_subparsers(dest="workload", metavar="WORKLOAD")
    for workload in WORKLOADS.values():
        p = sub.add_parser(workload.name, help=workload.summary, description=workload.module.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--logdir", required=True, help="folder the run folders are written into")
        p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                       help="auto: CUDA when available (default); cpu runs small sizes")
        p.add_argument("--steps", type=int, default=3, help="steps recorded per span (default 3)")
        p.add_argument("--repeat", type=int, default=1, help="spans (trace files) per worker (default 1)")
        p.add_argument("--warmup-steps", type=int, default=2,
                       help="steps run before the profiler starts (default 2)")
        p.add_argument("--tables", action="store_true", help="print the top-operator tables")
        p.add_argument("--snapshot", action="store_true",
                       help="after profiling, record two more steps' CUDA allocations into "
                            "memory_snapshot.pickle.gz in the run's folder (the Memory Snapshot view)")
        p.add_argument("--sync-events", action="store_true",
                       help="record CUDA synchronizations as events (which stream or event was waited on): "
                            "the critical path of a step follows them")
        p.add_argument("--json", action="store_true", help="print what was written as JSON")
        workload.add_arguments(p)
    return parser


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list or args.workload is None:
        width = max(map(len, WORKLOADS))
        for workload in WORKLOADS.values():
            print(f"{workload.name:<{width}}  {workload.summary}")
        return 0 if args.list else 2
    if args.workload == "ddp" and "RANK" not in os.environ:
        # Not under torchrun: start it, one process per rank.
        return ddp_workload.launch(argv, options(args), args.nproc)
    written = WORKLOADS[args.workload].run(options(args), args)
    if args.json:
        json.dump(written, sys.stdout, indent=1)
        print()
    return 0
