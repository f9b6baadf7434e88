"""A logdir holding what no trace should be: FIFOs, links to secrets, to devices and to the whole
disk. The app with its loader processes (in-process, no parse cache): the good run loads, the others
fail with a clear message, and no byte of a file outside the logdir reaches an answer."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GOOD = REPO / "tests/data/h200/item_logging"
SECRET = "profboard-test-secret-7f3a"
ODD_RUN = "odd\\xff\\xfe name"  # as /api/runs names the folder b"odd\xff\xfe name"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, start_app):
    tmp = tmp_path_factory.mktemp("hostile")
    root = tmp / "logdir"
    shutil.copytree(GOOD, root / "good")
    for i in range(3):  # each FIFO used to hold a loader in open() forever
        (root / f"fifo{i}").mkdir()
        os.mkfifo(root / f"fifo{i}" / "w0.1.pt.trace.json")
    secret = tmp / "outside.txt"
    secret.write_text(f"root:x:0:0:root:/root:/bin/bash\nTOKEN={SECRET}\n")
    (root / "passwd").mkdir()
    (root / "passwd" / "w0.1.pt.trace.json").symlink_to(secret)
    (root / "environ").mkdir()
    (root / "environ" / "w0.1.pt.trace.json").symlink_to("/proc/self/environ")
    (root / "everything").symlink_to("/")
    # Names whose bytes are not UTF-8 (Python keeps them as lone surrogates, which JSON cannot
    # carry): /api/runs answered 500 for every run, and their traces failed to load.
    odd = os.fsdecode(b"odd\xff\xfe name")
    shutil.copytree(GOOD, root / odd)
    trace = next((root / odd).iterdir())
    trace.rename(trace.with_name(os.fsdecode(b"w\xff") + trace.name[trace.name.index("."):]))
    started = time.monotonic()
    server = start_app(root, expect=["good", "fifo0", "passwd", ODD_RUN], timeout=60)
    yield server, time.monotonic() - started
    server.stop()


def test_hostile_logdir_good_run_loads(hostile):
    server, seconds = hostile
    runs = server.runs()
    assert runs["good"]["status"] == "ready"
    assert seconds < 30  # the link to / is not walked


def test_hostile_logdir_fifos_fail_with_a_clear_message(hostile):
    server, _ = hostile
    runs = server.runs()
    for i in range(3):
        assert runs[f"fifo{i}"]["status"] == "error"
        assert "FIFO" in runs[f"fifo{i}"]["error"]


def test_hostile_logdir_never_shows_bytes_from_outside(hostile):
    server, _ = hostile
    body = server.get("/api/runs").text
    runs = server.runs()
    assert runs["passwd"]["status"] == "error" and "not a JSON trace" in runs["passwd"]["error"]
    for leak in (SECRET, "root:x", "/bin/bash", "PATH="):
        assert leak not in body
    assert "environ" not in runs  # a link into /proc is not followed: the folder holds no trace


def test_hostile_logdir_notes_say_which_links_were_followed(hostile):
    server, _ = hostile
    notes = server.get("/api/runs").json()["notes"]
    assert any(n.startswith("everything links to /: not followed") for n in notes), notes
    assert any("passwd/w0.1.pt.trace.json links to" in n and "outside the logdir" in n for n in notes), notes
    assert any("environ/w0.1.pt.trace.json links to" in n and "system folder" in n for n in notes), notes


def test_hostile_logdir_names_that_are_not_utf8_are_escaped(hostile):
    server, _ = hostile
    run = server.runs()[ODD_RUN]
    assert run["status"] == "ready" and run["workers"] == ["w\\xff"]
    assert server.get("/api/overview", {"run": ODD_RUN, "worker": "w\\xff"}).json()["steps"]
    raw = server.get("/api/trace/raw", {"run": ODD_RUN})
    assert raw.status_code == 200 and "w%FF." in raw.headers["content-disposition"]
