"""`profboard collect` on the CPU, as CI runs it: the workloads write runs that profboard (the app
in-process, tests/conftest.py) loads, with what each workload is about visible in its views (the
slow loss's host reads, the slowed rank named as the straggler)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from processes import stop_process

pytest.importorskip("torch", reason="the collectors need PyTorch (pip install -e '.[collect]')")

REPO = Path(__file__).resolve().parents[2]


def collect(*args: str) -> None:
    """`profboard collect ARGS` in this process, which has imported torch already (a fresh Python
    spends seconds of CPU importing it again)."""
    from profboard.server.cli import main

    assert main(["collect", *args]) == 0


@pytest.fixture(scope="module")
def collected(tmp_path_factory, start_app):
    logdir = tmp_path_factory.mktemp("collected")
    # ddp as a user starts it, the command starting torchrun; its ranks wait on each other and on the
    # straggler's sleeps, so the loss_sync runs are written meanwhile.
    # Six steps: CPU timings are noisy, the slowed rank must be last at most of them.
    ddp = subprocess.Popen([sys.executable, "-m", "profboard.server.cli", "collect", "ddp", "--logdir", str(logdir),
                            "--device", "cpu", "--straggler", "1", "--nproc", "2", "--steps", "6"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        collect("loss_sync", "--logdir", str(logdir), "--device", "cpu", "--sync-events")  # no sync events on a CPU: runs all the same
        collect("loss_sync", "--fixed", "--logdir", str(logdir), "--device", "cpu", "--repeat", "2")
        output, _ = ddp.communicate(timeout=300)
    finally:
        stop_process(ddp)
    assert ddp.returncode == 0, output[-3000:]
    app = start_app(logdir, expect=["loss_sync_before", "loss_sync_after", "ddp_straggler_rank1"], timeout=120)
    yield app
    app.stop()


def test_list_names_every_workload(capsys):
    from profboard.server.cli import main

    assert main(["collect", "--list"]) == 0  # in this process: a fresh Python would spend seconds importing torch
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == ["resnet50", "loss_sync", "compile", "transformer", "ddp"]


def test_loss_sync_runs_load_with_their_steps(collected):
    runs = collected.runs()
    assert runs["loss_sync_before"]["spans"] == {runs["loss_sync_before"]["workers"][0]: ["1"]}
    assert list(runs["loss_sync_after"]["spans"].values()) == [["1", "2"]]      # --repeat 2: two spans
    for run in ("loss_sync_before", "loss_sync_after"):
        overview = collected.get("/api/overview", {"run": run}).json()
        assert len(overview["steps"]) == 3 and overview["warnings"] == []


def test_the_slow_loss_reads_the_gpu_and_the_fixed_one_does_not(collected):
    def ops(run: str) -> set[str]:
        return {r["name"] for r in collected.get("/api/operators", {"run": run}).json()["rows"]}
    before, after = ops("loss_sync_before"), ops("loss_sync_after")
    assert {"aten::linspace", "aten::is_nonzero"} <= before      # weights built per step, a branch on the loss
    assert "aten::cross_entropy_loss" in after and not {"aten::linspace", "aten::is_nonzero"} & after
    # the workload's `marked("loss")` annotation is on the timeline
    search = collected.get("/api/trace/search", {"run": "loss_sync_before", "q": "loss", "regex": "false"}).json()
    assert any(m["name"] == "loss" for m in search["matches"])


def test_ddp_on_the_cpu_names_the_slowed_rank(collected):
    run = "ddp_straggler_rank1"
    assert collected.runs()[run]["workers"] == ["rank0", "rank1"]
    view = collected.get("/api/distributed", {"run": run}).json()
    assert [(r["rank"], r["backend"]) for r in view["ranks"]] == [(0, "gloo"), (1, "gloo")]
    assert [r["rank"] for r in view["stragglers"]["stragglers"]] == [1]
    assert {row["name"] for r in view["comm_ops"] for row in r["rows"]} == {"gloo:all_reduce"}
    found = collected.get("/api/recommendations", {"run": run, "worker": "rank0"}).json()["recommendations"]
    assert [f["numbers"]["straggler_ranks"] for f in found if f["id"] == "straggler"] == [[1]]


def test_ddp_on_cuda_with_more_ranks_than_gpus_says_so(tmp_path):
    import torch
    from profboard.collectors.workloads import ddp
    from profboard.collectors.workloads.common import Options

    have = torch.cuda.device_count()
    cuda = Options(tmp_path, "cuda", steps=1, repeat=1, warmup_steps=0, tables=False)
    with pytest.raises(SystemExit, match=rf"{have + 1} asked for, this machine has {have} .*--device cpu"):
        ddp.require_gpus(cuda, have + 1)
    ddp.require_gpus(Options(tmp_path, "cpu", 1, 1, 0, False), 8)     # gloo ranks need no GPU
