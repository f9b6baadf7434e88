"""Distributed view on h200x4/ddp_resnet50 (4 ranks, NCCL, H200), checked against the raw JSON.

Per rank, read with plain Python: communication = the union of NCCL kernels (names with
"nccl", `ncclDevKernel_*` here) inside each reported step; overlapping = its intersection with
the union of the other kernels; computation + overlapping = that union inside the step. The
comm-op table's calls and sizes match the `nccl:*` host events (elements x element size) and
the `record_param_comms` events (`In msg nelems` x dtype size, `Collective name`); latency is
the time of the NCCL kernels tied to record_param_comms by external id. Stragglers: every
collective aligns, and the rank named is also the one whose all-reduce kernel starts last
most often on the shared clock (all four ranks ran on one host), as often.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from profboard.server.analysis.distributed import distributed
from profboard.server.trace.load import parse_trace_bytes
from profboard.server.trace.read import read_trace_bytes

RUN = "h200x4/ddp_resnet50"
ELEMENT = {"float": 4, "long int": 8, "c10::Half": 2, "c10::BFloat16": 2, "int": 4}
DTYPE = {"Float": 4, "Long": 8, "Half": 2, "BFloat16": 2, "Int": 4}
OP_OF = {"allreduce": "nccl:all_reduce", "broadcast": "nccl:broadcast", "allgather": "nccl:all_gather",
         "reduce_scatter": "nccl:reduce_scatter"}
HOST_CATS = ("cpu_op", "user_annotation")


def files(fixtures_dir: Path) -> list[Path]:
    folder = fixtures_dir / RUN
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    return sorted(folder.glob("*.pt.trace.json*"))


@lru_cache(maxsize=None)
def analysed(folder: str) -> dict:
    workers = {p.name.split(".")[0]: parse_trace_bytes(read_trace_bytes(str(p), 1 << 33).data)
               for p in sorted(Path(folder).glob("*.pt.trace.json*"))}
    return distributed(workers)


@lru_cache(maxsize=None)
def raw(path: Path) -> dict:
    with gzip.open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def out(fixtures_dir) -> dict:
    files(fixtures_dir)
    return analysed(str(fixtures_dir / RUN))


def rank_files(fixtures_dir) -> dict[int, Path]:
    return {raw(p)["distributedInfo"]["rank"]: p for p in files(fixtures_dir)}


def merged(ranges: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def intersect(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append([s, e])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def length(ranges: list[list[float]]) -> float:
    return sum(e - s for s, e in ranges)


def kernels(events: list[dict], nccl: bool) -> list[list[float]]:
    return merged([(e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("ph") == "X" and e.get("cat") == "kernel" and ("nccl" in e["name"].lower()) == nccl])


def by_rank(rows: list[dict]) -> dict[int, dict]:
    return {r["rank"]: r for r in rows}


def test_ranks_and_topology(out):
    assert [(r["rank"], r["world_size"], r["backend"], r["assumed"]) for r in out["ranks"]] == [
        (r, 4, "nccl", []) for r in range(4)]
    assert out["groups"] == [{"name": "0", "description": "default_pg", "size": 4, "ranks": [0, 1, 2, 3]}]
    assert {o["group"] for o in out["stragglers"]["occurrences"]} == {"0"}
    (node,) = out["topology"]
    assert [(p["rank"], [g["device"] for g in p["gpus"]], p["gpus"][0]["name"], p["gpus"][0]["compute_capability"])
            for p in node["processes"]] == [(r, [r], "NVIDIA H200", "9.0") for r in range(4)]


def test_steps_cover_the_profiler_steps(out, fixtures_dir):
    for rank, path in rank_files(fixtures_dir).items():
        host = sorted((e["ts"], e["ts"] + e["dur"]) for e in raw(path)["traceEvents"]
                      if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") in HOST_CATS)
        steps = by_rank(out["overlap"])[rank]["steps"]
        assert len(steps) == len(host) == 2
        for (lo, hi), step in zip(host, steps):
            assert lo <= step["start_us"] < step["end_us"] and step["end_us"] >= hi - 1e-3


def test_communication_and_overlap_match_raw_kernels(out, fixtures_dir):
    for rank, path in rank_files(fixtures_dir).items():
        events = raw(path)["traceEvents"]
        comm, compute = kernels(events, True), kernels(events, False)
        assert any("ncclDevKernel_" in e.get("name", "") for e in events)
        for step in by_rank(out["overlap"])[rank]["steps"]:
            window = [[step["start_us"], step["end_us"]]]
            c, k = intersect(comm, window), intersect(compute, window)
            assert step["communication_us"] + step["overlapping_us"] == pytest.approx(length(c), abs=0.01)
            assert step["overlapping_us"] == pytest.approx(length(intersect(c, k)), abs=0.01)
            assert step["computation_us"] + step["overlapping_us"] == pytest.approx(length(k), abs=0.01)
            assert step["other_us"] == pytest.approx(step["total_us"] - length(merged(c + k)), abs=0.01)
            assert length(c) > 0


def test_comm_ops_match_raw_host_events(out, fixtures_dir):
    for rank, path in rank_files(fixtures_dir).items():
        events = raw(path)["traceEvents"]
        calls, sizes = Counter(), Counter()
        for e in events:
            if e.get("cat") in HOST_CATS and e["name"].startswith("nccl:"):
                calls[e["name"]] += 1
                args = e["args"]
                sizes[e["name"]] += sum(int(np.prod(d)) * ELEMENT[t] for d, t in zip(args["Input Dims"], args["Input type"]))
        rpc = [e for e in events if e.get("name") == "record_param_comms" and e["args"]["Collective name"] in OP_OF]
        rpc_calls = Counter(OP_OF[e["args"]["Collective name"]] for e in rpc)
        rpc_bytes = Counter()
        for e in rpc:
            rpc_bytes[OP_OF[e["args"]["Collective name"]]] += e["args"]["In msg nelems"] * DTYPE[e["args"]["dtype"]]
        ext = {e["args"]["External id"]: OP_OF[e["args"]["Collective name"]] for e in rpc}
        latency = defaultdict(float)
        for e in events:
            if e.get("cat") == "kernel" and e["args"].get("External id") in ext:
                latency[ext[e["args"]["External id"]]] += e["dur"]
        rows = {r["name"]: r for r in by_rank(out["comm_ops"])[rank]["rows"]}
        assert set(rows) == set(calls) == set(rpc_calls) == {"nccl:all_reduce", "nccl:broadcast"}
        for name, row in rows.items():
            assert row["calls"] == calls[name] == rpc_calls[name]
            assert row["total_bytes"] == sizes[name] == rpc_bytes[name]
            assert row["total_latency_us"] == pytest.approx(latency[name], abs=0.01)
            assert 0 < row["total_transfer_us"] <= row["total_latency_us"] + 1e-6


def test_wait_and_transfer_add_up(out):
    transfer = {tuple(s["transfer_us"] for s in w["steps"]) for w in out["wait"]}
    assert len(transfer) == 1                   # the shortest rank's time, the same for every rank
    comm = {w["rank"]: w for w in out["wait"]}
    for rank, ov in by_rank(out["overlap"]).items():
        for w, o in zip(comm[rank]["steps"], ov["steps"]):
            assert w["communication_us"] == pytest.approx(o["communication_us"] + o["overlapping_us"], abs=0.01)
            assert w["transfer_us"] + w["wait_us"] + w["unattributed_us"] == pytest.approx(
                w["communication_us"], abs=0.01)


def test_stragglers_are_sane_and_agree_with_the_shared_clock(out, fixtures_dir):
    s = out["stragglers"]
    # 2 steps x 5 all-reduces (the 2 broadcasts per step are rooted: not counted)
    assert s["collectives"] == 10 and s["basis"] == {"gpu": 10}
    assert s["unaligned"]["count_mismatches"] == [] and all(u["unaligned"] == 0 for u in s["unaligned"]["calls"])
    for r in s["ranks"]:
        assert 0 <= r["median_delay_us"] <= r["max_delay_us"] < r["mean_step_us"]
    (named,) = s["stragglers"]
    assert named["last_ratio"] >= 0.5
    # Independently: per all-reduce, which rank's kernel starts last on the shared clock.
    starts = {}
    for rank, path in rank_files(fixtures_dir).items():
        ks = [e for e in raw(path)["traceEvents"] if e.get("cat") == "kernel" and "AllReduce" in e["name"]
              and "External id" in e["args"]]
        starts[rank] = [e["ts"] for e in sorted(ks, key=lambda e: e["ts"])]
    last = Counter(int(np.argmax(col)) for col in zip(*(starts[r] for r in range(4))))
    assert last.most_common(1)[0] == (named["rank"], named["times_last"])
