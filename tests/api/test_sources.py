"""--source-root: call-stack frames recorded relative to sys.path get the absolute path of the file
under the first root that holds it (server/sources.py), in the operators' stacks and the Trace view's
event details; nothing else about the file is read."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from fastapi.testclient import TestClient

from profboard.server.app import create_app
from profboard.server.settings import Settings
from profboard.server.sources import SourceRoots

REPO = Path(__file__).resolve().parents[2]
RUN = "resnet50_fp32"


def test_a_relative_file_is_found_under_the_first_root_holding_it(tmp_path: Path):
    first, second = tmp_path / "checkout", tmp_path / "site-packages"
    (second / "torch/nn").mkdir(parents=True)
    (second / "torch/nn/functional.py").write_text("")
    (first / "torch/nn").mkdir(parents=True)
    (first / "train.py").write_text("")
    (tmp_path / "secret.py").write_text("")
    roots = SourceRoots([str(first), str(second)])
    assert roots.locate("torch/nn/functional.py") == str(second / "torch/nn/functional.py")
    assert roots.locate("train.py") == str(first / "train.py")
    assert roots.locate("./torch/../train.py") == str(first / "train.py")
    assert roots.locate("missing.py") is None
    assert roots.locate("../secret.py") is None  # never outside a root
    assert roots.locate("torch/../../secret.py") is None
    assert roots.locate("/abs/train.py") is None and roots.locate("C:\\work\\main.py") is None
    assert roots.locate(None) is None
    assert SourceRoots([]).locate("train.py") is None
    frames = roots.with_paths([{"file": "train.py", "line": 3, "function": "f"},
                               {"file": None, "line": None, "function": "<built-in>"}])
    assert [f["path"] for f in frames] == [str(first / "train.py"), None]


def test_stacks_and_event_details_carry_the_found_paths(tmp_path: Path):
    logdir = tmp_path / "logdir"
    shutil.copytree(REPO / "examples/logdir" / RUN, logdir / RUN)
    root = tmp_path / "site-packages"
    (root / "torch/nn/modules").mkdir(parents=True)
    (root / "torch/nn/modules/module.py").write_text("")
    app = create_app(Settings(logdir=str(logdir), cache_dir=str(tmp_path / "cache"), source_roots=(str(root),)))
    with TestClient(app, base_url="http://localhost") as client:
        deadline = time.monotonic() + 60
        while client.get("/api/runs").json()["runs"][0]["status"] == "loading":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        rows = client.get("/api/operators", params={"run": RUN}).json()["rows"]
        name = next(r["name"] for r in rows if r["has_call_stack"])
        stacks = client.get("/api/operators/stacks", params={"run": RUN, "name": name}).json()["rows"]
        frames = [f for s in stacks for f in s["frames"]]
        found = [f for f in frames if f["file"] == "torch/nn/modules/module.py"]
        assert found and all(f["path"] == str(root / "torch/nn/modules/module.py") for f in found)
        assert all(f["path"] is None for f in frames if f["file"] != "torch/nn/modules/module.py")
        # The Trace view's details of one such call show the same frames.
        hit = client.get("/api/trace/search", params={"run": RUN, "q": name}).json()
        event = client.get("/api/trace/event", params={"run": RUN, "id": hit["matches"][0]["id"]}).json()
        assert any(f["path"] == str(root / "torch/nn/modules/module.py") for f in event["frames"])
