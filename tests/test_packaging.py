"""Every Python package under the source folders is in pyproject's package list, so a plain
(non-editable) install, as the Docker image makes, holds all of profboard; the wheel holds the pages'
files and builds without warnings; `make demo` installs profboard alone."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_package_is_listed():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for name, folder in config["package-dir"].items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((name, *relative)))
    assert found - listed == set(), "packages missing from pyproject.toml"


def test_the_wheel_holds_every_page_file_without_warnings(tmp_path):
    # The pages' folders are data: listed as packages of data, setuptools neither warns about them
    # (it printed five 40-line warnings on every install) nor leaves a file out.
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path), str(REPO)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    output = built.stdout + built.stderr
    assert "absent from the `packages` configuration" not in output
    (wheel,) = tmp_path.glob("profboard-*.whl")
    held = set(zipfile.ZipFile(wheel).namelist())
    pages = {f"profboard/web/{p.relative_to(REPO / 'web').as_posix()}" for p in (REPO / "web").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert pages - held == set()


def test_make_demo_installs_no_test_extra(tmp_path):
    # What `make demo` would run on a fresh machine (make -n prints the commands without running them).
    dry = subprocess.run(["make", "-n", "demo", f"VENV={tmp_path / 'venv'}"], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    installs = [line for line in dry.stdout.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert installs and all("[" not in line for line in installs), installs
