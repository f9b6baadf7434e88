"""The Trace view's first screen in Chromium (issue 22): the GPU streams and the main thread's
operators are on screen at 1400x900 and 1000x700, Python frames folded to three rows until
"Full Python stacks"; the details panel opens beside the lanes, not over them; the six counter
labels are whole; the ruler names the step the CPU lanes' ProfilerStep shows; each flow type
draws its own arrows, kept in the URL."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from playwright.sync_api import expect

from browser_pages import TracePage, css_testid
from runs import DATA, FSDP, RESNET, Run
from serving import serving

pytestmark = pytest.mark.browser

SIZES = [(1400, 900), (1000, 700)]
H200X2 = DATA / "h200x2"
DDP_RUNS = ["ddp_balanced", "ddp_straggler_rank0", "ddp_straggler_rank1", "fsdp"]


@pytest.fixture
def trace(page, server) -> TracePage:
    page.set_viewport_size({"width": 1400, "height": 900})
    return TracePage(page, server)


def lane_label(trace: TracePage, lane_id: int):
    return trace.part("lane-labels").locator(f'{css_testid("lane-label")}[data-lane="{lane_id}"]')


def inside(box: dict, frame: dict, slack: float = 0.5) -> bool:
    return (box["y"] >= frame["y"] - slack and box["y"] + box["height"] <= frame["y"] + frame["height"] + slack
            and box["x"] >= frame["x"] - slack and box["x"] + box["width"] <= frame["x"] + frame["width"] + slack)


def first_screen_lanes(api, run: Run) -> tuple[dict, dict, dict]:
    """The lanes answer, the main thread's lane (its ProfilerSteps') and the busiest GPU stream."""
    lanes = api(f"/api/trace/lanes?{run.sel()}")
    main = lanes["lanes"][lanes["steps"][0]["lane"]]
    gpu = max((lane for lane in lanes["lanes"] if lane["kind"] == "gpu"), key=lambda lane: lane["events"])
    return lanes, main, gpu


@pytest.mark.parametrize("run", [RESNET, FSDP], ids=lambda run: run.name)
@pytest.mark.parametrize("width, height", SIZES, ids=lambda v: str(v))
def test_first_screen_shows_the_gpu_and_the_main_threads_operators(trace, api, shots, run, width, height):
    lanes, main, gpu = first_screen_lanes(api, run)
    trace.page.set_viewport_size({"width": width, "height": height})
    trace.open(run.sel()).wait_drawn()
    body = trace.part("timeline-body").bounding_box()
    # The whole main thread's lane (its operators under the folded frames) and the GPU stream are on
    # screen without scrolling, inside the window.
    for lane in (main, gpu):
        label = lane_label(trace, lane["id"])
        expect(label).to_have_attribute("aria-expanded", "true")
        box = label.bounding_box()
        assert inside(box, body), (lane["name"], box, body)
        assert box["y"] + box["height"] <= height
    # Python frames: three rows, then the operators.
    operator_rows = main["rows"] - main["stack_rows"]
    shown_rows = min(main["stack_rows"], 3) + operator_rows
    assert lane_label(trace, main["id"]).bounding_box()["height"] == shown_rows * 14 + 6
    if main["stack_rows"] > 3:
        expect(trace.part("stacks-control")).to_be_visible()
    else:
        expect(trace.part("stacks-control")).to_be_hidden()
    trace.screenshot(shots, f"trace_first_screen_{run.name}_{width}")
    assert trace.page.errors == []


def test_full_python_stacks_unfold_every_frame_row_and_stay_in_the_url(trace, api):
    lanes, main, _ = first_screen_lanes(api, RESNET)
    assert main["stack_rows"] > 3
    trace.open(RESNET.sel()).wait_drawn()
    label = lane_label(trace, main["id"])
    folded = label.bounding_box()["height"]
    trace.part("toggle-stacks").check()
    assert label.bounding_box()["height"] == main["rows"] * 14 + 6 > folded
    assert trace.query()["stacks"] == "all"
    trace.wait_idle()
    assert trace.drawn_boxes() > 0
    trace.page.reload()
    trace.wait_drawn()
    expect(trace.part("toggle-stacks")).to_be_checked()
    assert label.bounding_box()["height"] == main["rows"] * 14 + 6
    trace.part("toggle-stacks").uncheck()
    assert label.bounding_box()["height"] == folded
    assert "stacks" not in trace.query()
    # Folding lanes by hand is kept over the first screen's choice (at 1400x900, none folded on
    # this trace), unfolding them all too.
    trace.open(RESNET.sel()).wait_drawn()
    assert "collapse" not in trace.query()
    lane_label(trace, main["id"]).click()
    assert trace.query()["collapse"] == str(main["id"])
    lane_label(trace, main["id"]).click()
    assert trace.query()["collapse"] == "none"
    assert trace.page.errors == []


@pytest.mark.parametrize("width, height", SIZES, ids=lambda v: str(v))
def test_details_open_beside_the_lanes_and_the_gpu_lane_stays_visible(trace, api, shots, width, height):
    _, main, gpu = first_screen_lanes(api, RESNET)
    kernel = next(m for m in api(f"/api/trace/search?{RESNET.sel()}&q=gemm")["matches"] if m["lane"] == gpu["id"])
    trace.page.set_viewport_size({"width": width, "height": height})
    trace.open(RESNET.sel()).wait_drawn()
    before = trace.part("timeline").bounding_box()
    trace.open(f"{RESNET.sel()}&select={kernel['id']}").wait_drawn()
    panel = trace.wait_details(kernel["id"])
    trace.wait_idle()
    timeline = trace.part("timeline").bounding_box()
    details = panel.bounding_box()
    # Beside the timeline (no overlap), which keeps its height.
    assert details["x"] >= timeline["x"] + timeline["width"]
    assert timeline["height"] == pytest.approx(before["height"], abs=1)
    body = trace.part("timeline-body").bounding_box()
    for lane in (main, gpu):
        assert inside(lane_label(trace, lane["id"]).bounding_box(), body), lane["name"]
    # The kernel is drawn, outlined, in the narrower plot.
    start, end = trace.window()
    assert start < kernel["start_us"] < end
    assert trace.drawn_boxes() > 0
    trace.screenshot(shots, f"trace_first_screen_details_{width}")
    assert trace.page.errors == []


# At 1000x700 the six tracks and the main thread's operators take the height: the GPU is scrolled to.
@pytest.mark.parametrize("width, height, gpu_shown", [(1400, 900, True), (1000, 700, False)], ids=["1400", "1000"])
def test_counter_labels_are_whole(trace, api, shots, width, height, gpu_shown):
    series = api(f"/api/trace/counters?{RESNET.sel()}&width_px=10")["series"]
    assert len(series) >= 6
    trace.page.set_viewport_size({"width": width, "height": height})
    trace.open(f"{RESNET.sel()}&counters=1").wait_drawn()
    labels = trace.part("counter-labels").locator(css_testid("counter-label"))
    expect(labels).to_have_count(len(series))
    box = trace.part("counter-tracks").bounding_box()
    for k in range(min(6, len(series))):
        label = labels.nth(k)
        assert inside(label.bounding_box(), box), series[k]["name"]
        # Neither the name nor the maximum is cut.
        for part in label.locator("div, span").all():
            assert part.evaluate("(n) => n.scrollWidth <= n.clientWidth && n.scrollHeight <= n.clientHeight")
    # The main thread's lane is on the first screen under the counters, and the GPU stream where it fits.
    _, main, gpu = first_screen_lanes(api, RESNET)
    body = trace.part("timeline-body").bounding_box()
    assert inside(lane_label(trace, main["id"]).bounding_box(), body)
    assert inside(lane_label(trace, gpu["id"]).bounding_box(), body) == gpu_shown
    trace.screenshot(shots, f"trace_first_screen_counters_{width}")
    assert trace.page.errors == []


@pytest.fixture(scope="module")
def ddp_server(tmp_path_factory):
    """A `profboard` serving the h200x2 runs (DDP balanced and with a straggler, FSDP): two ranks each."""
    root = tmp_path_factory.mktemp("h200x2_logdir")
    for name in DDP_RUNS:
        shutil.copytree(H200X2 / name, root / name)
    log = tmp_path_factory.mktemp("h200x2_server") / "profboard.log"
    with serving(root, tmp_path_factory.mktemp("h200x2_cache"), log, DDP_RUNS, 120) as base:
        yield base


def get_json(page, url: str) -> dict:
    return page.request.get(url).json()


@pytest.mark.parametrize("run", DDP_RUNS)
def test_ruler_names_the_step_the_cpu_lanes_show(page, ddp_server, run):
    page.set_viewport_size({"width": 1400, "height": 900})
    workers = get_json(page, f"{ddp_server}/api/runs")
    workers = next(r for r in workers["runs"] if r["name"] == run)["workers"]
    assert len(workers) == 2
    for worker in workers:
        sel = f"run={run}&worker={worker}"
        trace = TracePage(page, ddp_server)
        trace.open(sel).wait_drawn()
        named = json.loads(trace.part("trace-ruler").get_attribute("data-steps"))
        lanes = get_json(page, f"{ddp_server}/api/trace/lanes?{sel}")
        cpu = {lane["id"] for lane in lanes["lanes"] if lane["kind"] == "cpu"}
        found = get_json(page, f"{ddp_server}/api/trace/search?{sel}&q=ProfilerStep%23")["matches"]
        on_cpu = [m for m in found if m["lane"] in cpu]
        assert [n["label"] for n in named] == [f"Step {s['step']}" for s in lanes["steps"]]
        for label in named:
            # The CPU lane's ProfilerStep under the label's middle is the step the ruler names there.
            middle = (label["start_us"] + label["end_us"]) / 2
            under = [m for m in on_cpu if m["start_us"] <= middle <= m["start_us"] + m["dur_us"]]
            assert [m["name"] for m in under] == [label["label"].replace("Step ", "ProfilerStep#")], (worker, label)
            assert label["start_us"] == pytest.approx(under[0]["start_us"], abs=1e-3)
            assert label["end_us"] == pytest.approx(under[0]["start_us"] + under[0]["dur_us"], abs=1e-3)
    assert page.errors == []


def test_each_flow_type_toggles_its_own_arrows_and_round_trips_in_the_url(trace, api, shots):
    lanes = api(f"/api/trace/lanes?{FSDP.sel()}")
    assert lanes["flow_types"] == ["ac2g", "fwdbwd"]
    step = lanes["steps"][0]
    near = f"{FSDP.sel()}&start_us={step['host_start_us']}&end_us={step['host_start_us'] + 2000}"
    trace.open(near).wait_drawn()
    toggles = trace.part("flow-types").locator(css_testid("toggle-flow"))
    expect(toggles).to_have_count(2)
    ac2g, fwdbwd = (trace.part("flow-types").locator(f'{css_testid("toggle-flow")}[data-type="{t}"]')
                    for t in ("ac2g", "fwdbwd"))
    expect(ac2g).to_be_checked()
    expect(fwdbwd).to_be_checked()
    overlay = trace.part("trace-overlay")
    expect(overlay).to_have_attribute("data-window-flow-types", "ac2g,fwdbwd")
    both = int(overlay.get_attribute("data-window-flows"))
    trace.screenshot(shots, "trace_flow_types_both")

    with trace.page.expect_request(re.compile(r"/api/trace/window\?.*flows=ac2g")):
        fwdbwd.uncheck()
    trace.wait_idle()
    expect(overlay).to_have_attribute("data-window-flow-types", "ac2g")
    launches = int(overlay.get_attribute("data-window-flows"))
    assert 0 < launches < both
    assert trace.query()["flows"] == "ac2g"
    legend = trace.part("trace-legend").locator(css_testid("legend-flow"))
    expect(legend).to_have_count(1)
    expect(legend).to_contain_text("Launch")

    ac2g.uncheck()
    trace.wait_idle()
    expect(overlay).to_have_attribute("data-window-flows", "0")
    assert trace.query()["flows"] == "0"

    fwdbwd.check()
    trace.wait_idle()
    expect(overlay).to_have_attribute("data-window-flow-types", "fwdbwd")
    assert int(overlay.get_attribute("data-window-flows")) == both - launches
    assert trace.query()["flows"] == "fwdbwd"
    trace.screenshot(shots, "trace_flow_types_fwdbwd")
    # The URL brings the choice back.
    trace.page.reload()
    trace.wait_drawn()
    expect(ac2g).not_to_be_checked()
    expect(fwdbwd).to_be_checked()
    expect(overlay).to_have_attribute("data-window-flow-types", "fwdbwd")
    ac2g.check()
    trace.wait_idle()
    assert "flows" not in trace.query()
    expect(overlay).to_have_attribute("data-window-flows", str(both))
    # Over the whole first step, the forward -> backward arrows alone (the launches would be too many).
    trace.open(f"{FSDP.sel()}&start_us={step['host_start_us']}&end_us={step['host_end_us']}&flows=fwdbwd").wait_drawn()
    expect(overlay).to_have_attribute("data-window-flow-types", "fwdbwd")
    trace.screenshot(shots, "trace_flow_types_fwdbwd_step")
    # An older link's flows=0 draws none.
    trace.open(f"{near}&flows=0").wait_drawn()
    expect(ac2g).not_to_be_checked()
    expect(fwdbwd).not_to_be_checked()
    expect(overlay).to_have_attribute("data-window-flows", "0")
    assert trace.page.errors == []
