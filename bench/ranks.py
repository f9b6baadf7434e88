"""Benchmark: a job of N ranks, indexed ahead by `profboard index` or loaded cold by the server (issue 16).

    .venv/bin/python bench/ranks.py --ranks 1024 --index [--repeat 3]
    .venv/bin/python bench/ranks.py --ranks 1024 --serve [--repeat 3]
    .venv/bin/python bench/ranks.py --ranks 256 --cold [--repeat 3]
    .venv/bin/python bench/ranks.py --ranks 256 --s3

The ranks are made once from the real 4-rank run fixtures/h200x4/ddp_resnet50 (rank r is a copy of
rank r % 4 with its distributedInfo.rank and world_size rewritten) under /work/big/ranks_N/ddp_N/
(kept, and reused when it holds N traces). Never in the repository.

--index, per repeat: `profboard index --workers 2` into a fresh store (wall time; peak RSS of its whole
process tree, sampled every 0.1 s), then a server on that store: start to the first 200 of
/api/distributed, the server tree's RSS then, and /api/overview of 5 ranks picked at random.
--serve: the same server runs on the store the last --index made (kept under /work/big/index_store_N).
--cold, per repeat: a server with a fresh store: start to the first 200 of /api/distributed and the
peak RSS of its process tree.
--s3, once: the ranks indexed in this process into a local store, and by a Dask LocalCluster of 2
processes into a store on a local S3 server (moto): every summary item (and every other file) must
be the same bytes. Medians and every run's values; JSON on stdout, a summary on stderr.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil

SOURCE = Path("/work/shared/fixtures/h200x4/ddp_resnet50")
BIG = Path("/work/big")
_INFO = re.compile(rb'"distributedInfo"\s*:\s*\{[^}]*\}')


def make_ranks(n: int) -> Path:
    """The logdir of one run of `n` ranks (made when missing)."""
    run = BIG / f"ranks_{n}" / f"ddp_{n}"
    if run.is_dir() and len(list(run.glob("*.pt.trace.json*"))) == n:
        return run.parent
    run.mkdir(parents=True, exist_ok=True)
    sources = [gzip.decompress(p.read_bytes()) for p in sorted(SOURCE.glob("*.pt.trace.json.gz"))]
    for rank in range(n):
        data = sources[rank % len(sources)]

        def rewrite(match: re.Match) -> bytes:
            info = re.sub(rb'"rank"\s*:\s*\d+', b'"rank": %d' % rank, match.group(0))
            return re.sub(rb'"world_size"\s*:\s*\d+', b'"world_size": %d' % n, info)
        (run / f"rank{rank:04d}.{1700000000000 + rank}.pt.trace.json").write_bytes(_INFO.sub(rewrite, data, count=1))
    return run.parent


class PeakRss:
    """The peak of the summed RSS of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        self.root, self.peak, self._stop = psutil.Process(pid), 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def now(self) -> int:
        total = 0
        try:
            for proc in [self.root, *self.root.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        return total

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self.now())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _profboard(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "profboard.server.cli", *args], **kwargs)


def index_once(logdir: Path, store: Path) -> dict:
    shutil.rmtree(store, ignore_errors=True)
    start = time.perf_counter()
    proc = _profboard("index", str(logdir), "--cache-dir", str(store), "--workers", "2",
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rss = PeakRss(proc.pid)
    _, err = proc.communicate()
    seconds, peak = time.perf_counter() - start, rss.stop()
    if proc.returncode != 0:
        raise SystemExit(f"profboard index failed ({proc.returncode}):\n{err[-2000:]}")
    return {"index_s": seconds, "index_peak_rss": peak, "index_last_line": err.strip().splitlines()[-1]}


def serve_once(logdir: Path, store: Path, run: str, workers: list[str], overviews: int) -> dict:
    port = _port()
    base = f"http://127.0.0.1:{port}"
    start = time.perf_counter()
    proc = _profboard("--logdir", str(logdir), "--cache-dir", str(store), "--port", str(port),
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rss = PeakRss(proc.pid)
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            while True:
                try:
                    if client.get("/api/distributed", params={"run": run}).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.perf_counter() - start > 600:
                    raise SystemExit("no /api/distributed answer in 600 s")
                time.sleep(0.1)
            result = {"distributed_s": time.perf_counter() - start, "rss_then": rss.now()}
            times = []
            for worker in random.sample(workers, overviews):
                t0 = time.perf_counter()
                assert client.get("/api/overview", params={"run": run, "worker": worker}).status_code == 200
                times.append(time.perf_counter() - t0)
            if times:
                result["overview_s"] = statistics.median(times)
                result["overview_max_s"] = max(times)
    finally:
        proc.terminate()
        proc.wait(30)
        result_peak = rss.stop()
    result["peak_rss"] = result_peak
    return result


def s3_identical(logdir: Path, n: int) -> dict:
    """Index in this process and on a LocalCluster into moto S3; compare every file of every entry."""
    import boto3
    from moto.server import ThreadedMotoServer

    from profboard.server.index import index

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(AWS_ENDPOINT_URL=f"http://{host}:{port}", AWS_ACCESS_KEY_ID="testing",
                      AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    client.create_bucket(Bucket="bench")
    local = BIG / f"index_in_process_{n}"
    shutil.rmtree(local, ignore_errors=True)
    t0 = time.perf_counter()
    here = index(str(logdir), str(local), workers=0)
    t1 = time.perf_counter()
    there = index(str(logdir), "s3://bench/cache", workers=2)
    t2 = time.perf_counter()
    files = {str(p.relative_to(local)): p for p in local.glob("*/*")}
    differ = summaries = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix="cache/"):
        for obj in page["Contents"]:
            name = obj["Key"].removeprefix("cache/")
            summaries += "/summary-" in name
            differ += client.get_object(Bucket="bench", Key=obj["Key"])["Body"].read() != files.pop(name).read_bytes()
    server.stop()
    return {"in_process_s": t1 - t0, "dask_s3_s": t2 - t1, "indexed": [here.indexed, there.indexed],
            "summaries": summaries, "files_differing": differ, "files_missing_on_s3": len(files)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--index", action="store_true", help="index, then serve the indexed store")
    parser.add_argument("--serve", action="store_true", help="serve the store a previous --index made")
    parser.add_argument("--s3", action="store_true", help="in-process vs a LocalCluster into moto S3: same bytes?")
    parser.add_argument("--cold", action="store_true", help="serve with a fresh store, no index")
    args = parser.parse_args()
    logdir = make_ranks(args.ranks)
    run = f"ddp_{args.ranks}"
    workers = sorted(p.name.split(".")[0] for p in (logdir / run).glob("*.pt.trace.json*"))
    if args.s3:
        result = s3_identical(logdir, args.ranks)
        print(json.dumps(result))
        return 0 if not result["files_differing"] and not result["files_missing_on_s3"] else 1
    runs = []
    for _ in range(args.repeat):
        result = {"load": os.getloadavg()[0]}
        store = BIG / f"index_store_{args.ranks}"
        if args.index:
            result.update(index_once(logdir, store))
        if args.index or args.serve:
            result.update(serve_once(logdir, store, run, workers, overviews=5))
        if args.cold:
            shutil.rmtree(store, ignore_errors=True)
            result.update({f"cold_{k}": v for k, v in serve_once(logdir, store, run, workers, overviews=0).items()})
        runs.append(result)
        print(json.dumps(result), file=sys.stderr)
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float))]
    summary = {"ranks": args.ranks, "runs": runs, "median": {k: statistics.median(r[k] for r in runs) for k in keys}}
    print(json.dumps(summary, indent=1))
    for key, value in summary["median"].items():
        shown = f"{value / 1e9:.2f} GB" if "rss" in key else f"{value:.2f}"
        print(f"median {key}: {shown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
