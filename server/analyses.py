"""The server's heavy modules (pandas, Arrow, the analyses, the provider, the view slices), imported
in one go by one thread at a time.

A fresh server imports none of them before it lists the logdir's runs (issue 15); afterwards several
threads need them at about the same moment: the one including the views' routers (app.py), the
store's openers and the thread taking the loaders' news (store.py). Modules that import each other,
imported for the first time from several threads at once, can deadlock in the import system; a CI
run saw a server whose requests for a view never got an answer. Each of those threads calls
`import_analyses()` before it uses them: the first imports everything, the others wait for it.
"""

from __future__ import annotations

import importlib
import threading

from .api import SLICES

# Besides the view slices (which import the provider, the analyses and pandas): what the store's threads use.
_MODULES = ("profboard.server.provider", "profboard.server.derived", "profboard.server.trace.shared",
            "profboard.server.trace.decode")
_lock = threading.Lock()
_imported = False


def import_analyses() -> None:
    """Import the heavy modules unless done; a second caller waits for the first."""
    global _imported
    if _imported:
        return
    with _lock:
        if not _imported:
            for name in _MODULES:
                importlib.import_module(name)
            for entry in SLICES:
                entry.view
            _imported = True
