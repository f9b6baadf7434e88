"""Call-stack ids of operators from Python tracer frames (callstacks.op_stacks): one id per
distinct stack, numbered in the order of the frames, shared with stacks from arguments."""

from __future__ import annotations

import numpy as np

from profboard.server.analysis.callstacks import op_stacks
from synth import Trace, parse

MAIN, F, G, H = "a.py(1): main", "b.py(2): f", "c.py(3): g", "d.py(4): h"


def stacks_of(t: Trace, ops: list[str]):
    tables = parse(t.build())
    names = tables.events["name"].astype(str).to_numpy()
    rows = np.array([np.flatnonzero(names == op)[0] for op in ops])
    stacks = op_stacks(tables.events, rows)
    return stacks.frames, [stacks.frames[i] if i >= 0 else None for i in stacks.of_row[rows].tolist()]


def test_a_stack_reached_at_two_depths_is_one_stack_and_ids_follow_the_frames():
    t = Trace()
    t.python(MAIN, 0, 1000, python_id=1)
    t.python("<built-in method x>", 10, 400, python_id=2, parent_id=1)  # not a source frame
    t.python(F, 20, 100, python_id=3, parent_id=2)
    t.python(H, 25, 50, python_id=4, parent_id=3)
    t.op("op_deepest", 30, 10)
    t.op("op_main", 450, 10)
    t.python(F, 500, 100, python_id=5, parent_id=1)
    t.op("op_shallow", 510, 10)
    t.python(G, 700, 100, python_id=6, parent_id=1)  # a shallow stack after a deeper one
    t.op("op_g", 710, 10)
    t.op("op_outside", 2000, 10)
    frames, of_ops = stacks_of(t, ["op_deepest", "op_main", "op_shallow", "op_g", "op_outside"])
    assert frames == [(MAIN,), (F, MAIN), (H, F, MAIN), (G, MAIN)]  # in the order of their first frames
    assert of_ops == [(H, F, MAIN), (MAIN,), (F, MAIN), (G, MAIN), None]


def test_stacks_from_frames_share_the_ids_of_stacks_from_arguments():
    t = Trace()
    t.op("op_with_argument", 0, 10)["args"]["Call stack"] = f"{F};{MAIN}"
    t.python(MAIN, 100, 1000, python_id=1)
    t.op("op_main", 110, 10)
    t.python(F, 200, 100, python_id=2, parent_id=1)
    t.op("op_in_f", 210, 10)
    frames, of_ops = stacks_of(t, ["op_with_argument", "op_main", "op_in_f"])
    assert frames == [(F, MAIN), (MAIN,)]
    assert of_ops == [(F, MAIN), (MAIN,), (F, MAIN)]


def test_a_frame_that_outlives_its_parent_keeps_its_parent_in_the_stack():
    # Frames are nested by time (optree.nesting): G starts inside F and is clipped to it, so F is its
    # parent even after F ended. Asked for one operator, the stacks come from the frames around it, F
    # included (it is open where G starts), as they come from all of them.
    t = Trace()
    t.python(F, 0, 100, python_id=1)
    t.python(G, 50, 150, python_id=2, parent_id=1)
    t.python(H, 300, 10, python_id=3)  # around no operator asked for
    t.op("op_early", 10, 5)
    t.op("op_after_f", 120, 5)
    t.op("op_in_h", 302, 5)
    assert stacks_of(t, ["op_after_f"])[1] == [(G, F)]
    assert stacks_of(t, ["op_early", "op_after_f"]) == ([(F,), (G, F)], [(F,), (G, F)])
    assert stacks_of(t, ["op_early", "op_after_f", "op_in_h"])[1] == [(F,), (G, F), (H,)]
