"""The Overview's idle-time shaping (web/static/js/overview.js), run in Chromium on hand-made answers."""

from __future__ import annotations

import pytest

from browser_pages import module_runner

pytestmark = pytest.mark.browser

# One step 0..200 on one GPU: busy 50 us; host wait 100, kernel wait 10, other 40.
GPU = {"device": 0, "span_us": 200, "idle_us": 150, "host_wait_us": 100, "kernel_wait_us": 10, "other_us": 40}
AVERAGE = [
    {"device": 0, "stream": None, "idle_us": 150, "host_wait_us": 100, "kernel_wait_us": 10, "other_us": 40},
    {"device": 0, "stream": 7, "idle_us": 80, "host_wait_us": 30, "kernel_wait_us": 10, "other_us": 40},
    {"device": 1, "stream": 7, "idle_us": 5, "host_wait_us": 5, "kernel_wait_us": 0, "other_us": 0},
]


@pytest.fixture
def overview(blank_page):
    """Evaluates `expression` with `ov` (overview.js) and `ARG` in scope."""
    return module_runner(blank_page, {"ov": "overview.js"})


def test_idle_segments_are_busy_then_each_cause_as_shares_of_the_span(overview):
    out = overview("ov.idleSegments(ARG).map((s) => [s.key, s.label, s.us, s.ratio])", GPU)
    assert out == [["busy_us", "Busy", 50, 0.25], ["host_wait_us", "Host wait", 100, 0.5],
                   ["kernel_wait_us", "Kernel wait", 10, 0.05], ["other_us", "Other", 40, 0.2]]


def test_idle_segments_of_an_empty_span_have_no_share(overview):
    empty = {**GPU, "span_us": 0, "idle_us": 0, "host_wait_us": 0, "kernel_wait_us": 0, "other_us": 0}
    assert overview("ov.idleSegments(ARG).map((s) => s.ratio)", empty) == [None] * 4


def test_idle_rows_are_one_gpus_whole_then_its_streams(overview):
    out = overview("[0, 1].map((d) => ov.idleRows(ARG, d).map((r) => [r.name, r.idle_us]))", AVERAGE)
    assert out == [[["GPU", 150], ["Stream 7", 80]], [["Stream 7", 5]]]
