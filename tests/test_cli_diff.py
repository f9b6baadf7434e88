"""`profboard diff`: the JSON keys, the human summary, RUN/WORKER/SPAN, and the exit codes (0; 1 past
--fail-on-regression; 2 with one line for bad input)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profboard.server.cli import main
from synth import write_trace

REPO = Path(__file__).resolve().parents[1]
BEFORE, AFTER = "loss_sync_before", "loss_sync_after"  # 7.16 ms -> 5.05 ms a step: -29.4%, or +41.7% reversed


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli_diff")
    for run in (BEFORE, AFTER):
        shutil.copytree(REPO / "examples/logdir" / run, root / "runs" / run)
    write_trace(root / "runs", "broken", "worker0", 1, b'{"traceEvents": [')
    return root


def diff(logdir: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["diff", str(logdir / "runs"), "--cache-dir", str(logdir / "cache"), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_keys(logdir, capsys):
    code, out, err = diff(logdir, capsys, "--base", BEFORE, "--new", f"{AFTER}/vm_471/1", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert {"step_delta_ratio", "verdict", "steps", "operators", "kernels", "modules", "recommendations"} <= set(body)
    assert body["base"] == {"run": BEFORE, "worker": "vm_437", "span": "1"}
    assert body["new"] == {"run": AFTER, "worker": "vm_471", "span": "1"}
    assert body["verdict"] == "improvement" and body["step_delta_ratio"] == pytest.approx(-0.294, abs=1e-3)
    assert set(body["steps"]) == {"base", "new", "delta"} and "total_us" in body["steps"]["delta"]
    assert {"name", "status", "base_calls", "new_calls", "base_device_us", "new_device_us", "delta_device_us",
            "base_host_us", "new_host_us"} <= set(body["operators"][0])
    assert body["recommendations"]["resolved"] == ["h2d_copy_in_step", "host_device_sync"]


def test_operators_by_name_and_input_shapes(logdir, capsys):
    code, out, err = diff(logdir, capsys, "--base", BEFORE, "--new", AFTER, "--json", "--group-by", "name_shape")
    assert code == 0, err
    operators = json.loads(out)["operators"]
    assert all("input_shape" in row for row in operators)
    assert len({row["name"] for row in operators}) < len(operators)  # some operator ran with several shapes


def test_human_summary(logdir, capsys):
    code, out, err = diff(logdir, capsys, "--base", BEFORE, "--new", AFTER, "--top", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "improvement: average step 7.16 ms -> 5.05 ms (-29.4%)"
    assert "operators (change per step):" in lines and "  decreased device      -3.8 us, host   -1258.5 us  aten::to" in lines
    assert lines[-1] == "recommendations resolved: h2d_copy_in_step, host_device_sync"


@pytest.mark.parametrize("base, new, limit, code", [
    pytest.param(BEFORE, AFTER, "0", 0, id="faster"),
    pytest.param(AFTER, BEFORE, "41", 1, id="slower-past-the-limit"),
    pytest.param(AFTER, BEFORE, "42", 0, id="slower-within-the-limit"),
    pytest.param(AFTER, AFTER, "0", 0, id="same"),
])
def test_fail_on_regression(logdir, capsys, base, new, limit, code):
    assert diff(logdir, capsys, "--base", base, "--new", new, "--fail-on-regression", limit)[0] == code


def test_without_the_flag_a_regression_exits_0(logdir, capsys):
    code, out, _ = diff(logdir, capsys, "--base", AFTER, "--new", BEFORE)
    assert code == 0 and out.startswith("regression: ")


@pytest.mark.parametrize("args, mentions", [
    pytest.param(["--base", "nope", "--new", AFTER], "no run 'nope'", id="unknown-run"),
    pytest.param(["--base", BEFORE, "--new", f"{AFTER}/nobody"], "no worker 'nobody'", id="unknown-worker"),
    pytest.param(["--base", BEFORE, "--new", f"{AFTER}/vm_471/2"], "span '2'", id="unknown-span"),
    pytest.param(["--base", BEFORE, "--new", f"{AFTER}/vm_471/1/x"], "RUN[/WORKER[/SPAN]]", id="too-deep"),
    pytest.param(["--base", BEFORE, "--new", "broken"], "cannot read", id="unreadable"),
])
def test_bad_input_exits_2_with_one_line(logdir, capsys, args, mentions):
    code, out, err = diff(logdir, capsys, *args, "--fail-on-regression", "5")
    assert code == 2 and out == ""
    assert err.startswith("profboard diff: ") and mentions in err and err.count("\n") == 1, err


def test_missing_logdir_exits_2(tmp_path, capsys):
    assert main(["diff", str(tmp_path / "absent"), "--base", "a", "--new", "b", "--no-cache"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
