"""The collective report and delay map (server/analysis/collectives.py), checked against what the raw
trace events say: on the real 2-rank NCCL runs (tests/data/h200x2) each matched call's NCCL kernel
time and record_param_comms' message sizes give transfer, algbw and busbw independently; on a
synthetic 4-rank run with one slow rank every number is known exactly."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from profboard.server.analysis.collectives import MAX_COLUMNS, MAX_ROWS, collective_report, collective_type, delay_map
from profboard.server.analysis.distributed import distributed
from profboard.server.trace.load import parse_trace_bytes
from profboard.server.trace.read import read_trace_bytes
from synth import BUCKETS_AT, SLEEP_US, TRANSFER_US, parse, slow_rank_run

DATA = Path(__file__).resolve().parents[1] / "data" / "h200x2"
RUNS = ["ddp_balanced", "ddp_straggler_rank0", "ddp_straggler_rank1", "fsdp"]
# record_param_comms' "Collective name" -> our type; its dtype -> bytes per element.
RAW_TYPE = {"allreduce": "all_reduce", "_allgather_base": "all_gather", "_reduce_scatter_base": "reduce_scatter"}
DTYPE_BYTES = {"Float": 4, "BFloat16": 2, "Half": 2, "Double": 8}


@pytest.mark.parametrize("name, kind", [
    ("nccl:all_reduce", "all_reduce"), ("nccl:_all_gather_base", "all_gather"), ("gloo:all_reduce", "all_reduce"),
    ("nccl:reduce_scatter_tensor_coalesced", "reduce_scatter"), ("nccl:_reduce_scatter_base", "reduce_scatter"),
    ("nccl:all_to_all", "all_to_all"), ("nccl:alltoall_base", "all_to_all"), ("nccl:broadcast", "broadcast"),
    ("nccl:reduce", "reduce"), ("nccl:send", "send_recv"), ("nccl:send_recv", "send_recv"),
    ("gloo:barrier", "barrier"), ("nccl:gather", "other")])
def test_names_reduce_to_types(name, kind):
    assert collective_type(name) == kind


def raw_collectives(path: Path) -> list[tuple[str, int, float]]:
    """Per record_param_comms with NCCL kernels, in issue order: (type, nccl-tests' size: the
    larger of its in and out messages, kernel time)."""
    events = json.load(gzip.open(path))["traceEvents"]
    kernel_us: dict[int, float] = defaultdict(float)
    for e in events:
        if e.get("cat") == "kernel" and e["name"].startswith("nccl") and "External id" in e["args"]:
            kernel_us[e["args"]["External id"]] += e["dur"]    # (a kernel without one began before the trace)
    calls = sorted((e for e in events if e.get("name") == "record_param_comms" and e.get("ph") == "X"),
                   key=lambda e: e["ts"])
    out = []
    for e in calls:
        args = e["args"]
        if args["External id"] in kernel_us:
            size = max(args["In msg nelems"], args["Out msg nelems"]) * DTYPE_BYTES[args["dtype"]]
            out.append((RAW_TYPE[args["Collective name"]], size, kernel_us[args["External id"]]))
    return out


@pytest.mark.parametrize("run", RUNS)
def test_report_equals_the_raw_kernels_and_message_sizes(run):
    paths = sorted((DATA / run).glob("*.pt.trace.json*"))
    view = distributed({p.name.split(".")[0]: parse_trace_bytes(read_trace_bytes(str(p), 1 << 33).data)
                        for p in paths})
    per_rank = [raw_collectives(p) for p in paths]
    assert len({len(calls) for calls in per_rank}) == 1    # both ranks made the same calls: i-th matches i-th
    expected: dict[tuple[str, int], list[float]] = defaultdict(list)
    for same in zip(*per_rank):
        assert len({(kind, size) for kind, size, _ in same}) == 1
        expected[same[0][:2]].append(min(t for _, _, t in same))
    report = {(r["type"], r["size_bytes"]): r for r in view["collectives"]}
    assert set(report) == set(expected)
    for (kind, size), transfers in expected.items():
        row = report[kind, size]
        algbw = size * len(transfers) / sum(transfers) * 1e-3
        assert row["group_size"] == 2 and row["count"] == len(transfers)
        assert row["transfer_us"] == pytest.approx(sum(transfers), abs=0.01)
        assert row["median_transfer_us"] == pytest.approx(float(np.median(transfers)), abs=0.01)
        assert row["algbw_gbps"] == pytest.approx(algbw, rel=1e-4)
        # n = 2: all-reduce moves 2(n-1)/n = 1 of the size per rank, the others (n-1)/n = 1/2.
        assert row["busbw_gbps"] == pytest.approx(algbw * (1.0 if kind == "all_reduce" else 0.5), rel=1e-4)


def test_slow_rank_run_report_and_delay_map_are_exact():
    view = distributed({name: parse(t.build()) for name, t in slow_rank_run(world=4, slow=1, steps=3).items()})
    rows = {r["size_bytes"]: r for r in view["collectives"]}
    assert set(rows) == {25_000 * (k + 1) * 4 for k in range(len(BUCKETS_AT))}
    for size, row in rows.items():
        assert (row["type"], row["group_size"], row["count"]) == ("all_reduce", 4, 3)
        assert row["transfer_us"] == pytest.approx(3 * TRANSFER_US)
        assert row["median_wait_us"] == pytest.approx(SLEEP_US)
        assert row["algbw_gbps"] == pytest.approx(size / TRANSFER_US * 1e-3)
        assert row["busbw_gbps"] == pytest.approx(size / TRANSFER_US * 1e-3 * 2 * 3 / 4)
    delays = view["delay_map"]
    assert delays["rows"] == [[r, r] for r in range(4)]
    assert len(delays["columns"]) == 3 * len(BUCKETS_AT)
    assert [c["match"] for c in delays["columns"]] == sorted(c["match"] for c in delays["columns"])
    assert delays["delay_us"][1] == [pytest.approx(SLEEP_US)] * len(delays["columns"])
    assert all(v == 0.0 for r in (0, 2, 3) for v in delays["delay_us"][r])


def aligned_frame(ranks: int, collectives: int, late: int) -> pd.DataFrame:
    """An aligned calls frame: every rank 10 us in each all-reduce, rank `late` arriving (collective
    number + 1) us after the others, so the widest spreads are the last collectives."""
    rank = np.repeat(np.arange(ranks), collectives)
    match = np.tile(np.arange(collectives), ranks)
    busy = 10.0 + np.where(rank == late, 0.0, match + 1.0)
    return pd.DataFrame({"group": "0", "match": match, "name": "nccl:all_reduce", "rank": rank, "busy_us": busy,
                         "bytes": 4096.0, "ranks_present": ranks})


def test_delay_map_folds_ranks_keeping_the_late_one_and_the_widest_collectives():
    ranks, collectives, late = 1000, 200, 613
    delays = delay_map(aligned_frame(ranks, collectives, late), list(range(ranks)))
    fold = -(-ranks // MAX_ROWS)
    assert len(delays["rows"]) == -(-ranks // fold) <= MAX_ROWS
    assert delays["rows"][0] == [0, fold - 1] and delays["rows"][-1][1] == ranks - 1
    assert [c["match"] for c in delays["columns"]] == list(range(collectives - MAX_COLUMNS, collectives))
    row = next(i for i, (first, last) in enumerate(delays["rows"]) if first <= late <= last)
    assert delays["delay_us"][row] == [float(m + 1) for m in range(collectives - MAX_COLUMNS, collectives)]
    assert all(v == 0.0 for i, values in enumerate(delays["delay_us"]) if i != row for v in values)


def test_report_and_map_stay_small_at_1024_ranks():
    calls = aligned_frame(1024, 300, 5)
    calls["busy_us"] += np.random.default_rng(0).uniform(0.0, 99_999.0, len(calls))   # long numbers everywhere
    body = json.dumps({"collectives": collective_report(calls, {"0": 1024}),
                       "delay_map": delay_map(calls, list(range(1024)))})
    assert len(body) < 300_000, len(body)
