"""Stack frames of allocations: the site an allocation is charged to, and what hover shows.

A snapshot frame is {filename, line, name}. PyTorch records C++ frames (the allocator, the
dispatcher, ATen) and Python frames in one list, innermost first. The site of an allocation
is, in this order of preference:
1. the innermost Python frame outside torch's own package (the user's or the model's line,
   torchvision's included);
2. the innermost Python frame (inside torch: nn.Module, an optimizer, ...);
3. the outermost ATen operator the C++ frames name (`at::_ops::<op>::call` as `aten::<op>`),
   which is all there is for allocations made on the autograd thread;
4. none ("no stack recorded": allocations made before history recording was on).
Frame lists are shared between trace entries in real snapshots, so results are memoised by
the list's identity.
"""

from __future__ import annotations

import re
from typing import Any

MAX_HOVER_FRAMES = 12
NO_STACK = "(no stack recorded)"
BEFORE_HISTORY = "(allocated before the recorded history)"

_TORCH_PACKAGE = re.compile(r"(^|/)(site-packages|dist-packages|pytorch)/torch/|^torch/")
_ATEN_OP = re.compile(r"^at::_ops::([A-Za-z0-9_]+)::call\(")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _is_python(frame: dict[str, Any]) -> bool:
    return _text(frame.get("filename")).endswith(".py")


def _is_torch_python(filename: str) -> bool:
    # torch's own package, installed or in a source checkout; not torchvision & co (model code),
    # and not any folder that merely happens to be called torch (e.g. /opt/torch/.venv).
    return _TORCH_PACKAGE.search(filename.replace("\\", "/")) is not None


def frame_json(frame: dict[str, Any]) -> dict[str, Any]:
    """One frame in the project's shape: {file, line, function}."""
    line = frame.get("line")
    return {"file": _text(frame.get("filename")) or None,
            "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
            "function": _text(frame.get("name"))}


class SiteIndex:
    """Site ids for frame lists (memoised by the list's identity), and each site's description."""

    def __init__(self) -> None:
        self._by_list: dict[int, int] = {}
        self._keep: list[Any] = []  # holds each seen list, so its id stays unique
        self._ids: dict[str, int] = {}
        self.sites: list[dict[str, Any]] = []

    def site_of(self, frames: Any) -> int:
        """The site id of one frame list (anything not a list counts as no stack)."""
        key = id(frames)
        found = self._by_list.get(key)
        if found is None:
            found = self._by_list[key] = self._new(frames if isinstance(frames, list) else [])
            self._keep.append(frames)
        return found

    def named(self, label: str) -> int:
        """A site with no frames, for allocations whose own stack is unknown."""
        found = self._ids.get(label)
        if found is None:
            found = self._ids[label] = len(self.sites)
            self.sites.append({"site": label, "file": None, "line": None, "function": None, "op": None, "frames": []})
        return found

    def _new(self, frames: list[Any]) -> int:
        frames = [f for f in frames if isinstance(f, dict)]
        python = [f for f in frames if _is_python(f)]
        user = [f for f in python if not _is_torch_python(_text(f.get("filename")))]
        ops = [m.group(1) for m in (_ATEN_OP.match(_text(f.get("name"))) for f in frames) if m]
        op = f"aten::{ops[-1]}" if ops else None
        where = (user or python or [None])[0]
        if where is not None:
            site = frame_json(where)
            label = f"{site['file']}:{site['line']} {site['function']}"
        elif op is not None:
            site = {"file": None, "line": None, "function": op}
            label = op
        else:
            site = {"file": None, "line": None, "function": None}
            label = NO_STACK
        found = self._ids.get(label)
        if found is None:
            found = self._ids[label] = len(self.sites)
            self.sites.append({"site": label, **site, "op": op,
                               "frames": [frame_json(f) for f in python[:MAX_HOVER_FRAMES]]})
        return found
