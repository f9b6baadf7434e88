"""GET /api/trace/raw, the original file as a download, when the file changed or went away after
it was loaded (in-process app, no rescans, so the file's state is the test's to set)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from profboard.server.app import create_app
from profboard.server.settings import Settings

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests/data/h200/item_logging"


@pytest.fixture
def loaded(tmp_path):
    shutil.copytree(SOURCE, tmp_path / "run")
    [trace] = (tmp_path / "run").glob("*.pt.trace.json*")
    app = create_app(Settings(logdir=str(tmp_path), cache_dir=None, rescan_seconds=3600))
    with TestClient(app, base_url="http://localhost") as client:
        deadline = time.monotonic() + 60
        while client.get("/api/runs").json()["runs"][0]["status"] == "loading":
            assert time.monotonic() < deadline, "the run did not load"
            time.sleep(0.1)
        yield client, trace


def test_raw_download_is_the_original_file(loaded):
    client, trace = loaded
    response = client.get("/api/trace/raw", params={"run": "run"})
    assert response.status_code == 200
    assert response.content == trace.read_bytes()
    assert response.headers["content-length"] == str(trace.stat().st_size)
    assert trace.name in response.headers["content-disposition"]


def test_raw_download_of_a_deleted_file_is_a_404(loaded):
    """It answered 200 and then closed the connection with 0 bytes."""
    client, trace = loaded
    trace.unlink()
    response = client.get("/api/trace/raw", params={"run": "run"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found" and "gone" in response.json()["error"]["message"]


def test_raw_download_of_a_rewritten_file_says_it_changed(loaded):
    client, trace = loaded
    trace.write_bytes(trace.read_bytes() + b"\n")
    response = client.get("/api/trace/raw", params={"run": "run"})
    assert response.status_code == 409 and "changed" in response.json()["error"]["message"]
