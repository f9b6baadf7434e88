"""Joining the pieces' text columns (server/trace/tables.py): an id column's texts are the text of each
raw value, in order of first appearance, whether its values are ints (numbered as numbers), texts,
both, or ints beyond 64 bits."""

from __future__ import annotations

import json

import pytest

from profboard.server.trace.decode import decode_trace
from profboard.server.trace.tables import build_tables

IDS = {
    "ints": [7 * i + 3 for i in range(1500)],
    "texts and ints of one text": [str(i) if i % 3 else i for i in range(1500)],
    "beyond 64 bits": [(1 << 64) + i for i in range(1500)] + [5],
}


@pytest.mark.parametrize("case", IDS)
def test_flow_ids_become_their_texts_in_order_of_first_appearance(case):
    ids = IDS[case]
    events = []
    for i, flow_id in enumerate(ids):  # an arrow's start and its end share the id
        events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": flow_id, "pid": 1, "tid": 1, "ts": 2 * i})
        events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": flow_id, "pid": 0, "tid": 7, "ts": 2 * i + 1,
                       "bp": "e"})
    flows = build_tables(decode_trace(json.dumps({"traceEvents": events}).encode())).flows
    texts = [str(flow_id) for flow_id in ids for _ in range(2)]
    assert flows["id"].astype(str).tolist() == texts
    assert list(flows["id"].cat.categories) == list(dict.fromkeys(texts))
