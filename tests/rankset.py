"""Runs of many ranks made from a real run of a few: rank r is a copy of the source run's rank
r % k with its `distributedInfo` (rank, world size, the default group's ranks) rewritten and its
worker named `node<r // per_node>_<pid>`, so that the topology finds one node per `per_node` ranks.

    write_ranks(Path("tests/data/h200x2/ddp_straggler_rank1"), logdir / "ranks_64", 64)
    python tests/rankset.py SOURCE OUT N [--per-node 8] [--skip 5,9]    # big sets outside the repo

Each source trace is parsed once; a copy is its JSON text with the rewritten header in front of
the unchanged events, so a thousand ranks take seconds (about 3 MB of JSON per copy of tests/data).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any, Iterable

# Kineto's `distributedInfo.pg_config`: the default group, which every rank is in.
DEFAULT_GROUP = "0"


def _header_and_events(path: Path) -> tuple[dict[str, Any], str]:
    """A trace's keys other than its events, and its events' JSON text."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    events = json.dumps(trace.pop("traceEvents"), separators=(",", ":"))
    return trace, events


def _rewritten(header: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    info = dict(header.get("distributedInfo") or {})
    info.update(rank=rank, world_size=world)
    info["pg_config"] = [{**g, "pg_size": world, "ranks": list(range(world))} if g.get("pg_name") == DEFAULT_GROUP
                         else g for g in info.get("pg_config") or []]
    return {**header, "distributedInfo": info}


def write_ranks(source: Path, out: Path, n: int, per_node: int = 8, skip: Iterable[int] = ()) -> list[Path]:
    """Writes ranks 0..n-1 (world size n) made from the traces of run folder `source` into `out`
    (plain JSON), leaving out the ranks in `skip`; returns the files written."""
    sources = sorted(source.glob("*.pt.trace.json*"))
    parsed = [_header_and_events(p) for p in sources]
    out.mkdir(parents=True, exist_ok=True)
    left_out = set(skip)
    written = []
    for rank in range(n):
        if rank in left_out:
            continue
        header, events = parsed[rank % len(parsed)]
        head = json.dumps(_rewritten(header, rank, n))
        path = out / f"node{rank // per_node:03d}_{10000 + rank}.{1700000000000 + rank}.pt.trace.json"
        path.write_text(f'{head[:-1]}, "traceEvents": {events}}}')
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description="Make a run of N ranks from a real run of a few.")
    parser.add_argument("source", type=Path, help="a run folder of Kineto traces")
    parser.add_argument("out", type=Path, help="the new run's folder")
    parser.add_argument("n", type=int, help="ranks (the world size)")
    parser.add_argument("--per-node", type=int, default=8)
    parser.add_argument("--skip", default="", help="ranks to leave out, comma-separated")
    args = parser.parse_args()
    skip = [int(r) for r in args.skip.split(",") if r]
    print(f"{len(write_ranks(args.source, args.out, args.n, args.per_node, skip))} ranks in {args.out}")


if __name__ == "__main__":
    main()
