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

import gzip
import json
from bisect import bisect_left
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures"
TRACES = sorted(p for group in ("h100", "h200x4", "big") for p in (FIXTURES / group).glob("*/*.pt.trace.json*"))
HOST_CATS = {"cpu_op", "user_annotation", "python"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}

pytestmark = pytest.mark.skipif(not TRACES, reason=f"no 2.x fixture traces under {FIXTURES}")


def _id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.parent.name}/{path.name.split('.')[0]}.{path.name.split('.')[1][-4:]}"


@pytest.fixture(scope="module", params=TRACES, ids=_id)
def path(request) -> Path:
    """One trace at a time: module scope makes pytest run every test of a trace before the next."""
    return request.param


@lru_cache(maxsize=1)
def raw(path: Path) -> list[dict]:
    with gzip.open(path) if path.suffix == ".gz" else open(path, "rb") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


@lru_cache(maxsize=1)
def profboard_tables(path: Path):
    from profboard.server.analysis.operators import op_instances, operator_table
    from profboard.server.analysis.kernels import kernel_table
    from profboard.server.analysis.optree import build_op_tree
    from profboard.server.trace.load import load_trace

    tables = load_trace(str(path), path.stat().st_size, path.stat().st_mtime)
    tree = build_op_tree(tables.events)
    instances, _ = op_instances(tables.events, tree)
    return {
        "ops": {r["name"]: r for r in operator_table(instances)},
        "kernels": {r["name"]: r for r in kernel_table(tables.events, tree)},
        "kernels_by_op": kernel_table(tables.events, tree, "name_op"),
    }


def close(a: float, b: float) -> bool:
    return abs(a - b) <= max(0.01, 1e-9 * abs(b))


def test_kernel_rows_are_sums_of_raw_kernels(path):
    calls, total = defaultdict(int), defaultdict(float)
    for e in raw(path):
        if e.get("cat") == "kernel":
            calls[e["name"]] += 1
            total[e["name"]] += e["dur"]
    ours = profboard_tables(path)
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


def test_operator_rows_agree_with_raw_ops(path):
    events = raw(path)
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

    ours = profboard_tables(path)["ops"]
    checked = 0
    for name in calls:
        row = ours[name]
        assert row["calls"] == calls[name], name
        assert close(row["host_total_us"], host[name]), (name, row["host_total_us"], host[name])
        assert close(row["device_self_us"], dev_self[name]), (name, row["device_self_us"], dev_self[name])
        assert close(row["device_total_us"], dev_total[name]), (name, row["device_total_us"], dev_total[name])
        checked += 1
    assert checked > 10
