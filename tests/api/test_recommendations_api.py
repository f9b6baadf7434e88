"""/api/recommendations and /api/overview carry each finding's saving (saving_us, saving_ratio,
saving_note, included_in), ordered by saving; read through HTTP on the demo's loss with syncs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO_RUN = "loss_sync_before"


@pytest.fixture(scope="module")
def api(start_app, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("savings_logdir")
    shutil.copytree(REPO / "examples/logdir" / DEMO_RUN, root / DEMO_RUN)
    app = start_app(root, cache_dir=tmp_path_factory.mktemp("savings_cache"), expect=[DEMO_RUN])
    yield app
    app.stop()


def test_findings_carry_their_saving_largest_first(api):
    found = api.get("/api/recommendations", {"run": DEMO_RUN}).json()["recommendations"]
    assert [f["id"] for f in found] == ["host_device_sync", "h2d_copy_in_step", "tensor_cores_unused"]
    savings = [f["saving_us"] for f in found]
    assert savings == sorted(savings, reverse=True) and all(s > 0 for s in savings)
    step = found[0]["numbers"]["step_us"]
    for f in found:
        assert f["saving_ratio"] == pytest.approx(f["saving_us"] / step, abs=1e-6)
        assert f["severity"] == ("high" if f["saving_ratio"] >= 0.1 else "medium" if f["saving_ratio"] >= 0.02
                                 else "low")
        assert f["saving_note"]
    assert found[1]["included_in"] == "host_device_sync"
    assert "included_in" not in found[0] and "included_in" not in found[2]


def test_the_overview_embeds_the_same_findings(api):
    overview = api.get("/api/overview", {"run": DEMO_RUN}).json()["recommendations"]
    assert overview == api.get("/api/recommendations", {"run": DEMO_RUN}).json()["recommendations"]
