"""Memory view numbers agree with the reference plugin (legacy samples) and with the raw records (2.x).

a) kineto_samples (PyTorch 1.9): the per-operator memory stats equal torch-tb-profiler 0.4.3's
   internal values (calls exactly, sizes to the byte), whole traces and two windows cutting
   through steps. The reference's numbers are in data/reference_memory_stats.json.gz; regenerate
   them (the plugin runs in its own venv, bench/.ref-venv) with

       .venv/bin/python bench/reference_memory.py --samples-data tests/fixtures_agreement/data/reference_memory_stats.json.gz

b) PyTorch 2.x traces (h100/resnet50_fp32, one rank of h200x4/ddp_resnet50): recomputed here from
   the raw JSON with plain Python and numpy (nothing from profboard):
   - the curve's peak allocated per device is the highest `Total Allocated` of its records;
   - in a window, every allocation/free pair (a free pairs with the last allocation at its
     device and address, records in time order) with an end in the window appears exactly
     once in the events table, with both its times, and so do unpaired ends in the window;
   - the stats of a window: a record belongs to the innermost `cpu_op` around it on its thread
     (start <= t < end); self columns sum a call's own records, total columns every record
     inside the call; calls are those overlapping the window, a call that is the only child of
     a call of the same name counting once.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from shared_traces import FIXTURES, FixtureTrace, over, traces

SAMPLES = FIXTURES / "kineto_samples"
REFERENCE = Path(__file__).resolve().parent / "data" / "reference_memory_stats.json.gz"
NOT_OPERATORS = ("ProfilerStep#", "Optimizer.", "enumerate(DataLoader)#", "enumerate(DataPipe)#")
KEYS = ["self_size_increase_bytes", "self_allocation_size_bytes", "self_allocation_count",
        "size_increase_bytes", "allocation_size_bytes", "allocation_count", "calls"]


# -- a) the reference on its samples ------------------------------------------------------------


def _reference_cases() -> list[pytest.param]:
    if not REFERENCE.exists():
        return []
    cases = json.loads(gzip.decompress(REFERENCE.read_bytes()))["cases"]
    return [pytest.param(SAMPLES / c["trace"], c, id=f"{c['trace']}:{'whole' if c['start_us'] is None else 'window'}")
            for c in cases]


@pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"reference samples not found at {SAMPLES}")
# session scope: the trace's other tests share its fixture_trace
@pytest.mark.parametrize("fixture_trace, case", _reference_cases(), indirect=["fixture_trace"], scope="session")
def test_stats_match_the_reference_on_its_samples(fixture_trace, case):
    from profboard.server.analysis.memory import attribution, devices, memory_stats

    tables, tree = fixture_trace.tables, fixture_trace.tree
    placed = attribution(tables, tree)
    for device in [d["device"] for d in devices(tables)]:
        answer = memory_stats(tables, tree, device, case["start_us"], case["end_us"], placed=placed)
        ours = {r["name"]: [r[k] for k in KEYS] for r in answer["rows"]}
        theirs = case["stats"].get(device, {})
        assert set(ours) == set(theirs), device
        mismatches = {name: (ours[name], theirs[name]) for name in ours if ours[name] != theirs[name]}
        assert not mismatches, f"{device}: [ours, reference] in order {KEYS}: {mismatches}"
    assert set(case["stats"]) <= {d["device"] for d in devices(tables)}


# -- b) 2.x traces against their raw records ----------------------------------------------------


# both spans of resnet50_fp32, one rank of ddp_resnet50
RECENT = over(traces("h100/resnet50_fp32") + traces("h200x4/ddp_resnet50", first_only=True))


def _raw(trace: FixtureTrace) -> dict:
    events = trace.raw["traceEvents"]
    records = sorted((e for e in events if e.get("ph") in ("i", "I") and e.get("name") == "[memory]"),
                     key=lambda e: e["ts"])
    host = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    return {"records": records, "host": host}


def raw(trace: FixtureTrace) -> dict:
    """The raw trace: memory records in time order (ties in file order) and host ranges per thread."""
    return trace.derived(_raw)


def device_of(record: dict) -> str:
    args = record["args"]
    return "CPU" if args["Device Type"] == 0 else f"GPU{args['Device Id']}"


def window(trace: FixtureTrace) -> tuple[float, float]:
    """A window from 40% to 70% of the records' time span: it cuts through steps and operators."""
    ts = [r["ts"] for r in raw(trace)["records"]]
    lo, hi = ts[0], ts[-1]
    return lo + 0.4 * (hi - lo), lo + 0.7 * (hi - lo)


@RECENT
def test_peak_allocated_is_the_highest_total_allocated_of_the_device(fixture_trace):
    from profboard.server.analysis.memory_curve import curve

    peaks: dict[str, float] = defaultdict(float)
    for r in raw(fixture_trace)["records"]:
        peaks[device_of(r)] = max(peaks[device_of(r)], r["args"]["Total Allocated"])
    tables = fixture_trace.tables
    assert peaks
    for device, peak in peaks.items():
        answer = curve(tables, device, width_px=100)  # few pixels: the curve is thinned
        assert answer["peak_allocated"]["bytes"] == peak
        assert max(answer["allocated_bytes"]) == peak
        assert answer["points"] < answer["records"] or answer["records"] <= 400


def _pairs(records: list[dict]) -> list[tuple[str, int, float | None, float | None]]:
    """(device, size, alloc ts, free ts) for every allocation and every free, paired when possible."""
    open_allocs: dict[tuple[str, int], dict] = {}
    out = []
    for r in records:
        key = (device_of(r), r["args"]["Addr"])
        size = r["args"]["Bytes"]
        if size > 0:
            if key in open_allocs:  # allocated again before any free: the older one is never freed
                old = open_allocs.pop(key)
                out.append((key[0], old["args"]["Bytes"], old["ts"], None))
            open_allocs[key] = r
        elif size < 0:
            alloc = open_allocs.pop(key, None)
            out.append((key[0], -size, None if alloc is None else alloc["ts"], r["ts"]))
    out += [(key[0], r["args"]["Bytes"], r["ts"], None) for key, r in open_allocs.items()]
    return out


def _t(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@RECENT
def test_every_pair_in_a_window_appears_exactly_once(fixture_trace):
    from profboard.server.analysis.memory import memory_events

    start, end = window(fixture_trace)
    tables, tree = fixture_trace.tables, fixture_trace.tree
    expected: dict[str, Counter] = defaultdict(Counter)
    for device, size, alloc, free in _pairs(raw(fixture_trace)["records"]):
        if any(t is not None and start <= t <= end for t in (alloc, free)):
            expected[device][(size, _t(alloc), _t(free))] += 1
    assert sum(len(c) for c in expected.values()) > 100
    for device, pairs in expected.items():
        rows = memory_events(tables, tree, device, start, end)["rows"]
        got = Counter((r["size_bytes"], r["alloc_us"], r["free_us"]) for r in rows)
        assert got == pairs, device
        assert max(pairs.values()) == 1  # each pair once (no two share size and both times)


def _host_tree(host: list[dict]) -> list[dict]:
    """Host ranges with, per range, its parent range and its number of children (per thread)."""
    nodes = []
    by_thread: dict[tuple, list[dict]] = defaultdict(list)
    for e in host:
        by_thread[(e["pid"], e["tid"])].append(e)
    for thread, ranges in by_thread.items():
        ranges.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict] = []
        for e in ranges:
            node = {"name": e["name"], "cat": e["cat"], "thread": thread, "start": e["ts"],
                    "end": e["ts"] + e["dur"], "children": 0, "parent": None}
            while stack and node["start"] >= stack[-1]["end"]:
                stack.pop()
            if stack:
                node["parent"] = stack[-1]
                stack[-1]["children"] += 1
            stack.append(node)
            nodes.append(node)
    return nodes


def _expected_stats(trace: FixtureTrace, device: str, start: float, end: float) -> dict[str, list[int]]:
    nodes = _host_tree(raw(trace)["host"])
    ops = [n for n in nodes if n["cat"] == "cpu_op" and not n["name"].startswith(NOT_OPERATORS)]
    folded = [n for n in ops if n["parent"] is not None and n["parent"]["cat"] == "cpu_op"
              and n["parent"]["name"] == n["name"] and n["parent"]["children"] == 1]
    calls = [n for n in ops if not any(n is f for f in folded)]
    records = [r for r in raw(trace)["records"] if device_of(r) == device and start <= r["ts"] <= end]
    # The innermost cpu_op around each record, by brute force over the thread's operators.
    cpu_ops = [n for n in nodes if n["cat"] == "cpu_op"]
    threads = np.array([hash(n["thread"]) for n in cpu_ops])
    op_start = np.array([n["start"] for n in cpu_ops])
    op_end = np.array([n["end"] for n in cpu_ops])
    owners = []
    for r in records:
        around = np.flatnonzero((threads == hash((r["pid"], r["tid"]))) & (op_start <= r["ts"]) & (r["ts"] < op_end))
        inner = around[np.lexsort((op_end[around], -op_start[around]))[0]] if len(around) else None
        owner = None if inner is None else cpu_ops[inner]
        owners.append(owner if owner is not None and not owner["name"].startswith(NOT_OPERATORS) else None)
    stats: dict[str, list[int]] = defaultdict(lambda: [0] * 7)
    for r, owner in zip(records, owners):
        if owner is None:
            continue
        size = r["args"]["Bytes"]
        row = stats[owner["name"]]
        row[0] += size
        if size > 0:
            row[1] += size
            row[2] += 1
    for call in calls:
        row = stats[call["name"]]
        for r, owner in zip(records, owners):
            if owner is not None and (r["pid"], r["tid"]) == call["thread"] and call["start"] <= r["ts"] < call["end"]:
                size = r["args"]["Bytes"]
                row[3] += size
                if size > 0:
                    row[4] += size
                    row[5] += 1
        if call["end"] >= start and call["start"] <= end:
            row[6] += 1
    return {name: row for name, row in stats.items() if any(row[:6])}


@RECENT
def test_stats_of_a_window_match_the_raw_records(fixture_trace):
    from profboard.server.analysis.memory import memory_stats

    start, end = window(fixture_trace)
    tables, tree = fixture_trace.tables, fixture_trace.tree
    compared = 0
    for device in sorted({device_of(r) for r in raw(fixture_trace)["records"]}):
        expected = _expected_stats(fixture_trace, device, start, end)
        ours = {r["name"]: [r[k] for k in KEYS] for r in memory_stats(tables, tree, device, start, end)["rows"]}
        compared += len(expected)
        assert set(ours) == set(expected), device
        mismatches = {n: (ours[n], expected[n]) for n in ours if ours[n] != expected[n]}
        assert not mismatches, f"{device}: [ours, expected] in order {KEYS}: {mismatches}"
    assert compared > 10  # the window holds operators that touched memory
