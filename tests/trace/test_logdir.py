"""Discovery of a logdir's runs (server/logdir.py): which links it follows and what it says."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from profboard.server import logdir as logdir_module
from profboard.server.logdir import discover
from synth import Trace, write_trace


def one_run(root: Path, name: str = "good") -> None:
    t = Trace()
    t.step(1, 0, 10)
    write_trace(root, name, "w", 1, t.build())


def scan(root: Path) -> tuple[dict, list[str]]:
    notes: list[str] = []
    return discover(str(root), notes), notes


@pytest.mark.parametrize("target", ["/", "..", "."], ids=["root", "parent", "itself"])
def test_link_to_a_folder_holding_the_logdir_is_not_followed(tmp_path, target):
    """A link to / made the first scan walk the whole filesystem (75 s, 2,296 'runs')."""
    root = tmp_path / "logdir"
    one_run(root)
    (root / "escape").symlink_to(target)
    started = time.monotonic()
    runs, notes = scan(root)
    assert time.monotonic() - started < 5
    assert list(runs) == ["good"]
    assert any(n.startswith("escape links to") and "not followed" in n and "holds the logdir" in n for n in notes)


@pytest.mark.parametrize("target", ["/proc/self/environ", "/proc/self", "/dev/zero", "/sys/kernel"])
def test_links_into_system_folders_are_not_followed(tmp_path, target):
    if not os.path.exists(target):
        pytest.skip(f"{target} does not exist here")
    root = tmp_path / "logdir"
    one_run(root)
    name = "w.1.pt.trace.json" if not os.path.isdir(target) else "sys"
    (root / "good" / name).symlink_to(target)
    runs, notes = scan(root)
    assert [f.worker for f in runs["good"].workers["w"]] == ["w"]
    assert any("system folder" in n for n in notes)


def test_a_link_out_of_the_logdir_is_followed_and_said(tmp_path):
    root, elsewhere = tmp_path / "logdir", tmp_path / "elsewhere"
    one_run(root)
    one_run(elsewhere, "linked")
    (root / "linked").symlink_to(elsewhere / "linked")
    (root / "good" / "x.1.pt.trace.json").symlink_to("/etc/hostname" if os.path.exists("/etc/hostname") else "/etc/passwd")
    runs, notes = scan(root)
    assert sorted(runs) == ["good", "linked"]
    assert "x" in runs["good"].workers
    assert sum("outside the logdir: read from there" in n for n in notes) == 2


def test_links_inside_the_logdir_are_followed_silently(tmp_path):
    root = tmp_path / "logdir"
    one_run(root)
    (root / "alias").symlink_to(root / "good")
    runs, notes = scan(root)
    assert "good" in runs and notes == []


def test_the_scan_stops_at_its_budget_with_a_note(tmp_path, monkeypatch):
    root = tmp_path / "logdir"
    one_run(root)
    for i in range(30):
        (root / f"other{i}").mkdir()
    monkeypatch.setattr(logdir_module, "MAX_SCAN_ENTRIES", 10)
    _, notes = scan(root)
    assert any("scan stopped after 10 files and folders" in n for n in notes)


def test_the_logdirs_own_runs_are_found_before_linked_folders(tmp_path, monkeypatch):
    """A link to a huge folder must not use up the budget before the logdir's own runs are seen."""
    root, huge = tmp_path / "logdir", tmp_path / "huge"
    for i in range(40):
        (huge / f"d{i}").mkdir(parents=True)
    (root / "a_link").mkdir(parents=True)
    (root / "a_link" / "huge").symlink_to(huge)
    one_run(root, "z_run")
    monkeypatch.setattr(logdir_module, "MAX_SCAN_ENTRIES", 20)
    runs, _ = scan(root)
    assert "z_run" in runs
