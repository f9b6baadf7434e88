"""Browser-test fixtures: a real `profboard` server on a logdir of the repository's own data
(runs.py says what it holds), a static server for the web app's modules alone, and Debian's
Chromium. Playwright drives `/usr/bin/chromium`; it never downloads a browser.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest

from runs import build_logdir
from serving import serving, serving_static

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
SHOTS = Path(os.environ.get("PROFBOARD_SHOTS", "/tmp/profboard-shots"))
READY_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory):
    """Base URL of a running `profboard` serving the test logdir, once every run is ready or failed."""
    logdir = tmp_path_factory.mktemp("logdir")
    names = build_logdir(logdir)
    log_path = tmp_path_factory.mktemp("server") / "profboard.log"
    with serving(logdir, tmp_path_factory.mktemp("cache"), log_path, names, READY_TIMEOUT_S) as base:
        yield base


@pytest.fixture(scope="session")
def static_site():
    """Base URL of a static server of web/static, with a blank page at every other path."""
    with serving_static() as base:
        yield base


@pytest.fixture(scope="session")
def shots() -> Path:
    """Where tests save screenshots for people to look at ($PROFBOARD_SHOTS, default /tmp/profboard-shots)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS


@pytest.fixture(scope="session")
def api(server: str):
    """GET a JSON path of the server: `api("/api/overview?run=...")`."""
    def get(path: str) -> dict:
        # A run's first Distributed answer may wait for its ranks' summaries while the session's server
        # still loads the big shared fixtures on two cores: 10 s was once too short in CI.
        with urllib.request.urlopen(server + path, timeout=60) as response:
            return json.load(response)
    return get


@pytest.fixture(scope="session")
def context(tmp_path_factory: pytest.TempPathFactory):
    """One Chromium profile for the session, kept on disk: its HTTP cache holds V8's compiled code
    of plotly.min.js, so a page is ready in about a third of the time a fresh context takes."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found; install Debian's chromium (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tmp_path_factory.mktemp("chromium"), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 800})
        yield context
        context.close()


def new_page(context):
    """A new 1280x800 page whose console errors and uncaught exceptions are collected in `page.errors`."""
    page = context.new_page()
    page.set_default_timeout(15000)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    page.errors = errors
    return page


@pytest.fixture
def page(context, request):
    """A new page of the test's own (new_page)."""
    page = new_page(context)
    yield page
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"FAILED-{request.node.name}.png"))
    page.close()
    context.clear_permissions()  # a test may have granted the clipboard


@pytest.fixture(scope="module")
def loaded_page(context):
    """`loaded_page(url)`: a page (new_page) that has loaded `url`, one per URL for the whole module, for
    tests that only read what a view drew there: each such load costs a second or more on two cores."""
    pages = {}

    def get(url: str):
        if url not in pages:
            pages[url] = new_page(context)
            pages[url].goto(url)
        return pages[url]
    yield get
    for page in pages.values():
        page.close()


@pytest.fixture(scope="module")
def blank_page(context, static_site):
    """A page on the static server's blank document, shared by a module's tests of pure functions."""
    page = context.new_page()
    page.set_default_timeout(15000)
    page.goto(static_site + "/")
    yield page
    page.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report
