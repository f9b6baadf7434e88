"""Clock offsets between ranks (server/analysis/clocks.py): a known shift added to every timestamp
of a synthetic rank is recovered, whether the rank is also late or not; ranks sharing no collective
with the reference are placed through the others; the ranks of one host (tests/data/h200x2, the
shared h200x4 ResNet-50) come out within a few us of 0; and the default ranks of the Trace view."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from profboard.server.analysis.clocks import clock_offsets, timeline_ranks
from profboard.server.analysis.distributed import distributed
from profboard.server.trace.load import parse_trace_bytes
from profboard.server.trace.read import read_trace_bytes
from synth import BUCKETS_AT, parse, shift_clock, slow_rank_run

# Rank 1 is the slow one (its steps and calls start 30 ms later) and also runs on a clock 1.2 ms behind.
SHIFTS = {0: 0.0, 1: -1234.5, 2: 250_000.0, 3: 7.25}
STEPS = 3
# The ranks of one host share a clock: what the ends of their collectives differ by (a ring's last
# hop; the last rank in leaves a few us after the others) stays below this.
SAME_HOST_US = 12.0
DATA = Path(__file__).resolve().parents[1] / "data" / "h200x2"
RUNS = [DATA / name for name in ("ddp_balanced", "ddp_straggler_rank0", "ddp_straggler_rank1", "fsdp")]


def shifted_view(shifts: dict[int, float]) -> dict:
    traces = slow_rank_run(world=4, slow=1, steps=STEPS)
    return distributed({name: parse(shift_clock(t, shifts[int(name[-1])]).build()) for name, t in traces.items()})


def test_known_shifts_are_recovered():
    clock = shifted_view(SHIFTS)["clock"]
    assert clock["reference"] == 0
    for row in clock["ranks"]:
        assert row["offset_us"] == pytest.approx(SHIFTS[row["rank"]], abs=1.0), row
        assert row["used"] == STEPS * len(BUCKETS_AT)
        assert row["spread_us"] == pytest.approx(0.0, abs=1.0)


def test_shifted_clocks_keep_the_straggler_and_name_the_fastest():
    clock = shifted_view(SHIFTS)["clock"]
    # Every other rank waits for rank 1 equally: the fastest is the lowest of them.
    assert (clock["straggler"], clock["fastest"]) == (1, 0)


def test_noisy_readings_take_the_median_and_report_the_spread():
    rng = np.random.default_rng(7)
    true = np.array([0.0, 40.0, -900.0])
    ends = 1e6 + np.arange(200)[:, None] * 1000.0 + true + rng.uniform(-3, 3, (200, 3))
    ends[::20, 2] += 5000.0    # a few wild readings (a call that ended late on one rank)
    rows = clock_offsets(ends, [0, 1, 2])
    for row, offset in zip(rows, true):
        assert row["offset_us"] == pytest.approx(offset, abs=3.0)
        assert row["used"] == 200
        assert 0.5 < row["spread_us"] < 3.0 or row["rank"] == 0


def test_a_rank_sharing_no_collective_with_the_reference_is_placed_through_another():
    # Rank 2 only meets rank 1 (another process group); rank 3 meets nobody.
    ends = np.full((20, 4), np.nan)
    ends[:10, 0] = np.arange(10) * 100.0
    ends[:10, 1] = ends[:10, 0] + 30.0
    ends[10:, 1] = np.arange(10) * 100.0 + 5000.0
    ends[10:, 2] = ends[10:, 1] - 30.0 - 70.0
    rows = clock_offsets(ends, [0, 1, 2, 3])
    assert [r["offset_us"] for r in rows] == pytest.approx([0.0, 30.0, -70.0, None])
    assert [r["used"] for r in rows] == [10, 10, 10, 0]


@pytest.mark.parametrize("folder", [*RUNS, "h200x4/ddp_resnet50"], ids=lambda p: "/".join(str(p).split("/")[-2:]))
def test_ranks_of_one_host_share_a_clock(folder, fixtures_dir):
    folder = folder if isinstance(folder, Path) else fixtures_dir / folder
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    paths = sorted(folder.glob("*.pt.trace.json*"))
    view = distributed({p.name.split(".")[0]: parse_trace_bytes(read_trace_bytes(str(p), 1 << 33).data)
                        for p in paths})
    rows = view["clock"]["ranks"]
    assert len(rows) == len(paths)
    for row in rows:
        assert abs(row["offset_us"]) < SAME_HOST_US, row
        assert row["used"] == view["stragglers"]["collectives"]


def test_timeline_ranks_prefer_the_named_straggler():
    ranks = [{"rank": r, "median_delay_us": d} for r, d in ((0, 5.0), (1, 900.0), (2, 0.0), (3, 950.0))]
    assert timeline_ranks({"ranks": ranks, "stragglers": [{"rank": 1}]}) == {"straggler": 1, "fastest": 2}
    assert timeline_ranks({"ranks": ranks, "stragglers": []}) == {"straggler": 3, "fastest": 2}
    assert timeline_ranks({"ranks": ranks[:1], "stragglers": []}) == {"straggler": None, "fastest": None}
