"""Where a call stack's file is on this machine, for the page's editor links.

PyTorch 2.x records a frame's file relative to the entry of Python's sys.path it was found under
("torch/nn/modules/conv.py", "train.py"), so a link needs a folder to put before it. `--source-root
PATH` names such folders (a checkout, a virtual environment's site-packages), looked in in order: the
first that holds the file gives its absolute path. A path that would leave its root ("../x") is not
looked up, and nothing but whether the file exists is read.
"""

from __future__ import annotations

import os
import posixpath
import re
import threading
from typing import Any, Sequence

# Files looked up are remembered (a trace names a few thousand at most); past this many, no more are.
MAX_REMEMBERED = 100_000
_ABSOLUTE = re.compile(r"^(/|[A-Za-z]:[\\/]|\\\\)")


class SourceRoots:
    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = tuple(os.path.realpath(os.path.expanduser(root)) for root in roots)
        self._found: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def locate(self, file: str | None) -> str | None:
        """The absolute path of a relative `file` under the first root that holds it; None for an
        absolute path (it is its own), or when no root holds it."""
        if not file or not self.roots or _ABSOLUTE.match(file):
            return None
        with self._lock:
            if file in self._found:
                return self._found[file]
        relative = posixpath.normpath(file.replace("\\", "/"))
        found = None
        if relative != ".." and not relative.startswith("../"):
            found = next((candidate for root in self.roots
                          if os.path.isfile(candidate := os.path.join(root, relative))), None)
        with self._lock:
            if len(self._found) < MAX_REMEMBERED:
                self._found[file] = found
        return found

    def with_paths(self, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`frames` ({file, line, function}), each with `path`: where its file is here, when a root holds it."""
        return [{**frame, "path": self.locate(frame.get("file"))} for frame in frames]
