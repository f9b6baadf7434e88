"""On every multi-rank trace set we hold (tests/data/h200x2, and the shared h200x4 ResNet-50
when present), each rank's per-step communication splits into transfer + wait + unattributed
exactly, transfer + wait never exceeding it, and every collective is matched. On the two-rank
runs (one host, one clock) the later rank's median delay is what the raw NCCL kernels say."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from profboard.server.analysis.distributed import distributed
from profboard.server.trace.load import parse_trace_bytes
from profboard.server.trace.read import read_trace_bytes

DATA = Path(__file__).resolve().parents[1] / "data" / "h200x2"
RUNS = [DATA / name for name in ("ddp_balanced", "ddp_straggler_rank0", "ddp_straggler_rank1", "fsdp")]


@lru_cache(maxsize=None)
def view(folder: Path) -> dict:
    paths = sorted(folder.glob("*.pt.trace.json*"))
    return distributed({p.name.split(".")[0]: parse_trace_bytes(read_trace_bytes(str(p), 1 << 33).data) for p in paths})


@pytest.fixture(params=[*RUNS, "h200x4/ddp_resnet50"], ids=lambda p: "/".join(str(p).split("/")[-2:]))
def run(request, fixtures_dir) -> dict:
    folder = request.param if isinstance(request.param, Path) else fixtures_dir / request.param
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    return view(folder)


def test_per_step_parts_add_up(run):
    for rank in run["wait"]:
        assert rank["steps"]
        for step in rank["steps"]:
            parts = step["transfer_us"] + step["wait_us"]
            assert min(step["transfer_us"], step["wait_us"], step["unattributed_us"]) >= 0.0
            assert parts <= step["communication_us"] + 0.01
            assert parts + step["unattributed_us"] == pytest.approx(step["communication_us"], abs=0.01)


def test_every_call_is_matched(run):
    assert all(u["unaligned"] == 0 for u in run["stragglers"]["unaligned"]["calls"])
    assert not any("could not be matched" in w for w in run["warnings"])


@pytest.mark.parametrize("folder", RUNS, ids=lambda p: p.name)
def test_delay_is_the_raw_kernels_start_gap(folder):
    # Both ranks ran on one host: the n-th NCCL kernel of each rank is the same collective, and
    # they end together, so the later rank's delay is the gap between their starts.
    starts = {}
    for path in sorted(folder.glob("*.pt.trace.json.gz")):
        with gzip.open(path) as f:
            trace = json.load(f)
        starts[trace["distributedInfo"]["rank"]] = sorted(
            e["ts"] for e in trace["traceEvents"]
            if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel") and "External id" in e["args"])
    assert len(starts[0]) == len(starts[1])
    gap = np.median(np.array(starts[1]) - np.array(starts[0]))
    s = view(folder)["stragglers"]
    assert s["collectives"] == len(starts[0])
    later = {r["rank"]: r["median_delay_us"] for r in s["ranks"]}[int(gap > 0)]
    assert later == pytest.approx(abs(gap), rel=0.05)
