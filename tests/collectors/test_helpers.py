"""profboard.collectors' helpers with a real (CPU) torch.profiler: the traces they write load
in profboard, annotations show, exports work after the handler saved, tables print,
throughput counts the right steps."""

from __future__ import annotations

import gzip
import json
import socket
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the collectors need PyTorch (pip install -e '.[collect]')")

from profboard.collectors import (ThroughputMeter, export_trace, make_profiler, marked,  # noqa: E402
                                  print_top_tables, snapshot_memory)
from profboard.server.analysis.steps import detect_steps  # noqa: E402
from profboard.server.trace.load import parse_trace_bytes  # noqa: E402
from profboard.server.trace.read import read_trace_bytes  # noqa: E402


def _train(prof, steps: int, meter: ThroughputMeter | None = None) -> None:
    model = torch.nn.Linear(16, 4)
    x = torch.randn(8, 16)
    with prof:
        if meter is not None:
            meter.start()
        for _ in range(steps):
            with marked("my_forward"):
                loss = model(x).sum()
            loss.backward()
            prof.step()
            if meter is not None:
                meter.step(samples=8, tokens=8 * 16)


def _load(path: Path):
    return parse_trace_bytes(read_trace_bytes(str(path), 1 << 30).data)


def test_make_profiler_writes_spans_that_profboard_reads(tmp_path):
    prof = make_profiler(tmp_path, "run_a", wait=1, warmup=1, active=2, repeat=2)
    _train(prof, 8)
    files = sorted((tmp_path / "run_a").glob("*.pt.trace.json.gz"))
    assert len(files) == 2 and [Path(p) for p in prof.profboard_traces] == files   # a span per repeat
    tables = _load(files[0])
    steps = detect_steps(tables.events)
    assert len(steps.names) == 2
    names = set(tables.events["name"].astype(str))
    assert "my_forward" in names and "aten::addmm" in names


def test_worker_is_named_by_rank_under_torchrun(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    prof = make_profiler(tmp_path, "ranked", wait=0, warmup=1, active=1, gzip=False)
    _train(prof, 2)
    (trace,) = (tmp_path / "ranked").glob("*.pt.trace.json")
    assert trace.name.startswith("rank3.")
    # the name says nothing of the machine: the trace does, for the Distributed view's topology
    assert json.loads(trace.read_text())["hostname"] == socket.gethostname()


def test_export_after_the_handler_saved_copies_its_file(tmp_path):
    prof = make_profiler(tmp_path, "run_b", wait=0, warmup=1, active=1)
    _train(prof, 2)
    with pytest.raises(RuntimeError, match="already saved"):
        prof.export_chrome_trace(str(tmp_path / "direct.json"))   # what users hit with torch alone
    out = export_trace(prof, tmp_path / "exported.json")
    with gzip.open(prof.profboard_traces[-1]) as saved:
        assert json.loads(out.read_text()) == json.load(saved)


def test_export_without_a_handler_writes_gzip(tmp_path):
    prof = torch.profiler.profile()
    with prof:
        torch.randn(4, 4) @ torch.randn(4, 4)
    out = export_trace(prof, tmp_path / "plain.pt.trace.json.gz")
    assert "aten::mm" in set(_load(out).events["name"].astype(str))
    assert not (tmp_path / "plain.pt.trace.json").exists()


def test_print_top_tables(tmp_path, capsys):
    prof = make_profiler(tmp_path, "run_c", wait=0, warmup=1, active=2)
    _train(prof, 3)
    # every operator: which ten come first depends on CPU timings (under load aten::addmm fell out)
    text = print_top_tables(prof, n=100)
    assert "Top operators by CPU time" in text and "Top operators by input shape" in text
    assert "aten::addmm" in text and text in capsys.readouterr().out
    # with_stack's Python frames (the test runner's own, outermost) are not operators
    assert "test_helpers.py(" not in text and "<built-in" not in text and "nn.Module:" not in text


def test_throughput_counts_after_warmup_and_the_profiled_window(tmp_path):
    prof = make_profiler(tmp_path, "run_d", wait=2, warmup=1, active=3)
    meter = ThroughputMeter(warmup=1, prof=prof)
    _train(prof, 7, meter)
    summary = meter.summary()
    # 7 steps, the first left out; the profiler recorded steps 4-6 (after wait 2, warmup 1).
    assert summary["epoch"]["steps"] == 6 and summary["epoch"]["samples"] == 48
    assert summary["profiled"]["steps"] == 3 and summary["profiled"]["tokens"] == 3 * 128
    assert summary["epoch"]["samples_per_s"] > 0 and "samples/s" in meter.report()


def test_throughput_arithmetic():
    ticks = iter([0.0, 1.0, 3.0, 4.0])
    meter = ThroughputMeter(warmup=1, clock=lambda: next(ticks))
    meter.start()
    for samples in (10, 20, 30):
        meter.step(samples)
    # the first step (0 -> 1 s) is warm-up; then 20 samples in 2 s and 30 in 1 s
    assert meter.summary()["epoch"] == {"steps": 2, "samples": 50, "tokens": 0, "seconds": 3.0,
                                        "samples_per_s": 50 / 3, "tokens_per_s": None}
    assert ThroughputMeter().report() == "no steps measured (still in warm-up)"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback")
def test_snapshot_memory_without_cuda_warns(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with snapshot_memory(tmp_path / "snap.pickle") as path:
            torch.ones(3)
    assert path is None and not (tmp_path / "snap.pickle").exists()
    assert any("CUDA is not available" in str(w.message) for w in caught)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback")
def test_workload_snapshot_without_cuda_runs_no_extra_steps(tmp_path):
    """`profboard collect ... --snapshot` on the CPU writes no snapshot and spends no steps on one
    (on CUDA it records SNAPSHOT_STEPS more steps: the demo's resnet50_fp32 was made so)."""
    from profboard.collectors.workloads.common import _snapshot

    steps = []
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert _snapshot(tmp_path, lambda: steps.append(1)) == []
    assert steps == [] and not list(tmp_path.iterdir())
