"""The name of a trace's entry in the store (entry.py): one version of one trace file, as parsed by
one version of the tables into one layout of entry. Kept apart and light: the server looks an
entry up by its key before it imports anything that reads entries."""

from __future__ import annotations

import hashlib

# Bump when the tables' content or layout changes (tables.py): it keys the store, so entries of
# an older parser are never read.
TABLES_VERSION = 4
# Bump when the files of an entry or meta.json change shape (entry.py); it keys the entry too.
ENTRY_LAYOUT = 3


def entry_key(path: str, size: int, mtime: float) -> str:
    """Identity of one version of one trace file under the current tables and entry layout."""
    text = f"{TABLES_VERSION}\0{ENTRY_LAYOUT}\0{path}\0{size}\0{mtime!r}"
    # surrogateescape: a path whose bytes are not UTF-8 (Python keeps them as lone surrogates)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]
