"""Forward/backward pairs from fwdbwd flow points (flows._backward_pairs): which operator owns a
point, and how points without a thread or an id match."""

from __future__ import annotations

import numpy as np

from profboard.server.analysis import flows
from synth import Trace, parse


def point(ph: str, ts: float, tid=1000, **fields) -> dict:
    return {"ph": ph, "cat": "fwdbwd", "name": "fwdbwd", "id": 3, "pid": 1000, "tid": tid, "ts": ts, **fields}


def pairs_by_name(t: Trace) -> list[tuple[str, str]]:
    tables = parse(t.build())
    names = tables.events["name"].astype(str).to_numpy()
    src, dst = flows._backward_pairs(tables.events, tables.flows)
    return [(names[s], names[d]) for s, d in zip(src.tolist(), dst.tolist())]


def test_the_outermost_operator_starting_at_a_point_owns_it():
    t = Trace()
    t.op("aten::linear", 50, 30)
    t.op("aten::addmm", 50, 20)  # starts with its parent: the point is the parent's
    t.op("AddmmBackward0", 500, 20, tid=2000)
    t.add(point("s", 50))
    t.add(point("f", 500, tid=2000, bp="e"))
    assert pairs_by_name(t) == [("aten::linear", "AddmmBackward0")]


def two_forward_two_backward() -> Trace:
    t = Trace()
    t.op("aten::mm", 50, 10)
    t.op("aten::add", 70, 10)
    t.op("MmBackward0", 500, 20, tid=2000)
    t.op("AddBackward0", 600, 20, tid=2000)
    return t


def test_threads_match_by_their_text_and_ids_pair_every_start_with_every_finish():
    t = two_forward_two_backward()
    t.add(point("s", 50, pid="1000"))  # the pid as text is the same thread
    t.add(point("s", 70, tid="1000"))
    t.add(point("f", 500, tid=2000, bp="e"))
    t.add(point("f", 600, tid="2000", bp="e"))
    assert pairs_by_name(t) == [("aten::mm", "MmBackward0"), ("aten::mm", "AddBackward0"),
                                ("aten::add", "MmBackward0"), ("aten::add", "AddBackward0")]


def test_a_point_without_a_thread_meets_no_operator_and_points_without_an_id_pair():
    t = two_forward_two_backward()
    t.add(point("s", 50, id=None))
    t.add(point("f", 500, tid=2000, bp="e", id=None))
    t.add(point("s", 70, id=4))
    lost = point("f", 600, tid=2000, bp="e", id=4)
    del lost["pid"]
    t.add(lost)
    assert pairs_by_name(t) == [("aten::mm", "MmBackward0")]


def test_no_points_no_pairs():
    t = Trace()
    t.op("aten::mm", 50, 10)
    tables = parse(t.build())
    assert [a.tolist() for a in flows._backward_pairs(tables.events, tables.flows)] == [[], []]
    assert np.asarray(flows._backward_pairs(tables.events, tables.flows)[0]).dtype == np.int64
