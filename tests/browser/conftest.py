"""Browser-test fixtures: a real `profboard` server on a temporary logdir, and Debian's Chromium.

The logdir links the files of fixture runs from `<repo>/../shared/fixtures` (skipped when
absent) and of runs the repository holds (tests/data), a CUDA allocator snapshot beside one of
them and in a run of its own, and a run whose only trace is truncated JSON, so that error
display is exercised next to working runs.
Playwright drives `/usr/bin/chromium`; it never downloads a browser.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from serving import serving

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO.parent / "shared" / "fixtures"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
SHOTS = Path(os.environ.get("PROFBOARD_SHOTS", "/tmp/profboard-shots"))

# run name in the temporary logdir -> folder under FIXTURES
LINKED_RUNS = {
    "resnet50_fp32": "h100/resnet50_fp32",
    "resnet50_num_workers_0": "kineto_samples/resnet50_num_workers_0",
    "compile_graph_breaks": "h100/compile_graph_breaks",
    "compile_resnet18": "h100/compile_resnet18",
    "ddp_resnet50": "h200x4/ddp_resnet50",
}
# run name in the temporary logdir -> folder under the repository (traces the project recorded itself)
REPO_RUNS = {
    "compile_first_call": "tests/data/h200/compile_first_call",
    "ddp_straggler_rank1": "tests/data/h200x2/ddp_straggler_rank1",
    "fsdp": "tests/data/h200x2/fsdp",
}
# run name -> snapshot under FIXTURES linked into it (a run of its own when not in LINKED_RUNS)
SNAPSHOTS = {
    "resnet50_fp32": "snapshots/resnet18_snapshot.pickle",
    "snapshot_only": "snapshots/resnet18_snapshot.pickle",
}
# run name -> file name of a pickle that names os.system (written by the fixture): the server must
# refuse it and the Memory Snapshot view show why
REFUSED_SNAPSHOTS = {
    "snapshot_refused": "refused_snapshot.pickle",
}
# Protocol 0: GLOBAL os.system, MARK, the string 'true', TUPLE, REDUCE, STOP: a naive load runs `true`.
REFUSED_PICKLE = b"cos\nsystem\n(S'true'\ntR."
BROKEN_RUN = "broken_trace"
READY_TIMEOUT_S = 120


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@pytest.fixture(scope="session")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [rel for rel in (*LINKED_RUNS.values(), *SNAPSHOTS.values()) if not (FIXTURES / rel).exists()]
    if missing:
        pytest.skip(f"fixtures not found under {FIXTURES}: {', '.join(missing)}")
    root = tmp_path_factory.mktemp("logdir")
    linked = {**{n: FIXTURES / rel for n, rel in LINKED_RUNS.items()}, **{n: REPO / rel for n, rel in REPO_RUNS.items()}}
    for name, folder in linked.items():
        (root / name).mkdir()
        for trace in folder.iterdir():
            (root / name / trace.name).symlink_to(trace)
    for name, rel in SNAPSHOTS.items():
        (root / name).mkdir(exist_ok=True)
        (root / name / Path(rel).name).symlink_to(FIXTURES / rel)
    for name, file_name in REFUSED_SNAPSHOTS.items():
        (root / name).mkdir(exist_ok=True)
        (root / name / file_name).write_bytes(REFUSED_PICKLE)
    broken = root / BROKEN_RUN
    broken.mkdir()
    # A job killed mid-write: the JSON stops inside the first event.
    (broken / "worker0.1700000000000.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "name": "a')
    return root


@pytest.fixture(scope="session")
def server(logdir: Path, tmp_path_factory: pytest.TempPathFactory):
    """Base URL of a running `profboard` serving `logdir`, once every run is ready or failed."""
    log_path = tmp_path_factory.mktemp("server") / "profboard.log"
    expected = set(LINKED_RUNS) | set(REPO_RUNS) | set(SNAPSHOTS) | {BROKEN_RUN}
    with serving(logdir, tmp_path_factory.mktemp("cache"), log_path, expected, READY_TIMEOUT_S) as base:
        yield base


@pytest.fixture(scope="session")
def shots() -> Path:
    """Where tests save screenshots for people to look at ($PROFBOARD_SHOTS, default /tmp/profboard-shots)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS


@pytest.fixture(scope="session")
def api(server: str):
    """GET a JSON path of the server: `api("/api/overview?run=...")`."""
    return lambda path: _get_json(server + path)


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not found; install Debian's chromium (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, request):
    """A fresh 1280x800 page whose console errors and uncaught exceptions are collected in `page.errors`."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15000)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    page.errors = errors
    yield page
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"FAILED-{request.node.name}.png"))
    context.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report
