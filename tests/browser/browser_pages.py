"""Page helpers for the browser tests: the shell (left panel, messages) and one helper per view.

Elements are found by `data-view` and `data-testid` only, never by CSS classes or text layout.
Waits after an action rest on the page's own count of requests in flight or put off
(`<html data-pending>`, kept by lib/api.js), never on a guessed delay.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError


def css_testid(name: str) -> str:
    return f'[data-testid="{name}"]'


NEXT_FRAMES = "() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))"
# The shell shows the view's root and marks it busy until the view's mount() has drawn it.
# During a navigation the page may have no document element yet: not mounted (a link clicked just before
# made the wait throw instead of wait).
MOUNTED = """(view) => {
    const root = document.querySelector(`[data-view="${view}"]`);
    return document.documentElement?.dataset.pending === "0" && root !== null && !root.hidden
        && root.getAttribute("aria-busy") !== "true";
}"""


def wait_requests_done(page: Page) -> None:
    """Waits until the page has no request in flight or put off, then for what it draws on the next frame."""
    page.wait_for_function("document.documentElement?.dataset.pending === '0'")
    page.evaluate(NEXT_FRAMES)


def module_runner(page: Page, modules: dict[str, str], arg: str = "ARG"):
    """`run(expression, value=None)` evaluates `expression` on `page` with each of `modules` (name ->
    path under /static/js) imported under its name, and `value` passed in as `arg`. The page's body
    is emptied first: each test starts on a blank document."""
    page.evaluate("document.body.replaceChildren()")
    imports = "\n".join(f'const {name} = await import("/static/js/{path}");' for name, path in modules.items())

    def run(expression: str, value=None):
        return page.evaluate(f"async ({arg}) => {{ {imports}\n return ({expression}); }}", value)
    return run


class ShellPage:
    """The left panel and the main area's messages, common to every view."""

    view = ""

    def __init__(self, page: Page, base: str) -> None:
        self.page = page
        self.base = base

    # navigation
    def open(self, query: str = "") -> "ShellPage":
        self.page.goto(f"{self.base}/{self.view}{('?' + query) if query else ''}")
        return self

    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlparse(self.page.url).query).items()}

    # left panel
    def select(self, which: str) -> Locator:
        return self.page.locator(css_testid(f"{which}-select"))

    def choose(self, which: str, value: str) -> None:
        self.select(which).select_option(value)

    def selection(self) -> dict[str, str]:
        return {k: self.select(k).input_value() for k in ("run", "worker", "span", "view")}

    def run_status(self) -> Locator:
        return self.page.locator(css_testid("run-status"))

    # main area
    def root(self) -> Locator:
        return self.page.locator(f'[data-view="{self.view}"]')

    def part(self, name: str) -> Locator:
        """An element of the view by its data-testid."""
        return self.root().locator(css_testid(name))

    def error(self) -> Locator:
        return self.page.locator(css_testid("error"))

    def about(self) -> Locator:
        return self.page.locator(css_testid("about"))

    def wait_idle(self) -> None:
        wait_requests_done(self.page)

    def wait_mounted(self) -> None:
        """Waits, checking every frame, until the view is mounted and no request is pending. A view's
        wait_drawn starts with it: expect() checks only every half second after its first tries, so
        its expectations then hold at the first check instead of up to 0.5 s after the fact."""
        try:
            self.page.wait_for_function(MOUNTED, arg=self.view, timeout=10_000)
        except PlaywrightTimeoutError:
            pass  # the expectations that follow say what is missing

    def screenshot(self, directory: Path, name: str, full: bool = False) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.png"
        if full:
            # The main area scrolls inside the window; a tall viewport shows the whole view.
            height = self.page.evaluate("document.querySelector('main').scrollHeight") + 60
            self.page.set_viewport_size({"width": self.page.viewport_size["width"], "height": max(800, height)})
        self.wait_idle()
        # Transitions (the busy fade) are finished, not caught halfway.
        self.page.screenshot(path=str(path), animations="disabled")
        return path


class OverviewPage(ShellPage):
    view = "overview"

    def wait_drawn(self) -> "OverviewPage":
        """Waits until both charts hold Plotly SVG and the view is no longer busy."""
        self.wait_mounted()
        expect(self.part("step-chart").locator(".main-svg").first).to_be_attached()
        expect(self.part("breakdown-pie").locator(".main-svg").first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        return self

    def gpu_text(self) -> str:
        return self.part("gpu-summary").inner_text()

    def table_steps(self) -> list[str]:
        """The first column of the per-step table's body (step ids)."""
        return self.part("step-table").locator("tbody tr td:first-child").all_inner_texts()

    def table_totals(self) -> list[str]:
        """The second column of the per-step table's body (total step times)."""
        return self.part("step-table").locator("tbody tr td:nth-child(2)").all_inner_texts()


class TableViewPage(ShellPage):
    """A view of controls (group by, top N, search), pies and one paginated table: operator, kernel."""

    pies: tuple[str, ...] = ()
    table_testid = ""

    def wait_drawn(self) -> "TableViewPage":
        """Waits until every pie holds a chart (or its empty note), the table is there and the view is idle."""
        self.wait_mounted()
        expect(self.root()).to_be_visible()
        for pie in self.pies:
            expect(self.part(pie).locator(".main-svg, p").first).to_be_attached()
        expect(self.part(self.table_testid).locator("table, p").first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        return self

    def table(self) -> Locator:
        return self.part(self.table_testid)

    def rows(self) -> Locator:
        return self.table().locator("tbody tr")

    def names(self) -> list[str]:
        """The first column (names) of the rows on screen, in full (cells cut them with CSS only)."""
        return self.table().locator("tbody tr td:first-child").all_inner_texts()

    def column(self, label: str) -> list[str]:
        """The texts of the column whose header reads `label`, for the rows on screen."""
        headers = [h.strip() for h in self.table().locator("thead th").all_inner_texts()]
        index = headers.index(label) + 1
        return self.table().locator(f"tbody tr td:nth-child({index})").all_inner_texts()

    def headers(self) -> list[str]:
        return [" ".join(h.split()) for h in self.table().locator("thead th").all_inner_texts()]

    def sort_by(self, label: str) -> None:
        # The sorted column's name ends with its arrow (CSS content counts in accessible names).
        name = re.compile(rf"^{re.escape(label)}\s*[\u25b2\u25bc]?$")
        self.table().get_by_role("button", name=name).click()

    def pager_range(self) -> Locator:
        return self.table().locator(css_testid("pager-range"))

    def pager(self, which: str) -> Locator:
        return self.table().locator(css_testid(f"pager-{which}"))

    def search(self, text: str) -> None:
        self.part("search").fill(text)

    def group_by(self) -> Locator:
        return self.part("group-by")

    def slices(self, pie: str) -> Locator:
        return self.part(pie).locator(".slice")

    def legend(self, pie: str) -> list[str]:
        return self.part(pie).locator(".legendtext").all_text_contents()

    def row_named(self, name: str) -> Locator:
        """The table row whose name cell is exactly `name`."""
        exact = re.compile(f"^{re.escape(name)}$")
        return self.rows().filter(has=self.page.locator("td:first-child", has_text=exact))


class OperatorPage(TableViewPage):
    view = "operators"
    pies = ("pie-device-self", "pie-device-total", "pie-host-self", "pie-host-total")
    table_testid = "op-table"

    def stack_panel(self) -> Locator:
        return self.part("stack-panel")

    def open_stacks(self, name: str) -> Locator:
        self.row_named(name).first.locator(css_testid("stacks-button")).click()
        panel = self.stack_panel()
        expect(panel).to_be_visible()
        expect(panel.locator(f'{css_testid("stack")}, {css_testid("stack-error")}, p').first).to_be_attached()
        expect(panel).not_to_have_attribute("aria-busy", "true")
        return panel


class KernelPage(TableViewPage):
    view = "kernels"
    pies = ("pie-kernels", "pie-tensor-cores")
    table_testid = "kernel-table"


class TracePage(ShellPage):
    """The timeline: lanes on a canvas, ruler, counters, search, the event details panel.

    The canvas exposes what it drew as data attributes: `data-drawn-boxes`, `data-drawn-merged`,
    `data-windows` (window answers received), `data-start` / `data-end` (the window on screen, us),
    `data-draw-ms` (the last frame's drawing time).
    """

    view = "trace"
    ROW_PX = 14
    LANE_PAD_PX = 3
    PROCESS_PX = 22

    def canvas(self) -> Locator:
        return self.part("trace-canvas")

    def wait_drawn(self) -> "TracePage":
        """Waits until a window answer is drawn, the view is idle and no window request is pending."""
        self.wait_mounted()
        expect(self.root()).to_be_visible()
        expect(self.canvas()).to_have_attribute("data-windows", re.compile(r"^[1-9]\d*$"))
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        self.wait_idle()
        return self

    def wait_idle(self) -> None:
        """Waits for the window request an action put off to be sent and answered, and the frame drawn."""
        wait_requests_done(self.page)
        expect(self.part("timeline")).not_to_have_attribute("data-loading", "true")

    def data(self, name: str) -> str | None:
        return self.canvas().get_attribute(f"data-{name}")

    def drawn_boxes(self) -> int:
        return int(self.data("drawn-boxes") or 0)

    def window(self) -> tuple[float, float]:
        """The time window on screen (absolute us)."""
        return float(self.data("start")), float(self.data("end"))

    def lane_labels(self) -> list[str]:
        return self.part("lane-labels").locator(css_testid("lane-label")).all_inner_texts()

    def process_labels(self) -> list[str]:
        return self.part("lane-labels").locator(css_testid("process-label")).all_inner_texts()

    def painted_pixels(self, testid: str = "trace-canvas") -> int:
        """How many pixels of a canvas are painted (not transparent)."""
        return self.page.evaluate(f"""() => {{
            const c = document.querySelector('[data-testid="{testid}"]');
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n += 1;
            return n;
        }}""")

    def details(self) -> Locator:
        return self.part("event-details")

    def wait_details(self, event_id: int) -> Locator:
        panel = self.details()
        expect(panel).to_be_visible()
        expect(panel).to_have_attribute("data-event-id", str(event_id))
        expect(panel).not_to_have_attribute("aria-busy", "true")
        return panel

    def links(self, relation: str | None = None) -> Locator:
        selector = css_testid("event-link") + (f'[data-relation="{relation}"]' if relation else "")
        return self.details().locator(selector)

    def point_of(self, lanes: list[dict], lane_id: int, row: int, t_us: float) -> tuple[float, float]:
        """Page coordinates of time `t_us` in sub-row `row` of a lane (the layout is part of the view's
        contract: a header per process, lanes as tall as their rows), after scrolling it into view."""
        y, process = 0, None
        for lane in lanes:
            if lane["process"] != process:
                process = lane["process"]
                y += self.PROCESS_PX
            if lane["id"] == lane_id:
                break
            y += max(1, lane["rows"]) * self.ROW_PX + 2 * self.LANE_PAD_PX
        y += self.LANE_PAD_PX + row * self.ROW_PX + self.ROW_PX / 2
        body = self.part("timeline-body")
        body.evaluate(f"(b) => {{ b.scrollTop = Math.max(0, {y} - b.clientHeight / 2); }}")
        self.page.evaluate(NEXT_FRAMES)  # the scroll's redraw
        scroll = body.evaluate("(b) => b.scrollTop")
        box = self.part("trace-stage").bounding_box()
        start, end = self.window()
        x = (t_us - start) / (end - start) * box["width"]
        return box["x"] + x, box["y"] + y - scroll

    def search(self, text: str) -> None:
        self.part("trace-search").fill(text)

    def search_count(self) -> Locator:
        return self.part("search-count")
