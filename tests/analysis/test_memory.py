"""Memory view from traces (server/analysis/memory.py, memory_curve.py): devices, curve, events and per-op stats.

Every expected number is worked out by hand from the few records each case builds.
"""

from __future__ import annotations

import numpy as np
import pytest

from profboard.server.analysis.memory import (NO_ADDRESSES, attribution, default_device, devices, memory_events,
                                              memory_stats)
from profboard.server.analysis.memory_curve import NO_TOTALS, curve
from profboard.server.analysis.optree import build_op_tree
from synth import Trace, parse

CPU = 0


def load(t: Trace):
    tables = parse(t.build())
    return tables, build_op_tree(tables.events)


def row_of(tables, name: str, ts: float) -> int:
    events = tables.events
    [row] = np.flatnonzero((events["name"].astype(str) == name).to_numpy() & (events["ts"].to_numpy() == ts))
    return int(row)


def stats_of(t: Trace, device: str = "GPU0", start_us=None, end_us=None) -> dict[str, dict]:
    tables, tree = load(t)
    return {r["name"]: r for r in memory_stats(tables, tree, device, start_us, end_us)["rows"]}


# -- devices ------------------------------------------------------------------------------------


def test_devices_are_listed_cpu_first_then_gpus_by_id():
    t = Trace()
    t.memory_record(10, 100, addr=1, total_allocated=100, total_reserved=1000, device_id=1)
    t.memory_record(11, 100, addr=2, total_allocated=100, total_reserved=1000, device_id=1)
    t.memory_record(12, 64, addr=3, total_allocated=64, total_reserved=512, device_id=0)
    t.memory_record(5, 8, addr=4, total_allocated=8, total_reserved=0, device_type=CPU, device_id=-1)
    found = devices(parse(t.build()))
    assert [(d["device"], d["label"], d["records"]) for d in found] == [("CPU", "CPU", 1), ("GPU0", "GPU 0", 1),
                                                                         ("GPU1", "GPU 1", 2)]
    assert all(d["has_totals"] and d["has_addresses"] for d in found)
    assert default_device(found) == "GPU0"


def test_devices_of_a_legacy_trace_have_no_totals_or_addresses():
    t = Trace(legacy=True)
    t.memory_record(10, 100, device_type=CPU, device_id=-1)
    [cpu] = devices(parse(t.build()))
    assert cpu["device"] == "CPU" and not cpu["has_totals"] and not cpu["has_addresses"]
    assert default_device([cpu]) == "CPU" and default_device([]) is None


# -- curve --------------------------------------------------------------------------------------


def curve_trace() -> Trace:
    """GPU0 totals after each record: 100, 150, 50, 250, 200 allocated; reserved 1000 then 2000."""
    t = Trace()
    t.memory_record(10, 100, addr=1, total_allocated=100, total_reserved=1000)
    t.memory_record(20, 50, addr=2, total_allocated=150, total_reserved=1000)
    t.memory_record(25, 4096, addr=9, total_allocated=4096, total_reserved=4096, device_type=CPU, device_id=-1)
    t.memory_record(30, -100, addr=1, total_allocated=50, total_reserved=1000)
    t.memory_record(40, 200, addr=3, total_allocated=250, total_reserved=2000)
    t.memory_record(50, -50, addr=2, total_allocated=200, total_reserved=2000)
    return t


def test_curve_is_the_totals_after_each_record_of_the_device():
    c = curve(parse(curve_trace().build()), "GPU0")
    assert c["reason"] is None and c["records"] == c["points"] == 5
    assert c["t_us"] == [10, 20, 30, 40, 50]
    assert c["allocated_bytes"] == [100, 150, 50, 250, 200]
    assert c["reserved_bytes"] == [1000, 1000, 1000, 2000, 2000]
    assert c["peak_allocated"] == {"bytes": 250, "t_us": 40}
    assert c["peak_reserved"] == {"bytes": 2000, "t_us": 40}  # the first record reaching it
    assert c["at_start"] is None


def test_curve_range_includes_its_ends_and_carries_the_value_in_effect_at_its_start():
    tables = parse(curve_trace().build())
    c = curve(tables, "GPU0", 25, 45)
    assert c["t_us"] == [30, 40] and c["allocated_bytes"] == [50, 250]
    # The record at 20 left 150 allocated / 1000 reserved; the CPU record at 25 is another device.
    assert c["at_start"] == {"t_us": 25, "allocated_bytes": 150, "reserved_bytes": 1000}
    assert curve(tables, "GPU0", 20, 40)["t_us"] == [20, 30, 40]
    low = curve(tables, "GPU0", 45, 60)
    assert low["peak_allocated"] == {"bytes": 200, "t_us": 50}  # the peak within the range, not before it


def test_thinned_curve_keeps_the_exact_peak_and_the_ends():
    t = Trace()
    spike = 537
    for i in range(1000):
        allocated = 10**9 if i == spike else (i % 7) * 10 + 100
        t.memory_record(i, 8, addr=i, total_allocated=allocated, total_reserved=2 * 10**9 if i > 800 else 10**9)
    c = curve(parse(t.build()), "GPU0", width_px=10)
    # Per pixel at most: first, last, lowest and highest allocated, lowest and highest reserved.
    assert c["records"] == 1000 and c["points"] <= 6 * 10
    assert c["peak_allocated"] == {"bytes": 10**9, "t_us": spike}
    assert max(c["allocated_bytes"]) == 10**9 and spike in c["t_us"]
    assert min(c["allocated_bytes"]) == 100  # the lows survive too
    assert c["t_us"][0] == 0 and c["t_us"][-1] == 999 and c["t_us"] == sorted(c["t_us"])
    assert c["peak_reserved"] == {"bytes": 2 * 10**9, "t_us": 801} and 801 in c["t_us"]


def test_legacy_trace_has_no_curve_and_says_why():
    t = Trace(legacy=True)
    t.memory_record(10, 100, device_id=0)
    c = curve(parse(t.build()), "GPU0")
    assert c["reason"] == NO_TOTALS and c["t_us"] == [] and c["peak_allocated"] is None


def test_curve_of_a_device_without_records():
    c = curve(parse(curve_trace().build()), "GPU3")
    assert c["t_us"] == [] and "no memory records" in c["reason"]


# -- events -------------------------------------------------------------------------------------


def events_trace() -> Trace:
    t = Trace()
    t.step(1, 0, 200)
    t.op("aten::conv2d", 10, 50)        # 10..60
    t.op("aten::empty", 12, 3)          # 12..15, inside conv2d
    t.op("aten::add", 70, 20)           # 70..90
    t.annotation("my_block", 100, 50)   # 100..150, a record_function range
    t.op("aten::mul", 110, 20)          # 110..130, inside the annotation
    t.op("aten::empty", 300, 5)         # 300..305, at the top of the thread
    t.memory_record(13, 100, addr=0xA)       # aten::empty called by conv2d
    t.memory_record(50, 8, addr=0xA, device_type=CPU, device_id=-1)  # conv2d, same address on another device
    t.memory_record(75, 40, addr=0xB)        # aten::add, never freed
    t.memory_record(80, -100, addr=0xA)      # frees the allocation at 13
    t.memory_record(120, 8, addr=0xC)        # aten::mul, through the annotation
    t.memory_record(140, 16, addr=0xD)       # inside the annotation and the step only: no operator
    t.memory_record(160, -999, addr=0xE)     # a free whose allocation the trace did not see
    t.memory_record(170, 100, addr=0xA)      # the address reused: a new allocation
    t.memory_record(302, 4, addr=0xF)        # the top-level aten::empty
    return t


def brief(row: dict) -> tuple:
    return row["operator"], row["size_bytes"], row["alloc_us"], row["free_us"], row["lifetime_us"]


def test_events_pair_allocations_with_frees_per_device_and_address():
    tables, tree = load(events_trace())
    answer = memory_events(tables, tree, "GPU0")
    assert answer["reason"] is None
    assert [brief(r) for r in answer["rows"]] == [
        ("aten::conv2d (aten::empty)", 100, 13, 80, 67),  # 80 - 13
        ("aten::add", 40, 75, None, None),
        ("aten::mul", 8, 120, None, None),
        (None, 16, 140, None, None),
        (None, 999, None, 160, None),
        (None, 100, 170, None, None),
        ("aten::empty", 4, 302, None, None),  # no caller to name it after
    ]
    first = answer["rows"][0]
    assert first["op_id"] == row_of(tables, "aten::empty", 12)
    assert first["caller_id"] == row_of(tables, "aten::conv2d", 10)
    assert first["addr"] == 0xA
    mul = answer["rows"][2]
    assert mul["op_id"] == row_of(tables, "aten::mul", 110) and mul["caller_id"] is None
    # The CPU allocation at the same address is its own, never freed.
    [cpu] = memory_events(tables, tree, "CPU")["rows"]
    assert brief(cpu) == ("aten::conv2d", 8, 50, None, None)


def range_trace() -> Trace:
    t = Trace()
    for addr, (alloc, free) in enumerate([(10, 50), (20, 100), (60, 70), (5, 200)], start=1):
        t.memory_record(alloc, 64 * addr, addr=addr)
        t.memory_record(free, -64 * addr, addr=addr)
    return t


@pytest.mark.parametrize("start, end, expected", [
    # (10, 50) frees inside; (20, 100) and (5, 200) have neither end inside; (60, 70) both
    (40, 80, [(64, 10, 50), (192, 60, 70)]),
    # both ends of a range are inside it
    (50, 60, [(64, 10, 50), (192, 60, 70)]),
    (0, 9, [(256, 5, 200)]),
], ids=["free-or-alloc-inside", "ends-included", "alloc-only-inside"])
def test_events_in_range_have_an_end_inside_and_keep_their_other_time(start, end, expected):
    tables, tree = load(range_trace())
    rows = memory_events(tables, tree, "GPU0", start, end)["rows"]
    assert [(r["size_bytes"], r["alloc_us"], r["free_us"]) for r in rows] == expected


def test_legacy_trace_has_no_events_and_says_why():
    t = Trace(legacy=True)
    t.op("aten::add", 0, 10, tid=7)
    t.memory_record(5, 100, tid=7)
    tables, tree = load(t)
    answer = memory_events(tables, tree, "GPU0")
    assert answer["rows"] == [] and answer["reason"] == NO_ADDRESSES


# -- statistics ---------------------------------------------------------------------------------


def stats_trace() -> Trace:
    t = Trace()
    t.step(1, 0, 100)
    t.op("aten::linear", 10, 50)   # 10..60
    t.op("aten::addmm", 20, 20)    # 20..40
    t.op("aten::empty", 22, 3)     # 22..25
    t.op("aten::linear", 70, 20)   # 70..90, a second call without memory records
    t.memory_record(23, 100, addr=1)   # aten::empty
    t.memory_record(30, 50, addr=2)    # aten::addmm
    t.memory_record(35, -20, addr=3)   # aten::addmm frees
    t.memory_record(45, -100, addr=1)  # aten::linear frees
    t.memory_record(65, 7, addr=4)     # directly in the step: no operator
    t.memory_record(24, 8, addr=5, device_type=CPU, device_id=-1)  # aten::empty, on the CPU
    return t


def stat(calls, inc, self_inc, count, self_count, size, self_size) -> dict:
    return {"calls": calls, "size_increase_bytes": inc, "self_size_increase_bytes": self_inc,
            "allocation_count": count, "self_allocation_count": self_count,
            "allocation_size_bytes": size, "self_allocation_size_bytes": self_size}


def test_stats_self_and_total_per_operator():
    tables, tree = load(stats_trace())
    answer = memory_stats(tables, tree, "GPU0")
    rows = {r["name"]: {k: v for k, v in r.items() if k != "name"} for r in answer["rows"]}
    assert rows == {
        "aten::empty": stat(1, 100, 100, 1, 1, 100, 100),
        "aten::addmm": stat(1, 130, 30, 2, 1, 150, 50),    # self 50 - 20; total adds empty's 100
        "aten::linear": stat(2, 30, -100, 2, 0, 150, 0),  # self -100; total -100 + 130
    }
    assert [r["name"] for r in answer["rows"]] == ["aten::empty", "aten::addmm", "aten::linear"]  # by self increase
    assert answer["warnings"] == ["1 of 5 memory records lie outside every operator (e.g. directly inside a "
                                  "step or the DataLoader) and count in no row"]


def test_stats_are_per_device():
    rows = stats_of(stats_trace(), "CPU")
    assert rows["aten::empty"] == {"name": "aten::empty", **stat(1, 8, 8, 1, 1, 8, 8)}
    assert rows["aten::linear"]["size_increase_bytes"] == 8 and rows["aten::linear"]["calls"] == 2
    assert rows["aten::addmm"]["self_allocation_count"] == 0


def test_stats_range_counts_records_inside_and_calls_overlapping_it():
    # Records at 30, 35, 45 are in [26, 50]; aten::empty (22..25) and the second linear (70..90) are outside.
    rows = stats_of(stats_trace(), "GPU0", 26, 50)
    assert set(rows) == {"aten::addmm", "aten::linear"}
    assert rows["aten::addmm"] == {"name": "aten::addmm", **stat(1, 30, 30, 1, 1, 50, 50)}
    assert rows["aten::linear"] == {"name": "aten::linear", **stat(1, -70, -100, 1, 0, 50, 0)}
    # An operator ending exactly at the range start still overlaps it (ends included).
    assert stats_of(stats_trace(), "GPU0", 25, 50)["aten::linear"]["calls"] == 1
    assert stats_of(stats_trace(), "GPU0", 25, 50)["aten::addmm"]["calls"] == 1


def test_a_call_wrapping_one_call_of_itself_counts_once():
    t = Trace()
    t.op("aten::add", 0, 50)
    t.op("aten::add", 5, 35)          # only child, same name: folded into the outer call
    t.memory_record(10, 64, addr=1)   # inside both
    t.memory_record(45, 4, addr=2)    # in the outer only
    assert stats_of(t) == {"aten::add": {"name": "aten::add", **stat(1, 68, 68, 2, 2, 68, 68)}}


def test_records_belong_to_operators_of_their_own_thread():
    t = Trace()
    t.op("aten::a", 0, 100, tid=1)
    t.op("aten::b", 0, 100, tid=2)
    t.memory_record(50, 32, addr=1, tid=2)
    assert set(stats_of(t)) == {"aten::b"}


@pytest.mark.parametrize("ts, owner", [(10, "aten::inner"), (19.999, "aten::inner"), (20, "aten::outer")],
                         ids=["at-start", "inside", "at-end"])
def test_an_operator_holds_records_from_its_start_up_to_but_not_at_its_end(ts, owner):
    t = Trace()
    t.op("aten::outer", 0, 100)
    t.op("aten::inner", 10, 10)
    t.memory_record(ts, 16, addr=1)
    assert stats_of(t)[owner]["self_allocation_count"] == 1


def test_record_function_ranges_are_looked_through_to_the_operator_around_them():
    t = Trace()
    t.op("aten::outer", 0, 100)
    t.annotation("block", 10, 50)
    t.memory_record(20, 16, addr=1)
    assert stats_of(t)["aten::outer"]["self_allocation_size_bytes"] == 16


def test_calls_count_every_call_in_range_even_inside_memory_free_operators():
    # The reference plugin visited operators only below ranges that saw a memory record, so it
    # reported 1 call here: the aten::empty inside aten::foo (which saw none) was never visited.
    t = Trace()
    t.op("aten::foo", 0, 10)
    t.op("aten::empty", 2, 1)          # a zero-size tensor: no record
    t.op("aten::empty", 20, 5)
    t.memory_record(21, 16, addr=1)
    assert stats_of(t)["aten::empty"]["calls"] == 2


def test_legacy_trace_stats_work_without_addresses_or_totals():
    t = Trace(legacy=True)
    t.step(1, 0, 100, tid=7)
    t.op("aten::add", 10, 20, tid=7)
    t.dataloader(40, 20, tid=7)
    t.memory_record(15, 100, tid=7)
    t.memory_record(25, -40, tid=7)
    t.memory_record(45, 12, tid=7)  # directly in the DataLoader: no operator
    tables, tree = load(t)
    answer = memory_stats(tables, tree, "GPU0")
    assert [r["name"] for r in answer["rows"]] == ["aten::add"]
    assert answer["rows"][0] == {"name": "aten::add", **stat(1, 60, 60, 1, 1, 100, 100)}
    assert "1 of 3" in answer["warnings"][0]


def test_attribution_can_be_computed_once_and_passed_in():
    tables, tree = load(stats_trace())
    placed = attribution(tables, tree)
    assert memory_stats(tables, tree, "GPU0", placed=placed) == memory_stats(tables, tree, "GPU0")
    assert memory_events(tables, tree, "GPU0", placed=placed) == memory_events(tables, tree, "GPU0")


def test_a_trace_without_operators_still_answers():
    t = Trace()
    t.memory_record(10, 64, addr=1, total_allocated=64, total_reserved=64)
    t.memory_record(20, -64, addr=1, total_allocated=0, total_reserved=64)
    tables, tree = load(t)
    assert [brief(r) for r in memory_events(tables, tree, "GPU0")["rows"]] == [(None, 64, 10, 20, 10)]
    stats = memory_stats(tables, tree, "GPU0")
    assert stats["rows"] == [] and "2 of 2" in stats["warnings"][0]


def test_zero_byte_records_do_not_split_a_pair():
    t = Trace()
    t.memory_record(10, 64, addr=1)
    t.memory_record(15, 0, addr=1)
    t.memory_record(20, -64, addr=1)
    tables, tree = load(t)
    assert [brief(r) for r in memory_events(tables, tree, "GPU0")["rows"]] == [(None, 64, 10, 20, 10)]


def test_an_address_allocated_twice_before_a_free_pairs_the_free_with_the_later_one():
    t = Trace()
    t.memory_record(10, 64, addr=1)
    t.memory_record(15, 32, addr=1)
    t.memory_record(20, -32, addr=1)
    tables, tree = load(t)
    assert [brief(r) for r in memory_events(tables, tree, "GPU0")["rows"]] == [
        (None, 64, 10, None, None), (None, 32, 15, 20, 5)]
