"""Every Python package under the source folders is in pyproject's package list, so a plain
(non-editable) install, as the Docker image makes, holds all of profboard."""

from __future__ import annotations

import tomllib
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
