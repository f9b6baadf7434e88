"""Range arithmetic (server/analysis/ranges.py): unions, coverage, clipping, priority split, sweeps."""

from __future__ import annotations

import numpy as np
import pytest

from profboard.server.analysis import ranges


def arr(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def pairs(rs: ranges.RangeSet) -> list[tuple[float, float]]:
    return [(float(s), float(e)) for s, e in zip(*rs)]


@pytest.mark.parametrize("starts, ends, expected", [
    pytest.param([], [], [], id="empty"),
    pytest.param([0], [10], [(0, 10)], id="one"),
    pytest.param([0, 20], [10, 30], [(0, 10), (20, 30)], id="disjoint"),
    pytest.param([0, 5], [10, 15], [(0, 15)], id="overlapping"),
    # [0,100) holds [10,20) and [30,40): the nested ones vanish into it
    pytest.param([0, 10, 30], [100, 20, 40], [(0, 100)], id="nested"),
    # [10,20) ends where [20,30) starts: touching ranges join
    pytest.param([10, 20], [20, 30], [(10, 30)], id="touching-join"),
    pytest.param([20, 0, 5], [30, 10, 8], [(0, 10), (20, 30)], id="unsorted-input"),
    # a long range reaches past later starts: [0,50) swallows [10,15) and [40,60) extends it to 60
    pytest.param([0, 10, 40, 70], [50, 15, 60, 80], [(0, 60), (70, 80)], id="reach-carries-over"),
    pytest.param([5, 0], [5, 10], [(0, 10)], id="zero-length-dropped"),
    pytest.param([5], [5], [], id="only-zero-length"),
    pytest.param([7], [3], [], id="inverted-dropped"),
])
def test_union(starts, ends, expected):
    assert pairs(ranges.union(arr(*starts), arr(*ends))) == expected


@pytest.mark.parametrize("rs, expected", [
    pytest.param(ranges.EMPTY, 0.0, id="empty"),
    pytest.param((arr(0, 20), arr(10, 35)), 25.0, id="two"),  # 10 + 15
])
def test_total(rs, expected):
    assert ranges.total(rs) == expected


@pytest.mark.parametrize("points, expected", [
    pytest.param([-1, 0, 5, 10, 15, 20, 29.5, 30, 40], [False, True, True, False, False, True, True, False, False],
                 id="start-inclusive-end-exclusive"),
])
def test_covers(points, expected):
    rs = (arr(0, 20), arr(10, 30))  # [0,10) and [20,30)
    assert ranges.covers(rs, arr(*points)).tolist() == expected


def test_covers_empty_set_covers_nothing():
    assert ranges.covers(ranges.EMPTY, arr(1, 2)).tolist() == [False, False]


@pytest.mark.parametrize("lo, hi, expected", [
    pytest.param(0, 100, 20.0, id="all"),          # 10 + 10
    pytest.param(5, 25, 10.0, id="both-cut"),      # [5,10) 5 + [20,25) 5
    pytest.param(10, 20, 0.0, id="gap"),
    pytest.param(25, 25, 0.0, id="empty-window"),
    pytest.param(30, 20, 0.0, id="inverted-window"),
])
def test_clip_total(lo, hi, expected):
    rs = (arr(0, 20), arr(10, 30))  # [0,10) and [20,30)
    assert ranges.clip_total(rs, lo, hi) == expected


def test_clip_total_of_empty_set():
    assert ranges.clip_total(ranges.EMPTY, 0, 10) == 0.0


# Layers in priority order; each window's row is (layer 0, layer 1, ..., none of them).
PRIORITY_CASES = [
    pytest.param(
        [[(0, 50)], [(25, 75)]], [(0, 100)],
        # layer0 [0,50) = 50; layer1 only where layer0 is not: [50,75) = 25; rest [75,100) = 25
        [[50, 25, 25]], id="higher-layer-wins-overlap"),
    pytest.param(
        [[(40, 60)], [(0, 100)]], [(0, 100)],
        # a nested higher-priority range takes its 20 out of the lower one: 100 - 20 = 80
        [[20, 80, 0]], id="nested-higher-inside-lower"),
    pytest.param(
        [[(0, 10)], [(0, 10)]], [(0, 10)],
        [[10, 0, 0]], id="identical-ranges-go-to-first"),
    pytest.param(
        [[(0, 30)], [(20, 60)]], [(10, 40), (40, 80)],
        # window 1 [10,40): layer0 [10,30) 20, layer1 [30,40) 10, none 0
        # window 2 [40,80): layer1 [40,60) 20, none [60,80) 20
        [[20, 10, 0], [0, 20, 20]], id="split-across-windows"),
    pytest.param(
        [[(0, 10)], []], [(20, 30)],
        [[0, 0, 10]], id="window-outside-all-layers"),
    pytest.param(
        [[(0, 100)]], [(0, 60), (40, 100)],
        # overlapping windows are each counted on their own: 60 and 60
        [[60, 0], [60, 0]], id="overlapping-windows"),
    pytest.param(
        [[(0, 10)]], [],
        [], id="no-windows"),
]


@pytest.mark.parametrize("layers, windows, expected", PRIORITY_CASES)
def test_assign_by_priority(layers, windows, expected):
    layer_sets = [ranges.union(arr(*[s for s, _ in layer]), arr(*[e for _, e in layer])) if layer else ranges.EMPTY
                  for layer in layers]
    w = (arr(*[s for s, _ in windows]), arr(*[e for _, e in windows]))
    out = ranges.assign_by_priority(layer_sets, w)
    assert out.shape == (len(windows), len(layers) + 1)
    assert out.tolist() == expected
    # every window's time is split exactly once
    for row, (s, e) in zip(out, windows):
        assert row.sum() == pytest.approx(e - s)


def test_assign_by_priority_eight_categories_sum_to_window():
    # Eight layers like the step breakdown, each [k*10, k*10+25): every layer overlaps the next.
    layers = [(arr(k * 10.0), arr(k * 10.0 + 25)) for k in range(8)]
    out = ranges.assign_by_priority(layers, (arr(0.0), arr(120.0)))[0]
    # layer 0 keeps all of [0,25); layer k>0 only gets the 10 past layer k-1's end: [10k+15, 10k+25)
    # 25 + 7*10 = 95 covered; other [95,120) = 25
    assert out.tolist() == [25, 10, 10, 10, 10, 10, 10, 10, 25]
    assert out.sum() == 120


@pytest.mark.parametrize("starts, ends, values, expected", [
    pytest.param([], [], [], [], id="empty"),
    pytest.param(
        [0, 5], [10, 15], [0.5, 0.6],
        # [0,5) 0.5; [5,10) 0.5+0.6; [10,15) 0.6
        [(0, 5, 0.5), (5, 10, 1.1), (10, 15, 0.6)], id="overlap-adds"),
    pytest.param(
        [0, 20], [10, 30], [1.0, 2.0],
        # the gap [10,20) is a segment with 0
        [(0, 10, 1.0), (10, 20, 0.0), (20, 30, 2.0)], id="gap-is-zero"),
    pytest.param(
        [0, 10], [10, 20], [1.0, 2.0],
        # at t=10 the second starts before the first ends: a zero-length segment holds both
        [(0, 10, 1.0), (10, 10, 3.0), (10, 20, 2.0)], id="starts-before-ends-at-equal-times"),
])
def test_sweep_sum(starts, ends, values, expected):
    seg_start, seg_end, level = ranges.sweep_sum(arr(*starts), arr(*ends), arr(*values))
    got = [(float(s), float(e), round(float(v), 9)) for s, e, v in zip(seg_start, seg_end, level)]
    assert got == expected
