"""Where a store on shared storage (server/trace/shared.py) is copied to be read: its local mirror, a
folder of this user's temporary folder named by the store's URL. Light on purpose: the server works out
its stores at start, before it imports any of the store's reading code.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

from ..logdir import is_remote


def mirror_of(shared: str) -> str:
    """The local store that mirrors the shared store `shared` (made, private to this user); raises
    OSError when another user owns that folder (whoever writes it decides what the server reads)."""
    name = hashlib.sha256(shared.rstrip("/").encode("utf-8", "surrogateescape")).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"profboard-mirror-{os.getuid()}-{name}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if os.lstat(folder).st_uid != os.getuid():
        raise PermissionError(f"{folder}, the local copy of the store {shared}, belongs to another user")
    return folder


def local_stores(stores: list[str]) -> tuple[list[str], str | None]:
    """`stores` with each shared store replaced by its mirror, and the first shared store (or None)."""
    shared = next((s for s in stores if is_remote(s)), None)
    return [mirror_of(s) if is_remote(s) else s for s in stores], shared
