"""The Trace page with several ranks on one clock, in Chromium, on the real two-rank straggler run:
both ranks' lanes (GPU lanes included) under headers naming the rank and its clock offset, by
default the straggler and the fastest; a collective picked by a click marks one event per rank,
the ones /api/trace/collective names; the picked ranks live in the URL and come back from it;
single-worker runs have no ranks control."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from browser_pages import NEXT_FRAMES, css_testid
from runs import DDP4, RESNET, STRAGGLER, Run, each
from test_trace import trace  # noqa: F401 (the fixture: the Trace page at 1400 x 900)

pytestmark = pytest.mark.browser

ID_STRIDE = 2 ** 32   # lib/rankview.js: rank number k's ids are k * ID_STRIDE + id


@pytest.fixture(scope="module")
def dist(api) -> dict:
    return api(f"/api/distributed?run={STRAGGLER.name}")


def worker_of(dist: dict, rank: int) -> str:
    return next(r["worker"] for r in dist["ranks"] if r["rank"] == rank)


def shown_lanes(api, dist: dict, ranks: list[int], run: Run = STRAGGLER) -> list[dict]:
    """The page's lanes, as the layout stacks them: each rank's in its order, ids k * ID_STRIDE + id,
    a header wherever the rank or the process changes, host lanes folded to one row (the default)."""
    out = []
    for k, rank in enumerate(ranks):
        lanes = api(f"/api/trace/lanes?run={run.name}&worker={worker_of(dist, rank)}")["lanes"]
        out += [{**lane, "id": k * ID_STRIDE + lane["id"], "process": f"{rank}:{lane['process']}",
                 "rows": lane["rows"] if lane["kind"] == "gpu" else 1} for lane in lanes]
    return out


@pytest.mark.parametrize("run", each(STRAGGLER, DDP4))
def test_two_ranks_default_to_the_straggler_and_the_fastest(trace, api, run, shots):
    dist = api(f"/api/distributed?run={run.name}")
    trace.open(f"run={run.name}&ranks=auto").wait_drawn()
    clock = dist["clock"]
    ranks = [clock["straggler"], clock["fastest"]]
    if run == STRAGGLER:
        assert ranks == [1, 0]
    picked = f"{ranks[0]},{ranks[1]}"
    expect(trace.page).to_have_url(re.compile(rf"[?&]ranks={ranks[0]}%2C{ranks[1]}(&|$)"))
    expect(trace.part("toggle-ranks")).to_be_checked()
    expect(trace.part("trace-ranks")).to_have_value(picked)
    expect(trace.part("toggle-counters")).to_be_disabled()
    lanes = shown_lanes(api, dist, ranks, run)
    assert trace.lane_labels() == [lane["name"] for lane in lanes]
    headers = trace.process_labels()
    assert len(headers) == len(dict.fromkeys(lane["process"] for lane in lanes))
    offset = {r["rank"]: r["offset_us"] for r in clock["ranks"]}
    note = trace.part("trace-ranks-note").inner_text()
    for rank in ranks:
        own = [h for h in headers if h.startswith(f"Rank {rank} · ")]
        assert own, headers
        # The reference rank says so; the other gives its offset, and the note how sure it is.
        if rank == clock["reference"]:
            assert all(h.startswith(f"Rank {rank} · reference · ") for h in own), own
            assert f"Rank {rank} ({worker_of(dist, rank)}): the reference clock" in note
        else:
            sign = re.escape("+" if offset[rank] >= 0 else "−")
            assert all(re.match(rf"Rank {rank} · {sign}[\d.]+ us · ", h) for h in own), own
            assert re.search(rf"Rank {rank} \({worker_of(dist, rank)}\): {sign}[\d.]+ us ±[\d.]+ us from "
                             rf"{dist['stragglers']['collectives']} collectives", note), note
    assert_labels_whole(trace)
    # Both ranks' GPU lanes are drawn: labelled, in the label column, with boxes on the canvas.
    gpu = trace.part("lane-labels").locator(".tl-lane-gpu")
    gpu_lanes = {int(gpu.nth(i).get_attribute("data-lane")) // ID_STRIDE for i in range(gpu.count())}
    assert gpu_lanes == {0, 1}
    assert trace.drawn_boxes() > 100
    start, end = trace.window()
    assert start == pytest.approx(min(api(f"/api/trace/lanes?run={run.name}&worker={worker_of(dist, r)}")["start_us"]
                                      - offset[r] for r in ranks), abs=1e-3)
    trace.screenshot(shots, f"trace_ranks_{run.name}")
    trace.page.set_viewport_size({"width": 1000, "height": 760})
    trace.wait_idle()
    assert_labels_whole(trace)
    trace.screenshot(shots, f"trace_ranks_{run.name}_1000")


def assert_labels_whole(trace) -> None:
    """Headers and lane names are whole in the label column (none cut off)."""
    for label in trace.part("lane-labels").locator(f'{css_testid("process-label")}, {css_testid("lane-label")} span').all():
        assert label.evaluate("(e) => e.scrollWidth <= e.clientWidth"), label.inner_text()


def test_clicking_a_collective_marks_it_on_every_rank(trace, api, dist, shots):
    ranks = [1, 0]
    worker = worker_of(dist, 1)
    offset = {r["rank"]: r["offset_us"] for r in dist["clock"]["ranks"]}
    kernels = api(f"/api/trace/search?run={STRAGGLER.name}&worker={worker}&q=ncclDevKernel")["matches"]
    kernel = kernels[len(kernels) // 2]
    answer = api(f"/api/trace/collective?run={STRAGGLER.name}&worker={worker}&id={kernel['id']}"
                 f"&workers={worker},{worker_of(dist, 0)}")
    expected = [k * ID_STRIDE + call["id"] for k, call in enumerate(answer["calls"])]
    # A window around the collective on the common clock.
    t = kernel["start_us"] - offset[1]
    trace.open(f"run={STRAGGLER.name}&ranks=1,0&start_us={t - 2000}&end_us={t + 2000}").wait_drawn()
    lane = next(l for l in shown_lanes(api, dist, ranks) if l["id"] == kernel["lane"])
    event = api(f"/api/trace/event?run={STRAGGLER.name}&worker={worker}&id={kernel['id']}")
    x, y = trace.point_of(shown_lanes(api, dist, ranks), lane["id"], event["row"], t + kernel["dur_us"] / 2)
    trace.page.mouse.click(x, y)
    trace.wait_details(kernel["id"])
    overlay = trace.part("trace-overlay")
    expect(overlay).to_have_attribute("data-collective", ",".join(str(i) for i in expected))
    # One event per rank, and the one on the other rank is an NCCL kernel ending with it on the common clock.
    assert sorted(i // ID_STRIDE for i in expected) == [0, 1]
    other = api(f"/api/trace/event?run={STRAGGLER.name}&worker={worker_of(dist, 0)}&id={answer['calls'][1]['id']}")
    assert other["name"].startswith("ncclDevKernel")
    assert other["start_us"] + other["dur_us"] - offset[0] == pytest.approx(
        kernel["start_us"] + kernel["dur_us"] - offset[1], abs=15.0)
    assert trace.query()["select"] == str(kernel["id"])
    # Both ranks' GPU lanes in view (the details panel takes some of the timeline's height).
    trace.part("timeline-body").evaluate("(b) => { b.scrollTop = b.scrollHeight; }")
    trace.page.evaluate(NEXT_FRAMES)
    trace.screenshot(shots, "trace_ranks_collective")


def test_picked_ranks_round_trip_through_the_url(trace, api, dist):
    trace.open(f"run={STRAGGLER.name}&ranks=0,1").wait_drawn()
    assert trace.query()["ranks"] == "0,1"
    assert trace.process_labels()[0].startswith("Rank 0 · reference · ")
    # Another pick: one rank.
    box = trace.part("trace-ranks")
    box.fill("1")
    box.press("Enter")
    expect(trace.page).to_have_url(re.compile(r"[?&]ranks=1(&|$)"))
    trace.wait_drawn()
    assert all(h.startswith("Rank 1 ·") for h in trace.process_labels())
    # A reload restores it.
    trace.page.reload()
    trace.wait_drawn()
    assert trace.query()["ranks"] == "1"
    expect(trace.part("trace-ranks")).to_have_value("1")
    assert all(h.startswith("Rank 1 ·") for h in trace.process_labels())
    # Off: back to the worker's own timeline.
    trace.part("toggle-ranks").uncheck()
    expect(trace.page).not_to_have_url(re.compile(r"[?&]ranks="))
    trace.wait_drawn()
    worker = trace.query()["worker"]
    own = api(f"/api/trace/lanes?run={STRAGGLER.name}&worker={worker}")["lanes"]
    assert trace.process_labels() == list(dict.fromkeys(lane["process"] for lane in own))
    expect(trace.part("trace-ranks-control")).to_be_visible()
    expect(trace.part("trace-ranks")).to_be_hidden()


def test_a_single_worker_run_has_no_ranks_control(trace):
    trace.open(f"run={RESNET.name}").wait_drawn()
    expect(trace.part("trace-ranks-control")).to_be_hidden()
    expect(trace.part("toggle-counters")).to_be_enabled()
