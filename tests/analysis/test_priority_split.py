"""ranges.assign_by_priority against its definition, segment by segment: each piece of a window
between two boundaries goes to the first layer covering the piece's midpoint. Random layers on
trace-clock timestamps, where boundaries a float apart put midpoints on a piece's ends."""

from __future__ import annotations

import numpy as np
import pytest

from profboard.server.analysis import ranges


def by_midpoints(layers: list[ranges.RangeSet], windows: ranges.RangeSet) -> np.ndarray:
    w_start, w_end = windows
    points = np.unique(np.concatenate([w_start, w_end] + [a for layer in layers for a in layer]))
    seg_len = np.diff(points)
    mids = points[:-1] + seg_len / 2
    owner = np.full(len(mids), len(layers))
    for k in range(len(layers) - 1, -1, -1):
        owner[ranges.covers(layers[k], mids)] = k
    lo, hi = np.searchsorted(points, w_start), np.searchsorted(points, w_end)
    out = np.zeros((len(w_start), len(layers) + 1))
    for k in range(len(layers) + 1):
        cum = np.concatenate([[0.0], np.cumsum(np.where(owner == k, seg_len, 0.0))])
        out[:, k] = cum[hi] - cum[lo]
    return out


def random_layers(rng: np.random.Generator, base: float) -> list[ranges.RangeSet]:
    """Ranges whose ends lie 0 to 3 floats apart, around a trace-clock time."""
    grid = base + np.cumsum(rng.integers(0, 2, 400)) * np.spacing(base)  # many ties
    grid = np.concatenate([grid, np.nextafter(grid, np.inf)])
    out = []
    for _ in range(rng.integers(1, 6)):
        n = rng.integers(0, 60)
        starts = rng.choice(grid, n)
        out.append(ranges.union(starts, starts + rng.integers(0, 4, n) * np.spacing(base)))
    return out


@pytest.mark.parametrize("seed", range(60))
def test_assign_by_priority_is_its_definition(seed):
    rng = np.random.default_rng(seed)
    base = 5.34e12 if seed % 2 else 1000.0
    layers = random_layers(rng, base)
    edges = np.sort(rng.choice(np.concatenate([a for layer in layers for a in layer] + [[base]]), 6))
    windows = (edges[:3], edges[3:])  # overlapping windows, some empty
    got = ranges.assign_by_priority(layers, windows)
    assert got.tolist() == by_midpoints(layers, windows).tolist()


def test_midpoints_fall_on_segment_ends_on_the_trace_clock():
    p = 5.34e12
    q = np.nextafter(p, np.inf)
    r = np.nextafter(q, np.inf)
    assert {p + (q - p) / 2, q + (r - q) / 2} == {p, r}  # one rounds down, the other up
