"""The Trace page in Chromium: the canvas timeline draws the lanes the API lists, zooms and pans
with keys, wheel and drag (each change asks for its window), shows an event's details and follows
its links, searches, draws counters, and restores all of it from the URL."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlparse

import pytest
from playwright.sync_api import expect

from browser_pages import TracePage, css_testid
from runs import FIXTURES, LEGACY, RESNET, TWO_SPANS, V100, Run, each
from serving import serving

pytestmark = pytest.mark.browser

SEL = RESNET.sel()


@pytest.fixture
def trace(page, server) -> TracePage:
    page.set_viewport_size({"width": 1400, "height": 900})
    return TracePage(page, server)


@pytest.fixture(scope="module")
def lanes(api) -> dict:
    return api(f"/api/trace/lanes?{SEL}")


def gemm_kernel(api, run: Run) -> dict:
    """A GEMM kernel on a GPU stream of the run's first span, as search lists it."""
    gpu = {lane["id"] for lane in api(f"/api/trace/lanes?{run.sel()}")["lanes"] if lane["kind"] == "gpu"}
    matches = api(f"/api/trace/search?{run.sel()}&q=gemm")["matches"]
    return next(m for m in matches if m["lane"] in gpu)


@pytest.fixture(scope="module")
def kernel(api) -> dict:
    return gemm_kernel(api, RESNET)


def window_params(url: str) -> tuple[float, float]:
    query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
    return float(query["start_us"]), float(query["end_us"])


def test_trace_renders_lanes_ruler_and_boxes(trace, lanes, shots):
    trace.open(f"run={RESNET.name}").wait_drawn()
    # Every lane has a label, under its process's header, in the API's order.
    assert trace.lane_labels() == [lane["name"] for lane in lanes["lanes"]]
    # A lane's name is next to its first row, however tall the lane.
    first = trace.part("lane-labels").locator(css_testid("lane-label")).first
    assert first.locator("span").bounding_box()["y"] - first.bounding_box()["y"] < 8
    processes = list(dict.fromkeys(lane["process"] for lane in lanes["lanes"]))
    assert trace.process_labels() == processes
    # The whole trace is on screen, drawn: boxes, merged blocks, painted pixels.
    start, end = trace.window()
    assert start == pytest.approx(lanes["start_us"], abs=1e-3) and end == pytest.approx(lanes["end_us"], abs=1e-3)
    assert trace.drawn_boxes() > 100
    assert int(trace.data("drawn-merged")) > 0
    assert trace.painted_pixels() > 10_000
    assert trace.painted_pixels("trace-ruler") > 1000
    expect(trace.part("trace-range")).to_contain_text("Whole trace")
    legend = trace.part("trace-legend").inner_text()
    assert "Kernel" in legend and "CPU op" in legend and "Merged" in legend
    # Thousands of launches at full view: counted in the key, not drawn.
    expect(trace.part("trace-legend").locator(css_testid("legend-flow-note"))).to_contain_text("zoom in to draw them")
    expect(trace.part("trace-overlay")).to_have_attribute("data-window-flows", "0")
    expect(trace.part("download-trace")).to_have_attribute(
        "href", f"/api/trace/raw?{SEL}")
    expect(trace.part("event-details")).to_be_hidden()
    expect(trace.about().locator("summary")).to_have_text("How these numbers are computed")
    assert trace.selection()["view"] == "trace"
    trace.screenshot(shots, "trace_full")
    trace.page.set_viewport_size({"width": 1000, "height": 760})
    trace.wait_idle()
    trace.screenshot(shots, "trace_full_1000")
    assert trace.page.errors == []


def test_trace_keys_zoom_and_pan_with_a_window_request_each(trace, lanes):
    trace.open(SEL).wait_drawn()
    full = lanes["end_us"] - lanes["start_us"]
    requests = []
    trace.page.on("request", lambda r: requests.append(r.url) if "/api/trace/window?" in r.url else None)
    for _ in range(3):
        trace.page.keyboard.press("w")
    trace.wait_idle()
    start, end = window_params(trace.page.url)
    assert end - start == pytest.approx(full * 0.8 ** 3, rel=1e-3)
    # The last request (a slow machine may send one between key presses) covers the view at the
    # view's resolution (with context either side).
    assert requests
    sent = {k: v[0] for k, v in parse_qs(urlparse(requests[-1]).query).items()}
    assert float(sent["start_us"]) <= start + 1e-3 and float(sent["end_us"]) >= end - 1e-3
    width = trace.part("trace-stage").bounding_box()["width"]
    per_px = (end - start) / width
    assert (float(sent["end_us"]) - float(sent["start_us"])) / int(sent["width_px"]) == pytest.approx(per_px, rel=0.02)
    assert trace.window() == pytest.approx((start, end), abs=1e-3)

    trace.page.keyboard.press("d")  # pan right by 15 % of the span
    trace.wait_idle()
    moved = window_params(trace.page.url)
    assert moved[0] - start == pytest.approx(0.15 * (end - start), rel=1e-3)
    trace.page.keyboard.press("s")
    trace.wait_idle()
    wider = window_params(trace.page.url)
    assert wider[1] - wider[0] == pytest.approx((end - start) / 0.8, rel=1e-3)
    windows = int(trace.data("windows"))
    for _ in range(12):
        trace.page.keyboard.press("w")
    trace.wait_idle()
    assert int(trace.data("windows")) > windows
    assert trace.drawn_boxes() > 0
    # Reload: the same window.
    url_window = window_params(trace.page.url)
    trace.page.reload()
    trace.wait_drawn()
    assert trace.window() == pytest.approx(url_window, abs=1e-3)
    # Reset zoom: the whole trace, and the URL forgets the window.
    trace.part("reset-zoom").click()
    trace.wait_idle()
    assert "start_us" not in trace.query() and "end_us" not in trace.query()
    assert trace.window() == pytest.approx((lanes["start_us"], lanes["end_us"]), abs=1e-3)
    assert trace.page.errors == []


def test_trace_wheel_zooms_around_the_pointer_and_drag_pans(trace, lanes):
    trace.open(SEL).wait_drawn()
    box = trace.part("trace-stage").bounding_box()
    start, end = trace.window()
    x = box["x"] + box["width"] * 0.25
    under = start + (end - start) * 0.25
    trace.page.mouse.move(x, box["y"] + 40)
    trace.page.mouse.wheel(0, -400)
    trace.wait_idle()
    s2, e2 = trace.window()
    assert e2 - s2 < (end - start) * 0.7
    # The time under the pointer stayed under it.
    assert s2 + (e2 - s2) * 0.25 == pytest.approx(under, abs=(end - start) * 1e-3)

    # A plain drag to the left moves later times into view by as many pixels.
    trace.page.mouse.move(x + 300, box["y"] + 40)
    trace.page.mouse.down()
    trace.page.mouse.move(x + 200, box["y"] + 40, steps=4)
    trace.page.mouse.move(x + 100, box["y"] + 40, steps=4)
    trace.page.mouse.up()
    trace.wait_idle()
    s3, e3 = trace.window()
    assert s3 - s2 == pytest.approx(200 * (e2 - s2) / box["width"], rel=0.02)
    assert e3 - s3 == pytest.approx(e2 - s2, rel=1e-6)
    expect(trace.part("event-details")).to_be_hidden()  # a drag is not a click

    # Shift+drag selects a range and zooms to it.
    trace.page.keyboard.down("Shift")
    trace.page.mouse.move(box["x"] + 100, box["y"] + 40)
    trace.page.mouse.down()
    trace.page.mouse.move(box["x"] + 200, box["y"] + 40, steps=5)
    trace.page.mouse.move(box["x"] + 300, box["y"] + 40, steps=5)
    trace.page.mouse.up()
    trace.page.keyboard.up("Shift")
    trace.wait_idle()
    s4, e4 = trace.window()
    per_px = (e3 - s3) / box["width"]
    assert s4 == pytest.approx(s3 + 100 * per_px, abs=2 * per_px)
    assert e4 == pytest.approx(s3 + 300 * per_px, abs=2 * per_px)
    assert trace.page.errors == []


def test_trace_ruler_drag_zooms_to_a_range(trace):
    trace.open(SEL).wait_drawn()
    ruler = trace.part("trace-ruler").bounding_box()
    start, end = trace.window()
    per_px = (end - start) / ruler["width"]
    y = ruler["y"] + ruler["height"] / 2
    trace.page.mouse.move(ruler["x"] + 400, y)
    trace.page.mouse.down()
    trace.page.mouse.move(ruler["x"] + 300, y, steps=5)
    trace.page.mouse.move(ruler["x"] + 200, y, steps=5)
    trace.page.mouse.up()
    trace.wait_idle()
    s, e = trace.window()
    assert s == pytest.approx(start + 200 * per_px, abs=2 * per_px)
    assert e == pytest.approx(start + 400 * per_px, abs=2 * per_px)
    assert trace.page.errors == []


def test_trace_kernel_details_follow_the_launch_link(trace, api, kernel, shots):
    trace.open(f"{SEL}&select={kernel['id']}").wait_drawn()
    panel = trace.wait_details(kernel["id"])
    expect(panel.locator(css_testid("event-title"))).to_have_text(kernel["name"])
    expect(panel.locator(css_testid("event-kind"))).to_have_text("Kernel")
    expect(panel.locator(css_testid("event-facts"))).to_contain_text("GPU 0")
    expect(panel.locator(css_testid("event-fields"))).to_contain_text("grid")
    # Opened by id alone: the view zooms to the kernel, with context around it.
    start, end = trace.window()
    assert start < kernel["start_us"] and kernel["start_us"] + kernel["dur_us"] < end
    assert end - start < 20 * max(kernel["dur_us"], 20)
    assert window_params(trace.page.url) == pytest.approx((start, end), abs=1e-3)
    # The launching runtime call: a link, and a flow arrow to it.
    event = api(f"/api/trace/event?{SEL}&id={kernel['id']}")
    launcher = next(link for link in event["links"] if link["relation"] == "launched by")
    link = trace.links("launched by")
    expect(link).to_have_count(1)
    expect(link).to_contain_text(launcher["name"])
    expect(trace.part("trace-overlay")).to_have_attribute("data-flows", str(len(event["links"])))
    trace.wait_idle()
    # Zoomed in this far, the window's own arrows are drawn too, with their key.
    assert int(trace.part("trace-overlay").get_attribute("data-window-flows")) >= 1
    expect(trace.part("trace-legend").locator(css_testid("legend-flow")).first).to_contain_text("Launch")
    trace.screenshot(shots, "trace_kernel_details")

    link.click()
    panel = trace.wait_details(launcher["id"])
    expect(panel.locator(css_testid("event-title"))).to_have_text(launcher["name"])
    expect(panel.locator(css_testid("event-kind"))).to_have_text("Runtime")
    assert trace.query()["select"] == str(launcher["id"])
    trace.wait_idle()
    start, end = trace.window()
    assert start < launcher["start_us"] < end
    # ... and back: the runtime call launches the kernel.
    back = trace.links("launches").filter(has_text=kernel["name"][:30])
    expect(back).to_have_count(1)
    back.click()
    trace.wait_details(kernel["id"])
    # Every flow type off: no arrows but the operator tree's link; in the URL.
    for toggle in trace.part("flow-types").locator(css_testid("toggle-flow")).all():
        toggle.uncheck()
    trace.wait_idle()
    tree = [link for link in event["links"] if link["relation"] in ("operator", "parent")]
    expect(trace.part("trace-overlay")).to_have_attribute("data-flows", str(len(tree)))
    expect(trace.part("trace-overlay")).to_have_attribute("data-window-flows", "0")
    expect(trace.part("trace-legend").locator(css_testid("legend-flow"))).to_have_count(0)
    assert trace.query()["flows"] == "0"
    # Esc closes the details and forgets the selection.
    trace.page.keyboard.press("Escape")
    expect(trace.details()).to_be_hidden()
    assert "select" not in trace.query()
    assert trace.page.errors == []


def test_trace_click_selects_the_box_under_the_pointer(trace, kernel, lanes, shots):
    pad = 3 * max(kernel["dur_us"], 1)
    # Nothing folded: point_of places rows as the API lists them.
    trace.open(f"{SEL}&start_us={kernel['start_us'] - pad}&end_us={kernel['start_us'] + kernel['dur_us'] + pad}"
               "&collapse=none&stacks=all")
    trace.wait_drawn()
    expect(trace.details()).to_be_hidden()
    lane = next(lane for lane in lanes["lanes"] if lane["id"] == kernel["lane"])
    for row in range(lane["rows"]):  # the kernel's row is not in search results: try each
        x, y = trace.point_of(lanes["lanes"], kernel["lane"], row, kernel["start_us"] + kernel["dur_us"] / 2)
        trace.page.mouse.move(x, y)
        tooltip = trace.part("trace-tooltip")
        if tooltip.is_visible() and kernel["name"] in tooltip.inner_text():
            break
    else:
        pytest.fail("no row of the kernel's lane shows it under the pointer")
    expect(tooltip).to_contain_text("Kernel ·")
    trace.screenshot(shots, "trace_zoomed_kernels_hover")
    trace.page.mouse.click(x, y)
    trace.wait_details(kernel["id"])
    assert trace.query()["select"] == str(kernel["id"])
    # A double-click zooms to the event: it fills most of the plot. (The details panel beside the
    # timeline narrowed the plot: find the kernel again.)
    x, y = trace.point_of(lanes["lanes"], kernel["lane"], row, kernel["start_us"] + kernel["dur_us"] / 2)
    trace.page.mouse.dblclick(x, y)
    trace.wait_idle()
    start, end = trace.window()
    assert end - start == pytest.approx(kernel["dur_us"] / 0.85, rel=1e-3)
    assert start < kernel["start_us"] < kernel["start_us"] + kernel["dur_us"] < end
    # S zooms out again, F frames the selection with context around it.
    trace.page.keyboard.press("s")
    trace.page.keyboard.press("f")
    trace.wait_idle()
    start, end = trace.window()
    assert end - start == pytest.approx(max(kernel["dur_us"] / 0.4, 20), rel=1e-3)
    # A click on empty space (the first process's header) clears the selection.
    trace.part("timeline-body").evaluate("(b) => { b.scrollTop = 0; }")
    body = trace.part("timeline-body").bounding_box()
    trace.page.mouse.click(body["x"] + body["width"] - 40, body["y"] + trace.PROCESS_PX / 2)
    expect(trace.details()).to_be_hidden()
    assert trace.page.errors == []


def test_trace_search_steps_through_matches(trace, api, shots):
    trace.open(SEL).wait_drawn()
    found = api(f"/api/trace/search?{SEL}&q=cudaLaunchKernel")
    total, matches = found["total"], found["matches"]
    assert total > 3
    trace.search("cudaLaunchKernel")
    expect(trace.search_count()).to_have_text(f"– of {total:,}")
    trace.part("trace-search").press("Enter")
    trace.wait_details(matches[0]["id"])
    expect(trace.search_count()).to_have_text(f"1 of {total:,}")
    assert trace.query()["q"] == "cudaLaunchKernel"
    assert trace.query()["select"] == str(matches[0]["id"])
    trace.wait_idle()
    start, end = trace.window()
    assert start < matches[0]["start_us"] and matches[0]["start_us"] + matches[0]["dur_us"] < end
    trace.part("search-next").click()
    trace.wait_details(matches[1]["id"])
    expect(trace.search_count()).to_have_text(f"2 of {total:,}")
    trace.part("search-prev").click()
    trace.wait_details(matches[0]["id"])
    trace.part("search-prev").click()  # wraps to the last match listed
    trace.wait_details(matches[-1]["id"])
    expect(trace.search_count()).to_contain_text(f"{len(matches):,} of {total:,}")
    trace.wait_idle()
    trace.screenshot(shots, "trace_search")
    # Reload: the query, and which match is selected.
    trace.page.reload()
    trace.wait_drawn()
    expect(trace.part("trace-search")).to_have_value("cudaLaunchKernel")
    expect(trace.search_count()).to_contain_text(f"{len(matches):,} of {total:,}")
    # A bad regular expression: the server's message, calmly.
    trace.part("trace-regex").check()
    trace.search("cuda(")
    expect(trace.search_count()).to_contain_text(re.compile("not a valid .*regular expression"))
    assert trace.query()["regex"] == "1"
    # No match.
    trace.part("trace-regex").uncheck()
    trace.search("no-such-event-xyz")
    expect(trace.search_count()).to_have_text("No matches")
    # Enter right after typing (before the typing's own search answers) goes to the first match.
    conv = api(f"/api/trace/search?{SEL}&q=aten::conv2d")["matches"][0]
    trace.search("aten::conv2d")
    trace.part("trace-search").press("Enter")
    trace.wait_details(conv["id"])
    assert [e for e in trace.page.errors if "status of 400" not in e] == []


def test_trace_link_with_a_name_opens_its_first_match(trace, api, kernel):
    # As the Kernel view's "Trace" link does: the full name, no window, nothing selected.
    matches = api(f"/api/trace/search?{SEL}&q={quote(kernel['name'])}")
    trace.open(f"{SEL}&q={quote(kernel['name'])}").wait_drawn()
    trace.wait_details(matches["matches"][0]["id"])
    expect(trace.search_count()).to_have_text(f"1 of {matches['total']:,}")
    trace.wait_idle()
    start, end = trace.window()
    first = matches["matches"][0]
    assert start < first["start_us"] and first["start_us"] + first["dur_us"] < end
    assert trace.page.errors == []


def test_trace_counters_toggle_draws_tracks(trace, api, shots):
    trace.open(SEL).wait_drawn()
    expect(trace.part("counter-tracks")).to_be_hidden()
    series = api(f"/api/trace/counters?{SEL}&width_px=100")["series"]
    assert series
    trace.part("toggle-counters").check()
    expect(trace.part("counter-tracks")).to_be_visible()
    expect(trace.part("counter-labels").locator(css_testid("counter-label"))).to_have_count(len(series))
    expect(trace.part("counter-canvas")).to_have_attribute("data-tracks", str(len(series)))
    expect(trace.part("counter-labels")).to_contain_text("GPU 0 utilization")
    assert trace.query()["counters"] == "1"
    trace.wait_idle()
    assert trace.painted_pixels("counter-canvas") > 1000
    # Hover: the value at the pointer.
    box = trace.part("counter-canvas").bounding_box()
    trace.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 10)
    expect(trace.part("trace-tooltip")).to_contain_text(series[0]["name"])
    expect(trace.part("trace-tooltip")).to_contain_text("%")
    trace.screenshot(shots, "trace_counters")
    # Zooming asks for counters of the new window too.
    with trace.page.expect_request(re.compile(r"/api/trace/counters\?")):
        trace.page.keyboard.press("w")
        trace.page.keyboard.press("w")
    trace.page.reload()
    trace.wait_drawn()
    expect(trace.part("counter-tracks")).to_be_visible()
    trace.part("toggle-counters").uncheck()
    expect(trace.part("counter-tracks")).to_be_hidden()
    assert "counters" not in trace.query()
    assert trace.page.errors == []


def test_trace_deep_link_restores_window_and_selection(trace, api, kernel, shots):
    event = api(f"/api/trace/event?{SEL}&id={kernel['id']}")
    start = kernel["start_us"] - 40
    end = kernel["start_us"] + kernel["dur_us"] + 60
    trace.open(f"{SEL}&start_us={start}&end_us={end}&select={kernel['id']}").wait_drawn()
    assert trace.window() == pytest.approx((start, end), abs=1e-3)
    panel = trace.wait_details(kernel["id"])
    expect(panel.locator(css_testid("event-title"))).to_have_text(event["name"])
    assert window_params(trace.page.url) == pytest.approx((start, end), abs=1e-3)
    assert trace.drawn_boxes() > 0
    trace.page.set_viewport_size({"width": 1000, "height": 800})
    trace.wait_idle()
    trace.screenshot(shots, "trace_kernel_details_1000")
    assert trace.page.errors == []


def test_trace_other_span_drops_the_window_and_selection(trace, api):
    # Span 1's window and event, then span 2 chosen in the left panel: span 2's whole trace, nothing selected.
    kernel = gemm_kernel(api, TWO_SPANS)
    trace.open(f"{TWO_SPANS.sel()}&start_us={kernel['start_us'] - 50}&end_us={kernel['start_us'] + 250}"
               f"&select={kernel['id']}")
    trace.wait_drawn()
    trace.wait_details(kernel["id"])
    trace.choose("span", "2")
    expect(trace.canvas()).to_have_attribute("data-windows", "1")
    trace.wait_idle()
    assert trace.query()["span"] == "2"
    assert not {"start_us", "end_us", "select"} & set(trace.query())
    expect(trace.details()).to_be_hidden()
    expect(trace.part("trace-range")).to_contain_text("Whole trace")
    assert trace.page.errors == []


def test_trace_unknown_event_shows_a_calm_message(trace):
    trace.open(f"{SEL}&select=987654321").wait_drawn()
    panel = trace.details()
    expect(panel.locator(css_testid("event-error"))).to_contain_text("No such event")
    expect(trace.canvas()).to_be_visible()
    assert [e for e in trace.page.errors if "status of 404" not in e] == []


def test_trace_lanes_fold_and_unfold(trace, lanes, shots):
    trace.open(f"{SEL}&stacks=all&collapse=none").wait_drawn()
    deep = max(lanes["lanes"], key=lambda lane: lane["rows"])
    label = trace.part("lane-labels").locator(f'{css_testid("lane-label")}[data-lane="{deep["id"]}"]')
    tall = label.bounding_box()["height"]
    assert tall == deep["rows"] * 14 + 6
    label.click()
    expect(label).to_have_attribute("aria-expanded", "false")
    assert label.bounding_box()["height"] == 20
    assert trace.query()["collapse"] == str(deep["id"])
    trace.wait_idle()
    assert trace.drawn_boxes() > 0
    # A process header folds all its lanes.
    trace.part("lane-labels").locator(css_testid("process-label")).first.click()
    first_process = lanes["lanes"][0]["process"]
    folded = sorted(lane["id"] for lane in lanes["lanes"] if lane["process"] == first_process and lane["rows"] > 0)
    assert [int(i) for i in trace.query()["collapse"].split(",")] == folded
    trace.wait_idle()
    trace.screenshot(shots, "trace_folded")
    trace.page.reload()
    trace.wait_drawn()
    expect(label).to_have_attribute("aria-expanded", "false")
    label.click()
    expect(label).to_have_attribute("aria-expanded", "true")
    assert label.bounding_box()["height"] == tall
    assert trace.page.errors == []


def test_trace_empty_trace_and_failed_window_are_calm(trace):
    # A trace without events: one sentence, no empty canvas.
    empty = {"start_us": 0, "end_us": 0, "lanes": [], "steps": [], "kinds": [], "warnings": []}
    trace.page.route(re.compile(r"/api/trace/lanes\?"), lambda route: route.fulfill(json=empty))
    trace.open(SEL)
    expect(trace.part("timeline-message")).to_have_text("This trace has no events to draw on a timeline.")
    expect(trace.part("timeline-body")).to_be_hidden()
    expect(trace.part("trace-ruler")).to_be_hidden()
    trace.page.unroute(re.compile(r"/api/trace/lanes\?"))
    # A window request that fails after the first draw: the message, and the old drawing stays.
    trace.page.reload()
    trace.wait_drawn()
    boxes = trace.drawn_boxes()
    failure = {"error": {"code": "internal", "message": "internal error; the server log has the details"}}
    trace.page.route(re.compile(r"/api/trace/window\?"), lambda route: route.fulfill(status=500, json=failure))
    trace.page.keyboard.press("w")
    trace.page.keyboard.press("w")
    expect(trace.part("timeline-message")).to_contain_text("internal error")
    assert trace.drawn_boxes() > 0 and boxes > 0
    expect(trace.part("timeline")).not_to_have_attribute("data-loading", "true")
    assert [e for e in trace.page.errors if "status of 500" not in e] == []


@pytest.mark.parametrize("run", each(LEGACY, V100))
def test_trace_legacy_trace_renders(trace, api, run):
    trace.open(run.sel()).wait_drawn()
    lanes = api(f"/api/trace/lanes?{run.sel()}")["lanes"]
    assert trace.lane_labels() == [lane["name"] for lane in lanes]
    assert trace.drawn_boxes() > 0
    assert trace.painted_pixels() > 10_000
    assert trace.page.errors == []


# ---------------------------------------------------------------- the 110 MB trace

BIG = FIXTURES / "big" / "gpt_big_bf16"


@pytest.fixture(scope="module")
def big_server(tmp_path_factory):
    """A `profboard` serving only the 110 MB GPT trace (its own server: the shared one stays quick to start)."""
    if not BIG.is_dir():
        pytest.skip(f"pans the shared fixture big/gpt_big_bf16 (110 MB), not found under {FIXTURES}")
    root = tmp_path_factory.mktemp("big_logdir")
    (root / "gpt_big_bf16").symlink_to(BIG, target_is_directory=True)
    log = tmp_path_factory.mktemp("big_server") / "profboard.log"
    with serving(root, tmp_path_factory.mktemp("big_cache"), log, ["gpt_big_bf16"], 180) as base:
        yield base


PAN_FRAMES = """() => new Promise((resolve) => {
    // Pans every animation frame (a key press each), and records the time between frames and
    // each frame's drawing time.
    const canvas = document.querySelector('[data-testid="trace-canvas"]');
    const frames = [], draws = [];
    let last = performance.now(), n = 0;
    function tick(now) {
        frames.push(now - last);
        draws.push(Number(canvas.dataset.drawMs));
        last = now;
        document.dispatchEvent(new KeyboardEvent("keydown", { key: n % 30 < 15 ? "d" : "a", bubbles: true }));
        n += 1;
        if (n < 62) requestAnimationFrame(tick); else resolve({ frames: frames.slice(2), draws: draws.slice(2) });
    }
    requestAnimationFrame(tick);
})"""


def test_trace_big_trace_pans_under_50_ms_a_frame(page, big_server, shots):
    page.set_viewport_size({"width": 1400, "height": 900})
    trace = TracePage(page, big_server)
    trace.open("run=gpt_big_bf16").wait_drawn()
    assert trace.drawn_boxes() > 0
    trace.screenshot(shots, "trace_big_full")
    page.keyboard.press("w")  # 80 % of the trace: room to pan both ways
    trace.wait_idle()
    timing = page.evaluate(PAN_FRAMES)
    frames = sorted(timing["frames"])
    draws = sorted(timing["draws"])
    p95 = frames[int(len(frames) * 0.95)]
    print(f"big trace pan: frame p50 {frames[len(frames) // 2]:.1f} ms, p95 {p95:.1f} ms; "
          f"draw p50 {draws[len(draws) // 2]:.1f} ms, max {draws[-1]:.1f} ms")
    assert p95 < 50
    assert draws[-1] < 50
    trace.wait_idle()
    assert trace.page.errors == []
