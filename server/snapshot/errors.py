"""Why a snapshot file could not be read. Each message is safe to show to a user."""

from __future__ import annotations


class SnapshotError(ValueError):
    """A snapshot file that cannot be read; the message says why."""


class UnsafeSnapshot(SnapshotError):
    """The pickle asks for something other than plain data (a class, a function, a global)."""


class NotASnapshot(SnapshotError):
    """Not a pickle, or a pickle that does not hold an allocator snapshot."""


class SnapshotTooLarge(SnapshotError):
    """The file (or what it inflates to) is larger than the configured limit."""
