"""The Trace view's critical path in Chromium (issue 18 item 3), on loss_sync_before recorded with
CUDA sync events on an H200: the toggle draws the first step's path over the lanes (its events
outlined, joined) and frames the step, with the breakdown by bound beside it as the API has it;
another step is picked from the panel, the URL keeps it (`critical`), and toggling off clears it.
lib/critpath.js's shaping (marks, links, rows) is checked in the page on a hand-made path."""

from __future__ import annotations

import shutil

import pytest
from playwright.sync_api import expect

from browser_pages import TracePage, module_runner
from runs import DATA
from serving import serving

pytestmark = pytest.mark.browser

RUN = "loss_sync_before"
SEL = f"run={RUN}&worker=vm_489&span=1"


@pytest.fixture(scope="module")
def sync_server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("sync_logdir")
    shutil.copytree(DATA / "h200_sync" / RUN, root / RUN)
    log = tmp_path_factory.mktemp("sync_server") / "profboard.log"
    with serving(root, tmp_path_factory.mktemp("sync_cache"), log, [RUN], 120) as base:
        yield base


@pytest.fixture
def trace(page, sync_server) -> TracePage:
    page.set_viewport_size({"width": 1400, "height": 900})
    return TracePage(page, sync_server)


def path_of(trace: TracePage, step: str = "") -> dict:
    suffix = f"&step={step}" if step else ""
    return trace.page.request.get(f"{trace.base}/api/trace/critical_path?{SEL}{suffix}").json()


def shown_bounds(trace: TracePage) -> list[str]:
    rows = trace.part("critical-path-breakdown").locator("tr")
    return [rows.nth(i).get_attribute("data-bound") for i in range(rows.count())]


def test_toggle_draws_the_first_steps_path_with_its_breakdown(trace, shots):
    trace.open(SEL).wait_drawn()
    expect(trace.part("critical-path")).to_be_hidden()
    trace.part("toggle-critical-path").check()
    overlay = trace.part("trace-overlay")
    path = path_of(trace)
    expect(overlay).to_have_attribute("data-critical-path", path["step"])
    trace.wait_idle()
    assert trace.query()["critical"] == path["step"]
    # The step is framed (2% either side) and its events on screen are outlined.
    start, end = trace.window()
    assert start <= path["start_us"] and end >= path["end_us"]
    assert end - start <= 1.05 * path["total_us"]
    assert int(overlay.get_attribute("data-critical-marks")) == sum(s["lane"] is not None for s in path["segments"])
    # The breakdown: the bounds with time, largest first, as the API counts them.
    timed = {k[:-3]: v for k, v in path["breakdown"].items() if v > 0}
    expected = sorted(timed, key=lambda k: -timed[k])
    assert shown_bounds(trace) == expected
    assert {"gpu_compute", "cpu", "sync"} <= set(expected)
    expect(trace.part("critical-path-step")).to_have_value(path["step"])
    expect(trace.part("critical-path-approximated")).to_contain_text("host thread other than the main one")
    trace.screenshot(shots, "trace_critical_path_loss_sync_before")
    assert trace.page.errors == []


def test_another_step_from_the_panel_kept_in_the_url_and_toggled_off(trace, shots):
    trace.open(f"{SEL}&critical=").wait_drawn()
    overlay = trace.part("trace-overlay")
    first = path_of(trace)
    expect(overlay).to_have_attribute("data-critical-path", first["step"])
    last = first["steps"][-1]
    trace.part("critical-path-step").select_option(last)
    expect(overlay).to_have_attribute("data-critical-path", last)
    trace.wait_idle()
    assert trace.query()["critical"] == last
    start, end = trace.window()
    other = path_of(trace, last)
    assert start <= other["start_us"] and end >= other["end_us"]
    # Opened from the URL: the same step, the URL's window kept.
    window = (trace.query()["start_us"], trace.query()["end_us"])
    trace.page.reload()
    trace.wait_drawn()
    expect(overlay).to_have_attribute("data-critical-path", last)
    expect(trace.part("toggle-critical-path")).to_be_checked()
    assert (trace.query()["start_us"], trace.query()["end_us"]) == window
    trace.screenshot(shots, "trace_critical_path_last_step")
    trace.part("toggle-critical-path").uncheck()
    expect(trace.part("critical-path")).to_be_hidden()
    expect(overlay).not_to_have_attribute("data-critical-path", last)
    trace.wait_idle()
    assert "critical" not in trace.query()
    assert trace.page.errors == []


def test_critpath_lib_marks_links_and_rows(blank_page):
    run = module_runner(blank_page, {"critpath": "lib/critpath.js", "lanes": "lib/lanes.js"})
    # A thread of two rows and a stream of one, 14 px rows; 100 us on 1000 px.
    shaped = run("""(() => {
        const layout = lanes.laneLayout([
            {id: 0, process: "p", name: "thread", kind: "cpu", rows: 2, events: 1, stack_rows: 0},
            {id: 1, process: "gpu", name: "stream 7", kind: "gpu", rows: 1, events: 1, stack_rows: 0}], {});
        const path = {step: "1", start_us: 0, end_us: 100, total_us: 100, steps: ["1"], approximated: [],
            breakdown: {cpu_us: 30, launch_overhead_us: 10, gpu_compute_us: 50, kernel_overhead_us: 10},
            segments: [
                {kind: "host", bound: "cpu", start_us: 0, end_us: 20, id: 5, lane: 0, row: 1},
                {kind: "host", bound: "cpu", start_us: 20, end_us: 30, id: null, lane: null, row: null},
                {kind: "launch", bound: "launch_overhead", start_us: 30, end_us: 40, id: 6, lane: 0, row: 1},
                {kind: "gpu", bound: "gpu_compute", start_us: 40, end_us: 90, id: 7, lane: 1, row: 0},
                {kind: "gpu_gap", bound: "kernel_overhead", start_us: 90, end_us: 100, id: null, lane: null, row: null}]};
        return {drawn: critpath.pathMarks(path, layout, {start_us: 0, end_us: 100}, 1000, 0),
                rowPx: layout.rowPx, items: [...layout.lanes.values()].map((i) => i.y),
                rows: critpath.breakdownRows(path).map((r) => [r.id, r.us, r.share])};
    })()""")
    # Lane 0 at y 22 (under its process header): row 1 at 22 + 3 + 14 (+1 inside the row); lane 1 at
    # 22 + 34 + 22 = 78: row 0 at 78 + 3 (+1).
    assert shaped["items"] == [22, 78] and shaped["rowPx"] == 14
    assert shaped["drawn"]["marks"] == [
        {"x": 0, "y": 40, "w": 200, "bound": "cpu"},
        {"x": 300, "y": 40, "w": 100, "bound": "launch_overhead"},
        {"x": 400, "y": 82, "w": 500, "bound": "gpu_compute"},
    ]
    # Mid-row (y + 6): the host time between operators is crossed, the operator's end to the launch's
    # start; then the launch's end to its kernel's start.
    assert shaped["drawn"]["links"] == [[200, 46, 300, 46], [400, 46, 400, 88]]
    assert shaped["rows"] == [["gpu_compute", 50, 0.5], ["cpu", 30, 0.3], ["launch_overhead", 10, 0.1],
                              ["kernel_overhead", 10, 0.1]]


@pytest.mark.parametrize("width, height", [(1400, 900), (1000, 700)], ids=str)
def test_the_toggle_takes_no_toolbar_line_of_the_first_screen(trace, width, height):
    trace.page.set_viewport_size({"width": width, "height": height})
    trace.open(SEL).wait_drawn()
    toolbar = trace.part("controls")
    with_toggle = toolbar.bounding_box()["height"]
    trace.part("critical-path-control").evaluate("node => { node.hidden = true; }")
    assert toolbar.bounding_box()["height"] == with_toggle
