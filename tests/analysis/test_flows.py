"""Flow arrows between timeline events (server/analysis/flows.py)."""

from __future__ import annotations

import numpy as np

from profboard.server.analysis import flows, timeline
from synth import Trace, parse


def indexed(t: Trace):
    tables = parse(t.build())
    layout = timeline.build_layout(tables)
    return tables, layout, flows.build_flows(tables, layout.lane_of >= 0)


def rows_named(tables, name: str) -> list[int]:
    return np.flatnonzero(tables.events["name"].astype(str).to_numpy() == name).tolist()


def launches_and_backward() -> Trace:
    t = Trace()
    t.launch(0, 5, 100, 10, name="k_early")
    t.launch(1000, 5, 1010, 10, name="k_late")
    t.launch(2000, 5, 9000, 10, name="k_queued")  # the GPU runs it long after the launch
    t.op("aten::mm", 50, 10)
    t.op("MmBackward0", 5000, 20, tid=2000)
    t.add({"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1000, "tid": 1000, "ts": 50})
    t.add({"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1000, "tid": 2000, "ts": 5000, "bp": "e"})
    return t


def test_pairs_come_from_correlation_ids_and_fwdbwd_points():
    tables, _, index = indexed(launches_and_backward())
    pairs = {(int(s), int(d), flows.CATEGORIES[c]) for s, d, c in zip(index.src, index.dst, index.cat)}
    calls = rows_named(tables, "cudaLaunchKernel")
    kernels = [rows_named(tables, n)[0] for n in ("k_early", "k_late", "k_queued")]
    fwd, bwd = rows_named(tables, "aten::mm")[0], rows_named(tables, "MmBackward0")[0]
    assert pairs == {*((c, k, "ac2g") for c, k in zip(calls, kernels)), (fwd, bwd, "fwdbwd")}
    assert flows.of_event(index, calls[0]) == [(kernels[0], "launches")]
    assert flows.of_event(index, kernels[2]) == [(calls[2], "launched by")]
    assert flows.of_event(index, bwd) == [(fwd, "forward")]


def test_a_window_holds_the_pairs_with_either_end_inside():
    tables, _, index = indexed(launches_and_backward())
    kernels = {rows_named(tables, n)[0]: n for n in ("k_early", "k_late", "k_queued")}

    def names_in(lo: float, hi: float) -> set[str]:
        total, picked = flows.in_window(index, lo, hi)
        assert total == len(picked)
        return {kernels.get(int(d), "backward") for d in index.dst[picked]}

    assert names_in(0, 20) == {"k_early"}           # only the launch call is inside
    assert names_in(8990, 9100) == {"k_queued"}     # only the kernel is inside, the call is long gone
    assert names_in(3000, 4000) == set()            # an arrow passing over the window is not in it
    assert names_in(4990, 5010) == {"backward"}
    assert names_in(0, 10_000) == {"k_early", "k_late", "k_queued", "backward"}


def test_too_many_pairs_are_counted_not_listed():
    t = Trace()
    for i in range(flows.MAX_WINDOW_FLOWS + 1):
        t.launch(i * 10, 2, i * 10 + 3, 2)
    tables, layout, index = indexed(t)
    answer = flows.window_flows(tables, index, layout.lane_of, layout.row_of, 0, 1e9)
    assert answer["total"] == flows.MAX_WINDOW_FLOWS + 1 and answer["from_id"] == []
    few = flows.window_flows(tables, index, layout.lane_of, layout.row_of, 0, 25)
    assert few["total"] == 3 and few["cat"] == ["ac2g"] * 3
    assert few["from_lane"] != few["to_lane"] and few["to_us"] == [3.0, 13.0, 23.0]


def test_a_correlation_id_used_again_pairs_each_piece_of_work_with_the_last_call_before_it():
    """A step's events copied (traces joined end to end): each kernel goes with its own copy's launch,
    not with every call of its id (which made a copied trace's pairs grow with the square of the copies)."""
    t = Trace()
    for copy in range(3):
        base = copy * 1000
        t.runtime("cudaLaunchKernel", base, 5, correlation=7)
        t.kernel("k", base + 20, 10, correlation=7)
        t.kernel("k_graph", base + 40, 10, correlation=7)  # a second piece of work of the same call
    t.kernel("k_orphan", -500, 10, correlation=7)  # before any call of its id: no pair
    tables, _, index = indexed(t)
    calls, ts = rows_named(tables, "cudaLaunchKernel"), tables.events["ts"].to_numpy()
    pairs = sorted((int(s), int(d)) for s, d in zip(index.src, index.dst))
    expected = sorted((call, work) for call in calls for work in rows_named(tables, "k") + rows_named(tables, "k_graph")
                      if 0 <= ts[work] - ts[call] < 1000)
    assert pairs == expected and len(pairs) == 6
