"""Operator and kernel tables on PyTorch 2.x traces agree with the raw events, recomputed plainly.

The reference plugin misreads 2.x traces, so the oracle here is the definition applied to the
raw JSON with plain Python (gzip + json, dicts, bisect; nothing from profboard):
- Kernels: per kernel name, calls and total time are the count and summed `dur` of the raw
  `kernel` events; grouped by launching op, the rows of a kernel add up to the same.
- Operators: per name, calls and host total are the count and summed `dur` of the raw
  `cpu_op` events, for names that never run nested inside themselves (PyTorch counts such
  nested calls once).
- Device time: a runtime/driver call belongs to the host event (cpu_op, user_annotation)
  with its `External id`; device events (kernel, memcpy, memset) to the call with their
  `correlation`. An op's device self time is what its own calls launched; its device total
  adds what the host events starting inside it on its thread launched.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

import pytest

from shared_traces import TORCH2_RUNS, FixtureTrace, every_trace

HOST_CATS = {"cpu_op", "user_annotation", "python"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
pytestmark = every_trace(*TORCH2_RUNS)


def raw(trace: FixtureTrace) -> list[dict]:
    return [e for e in trace.raw["traceEvents"] if e.get("ph") == "X"]


def _tables(trace: FixtureTrace) -> dict:
    from profboard.server.analysis.kernels import kernel_table
    from profboard.server.analysis.operators import op_instances, operator_table

    events = trace.tables.events
    instances, _ = op_instances(events, trace.tree)
    return {
        "ops": {r["name"]: r for r in operator_table(instances)},
        "kernels": {r["name"]: r for r in kernel_table(events, trace.tree)},
        "kernels_by_op": kernel_table(events, trace.tree, "name_op"),
    }


def profboard_tables(trace: FixtureTrace) -> dict:
    return trace.derived(_tables)


def close(a: float, b: float) -> bool:
    return abs(a - b) <= max(0.01, 1e-9 * abs(b))


def test_kernel_rows_are_sums_of_raw_kernels(fixture_trace):
    calls, total = defaultdict(int), defaultdict(float)
    for e in raw(fixture_trace):
        if e.get("cat") == "kernel":
            calls[e["name"]] += 1
            total[e["name"]] += e["dur"]
    ours = profboard_tables(fixture_trace)
    assert set(ours["kernels"]) == set(calls)
    for name, row in ours["kernels"].items():
        assert row["calls"] == calls[name] and close(row["total_us"], total[name]), name
    by_op_calls, by_op_total = defaultdict(int), defaultdict(float)
    for row in ours["kernels_by_op"]:
        by_op_calls[row["name"]] += row["calls"]
        by_op_total[row["name"]] += row["total_us"]
    assert by_op_calls == calls
    assert all(close(by_op_total[n], total[n]) for n in total)


def _threads(events: list[dict]) -> dict[tuple, list[dict]]:
    threads = defaultdict(list)
    for e in events:
        if e.get("cat") in HOST_CATS:
            threads[(e["pid"], e["tid"])].append(e)
    for items in threads.values():
        items.sort(key=lambda e: (e["ts"], -e["dur"]))
    return threads


def _self_nesting_names(threads) -> set[str]:
    names = set()
    for items in threads.values():
        open_ops: list[dict] = []
        for e in items:
            while open_ops and e["ts"] >= open_ops[-1]["ts"] + open_ops[-1]["dur"]:
                open_ops.pop()
            if e.get("cat") == "cpu_op" and any(o["name"] == e["name"] for o in open_ops):
                names.add(e["name"])
            open_ops.append(e)
    return names


def test_operator_rows_agree_with_raw_ops(fixture_trace):
    events = raw(fixture_trace)
    threads = _threads(events)
    skip = _self_nesting_names(threads)

    device_of_corr = defaultdict(float)
    for e in events:
        if e.get("cat") in DEVICE_CATS:
            device_of_corr[e["args"].get("correlation")] += e["dur"]
    device_of_ext = defaultdict(float)
    for e in events:
        if e.get("cat") in LAUNCH_CATS and e["args"].get("External id", 0) > 0:
            device_of_ext[e["args"]["External id"]] += device_of_corr.get(e["args"]["correlation"], 0.0)

    calls, host, dev_self, dev_total = defaultdict(int), defaultdict(float), defaultdict(float), defaultdict(float)
    for items in threads.values():
        starts = [e["ts"] for e in items]
        for i, e in enumerate(items):
            if e.get("cat") != "cpu_op" or e["name"] in skip:
                continue
            name, ext = e["name"], e["args"].get("External id")
            calls[name] += 1
            host[name] += e["dur"]
            dev_self[name] += device_of_ext.get(ext, 0.0)
            inside = items[i:bisect_left(starts, e["ts"] + e["dur"])]
            dev_total[name] += sum(device_of_ext.get(x["args"].get("External id"), 0.0) for x in inside)

    ours = profboard_tables(fixture_trace)["ops"]
    checked = 0
    for name in calls:
        row = ours[name]
        assert row["calls"] == calls[name], name
        assert close(row["host_total_us"], host[name]), (name, row["host_total_us"], host[name])
        assert close(row["device_self_us"], dev_self[name]), (name, row["device_self_us"], dev_self[name])
        assert close(row["device_total_us"], dev_total[name]), (name, row["device_total_us"], dev_total[name])
        checked += 1
    assert checked > 10
