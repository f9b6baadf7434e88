"""Page helpers for the browser tests: the shell (left panel, messages) and one helper per view.

Elements are found by `data-view` and `data-testid` only, never by CSS classes or text layout.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Locator, Page, expect


def css_testid(name: str) -> str:
    return f'[data-testid="{name}"]'


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

    def error(self) -> Locator:
        return self.page.locator(css_testid("error"))

    def about(self) -> Locator:
        return self.page.locator(css_testid("about"))

    def screenshot(self, directory: Path, name: str, full: bool = False) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.png"
        if full:
            # The main area scrolls inside the window; a tall viewport shows the whole view.
            height = self.page.evaluate("document.querySelector('main').scrollHeight") + 60
            self.page.set_viewport_size({"width": self.page.viewport_size["width"], "height": max(800, height)})
        self.page.wait_for_timeout(250)  # let the busy fade (0.15 s) finish
        self.page.screenshot(path=str(path))
        return path


class OverviewPage(ShellPage):
    view = "overview"

    def part(self, name: str) -> Locator:
        return self.root().locator(css_testid(name))

    def wait_drawn(self) -> "OverviewPage":
        """Waits until both charts hold Plotly SVG and the view is no longer busy."""
        expect(self.part("step-chart").locator(".main-svg").first).to_be_attached()
        expect(self.part("breakdown-pie").locator(".main-svg").first).to_be_attached()
        expect(self.root()).not_to_have_attribute("aria-busy", "true")
        return self

    def gpu_text(self) -> str:
        return self.part("gpu-summary").inner_text()

    def table_steps(self) -> list[str]:
        """The first column of the per-step table's body (step ids)."""
        return self.part("step-table").locator("tbody tr td:first-child").all_inner_texts()
