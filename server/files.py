"""Opening the files a logdir names: regular files only, and never waiting on one.

A name that looks like a trace can be a FIFO, a socket or a device (`mkfifo run/w.pt.trace.json`,
a link to `/dev/zero`): `open()` on a FIFO blocks until a writer appears, and a device never
ends. Local files are therefore opened without blocking and checked to be regular files
before a byte is read; remote (fsspec) objects are plain objects by construction.
"""

from __future__ import annotations

import io
import os
import stat
from typing import BinaryIO

import fsspec


class NotARegularFile(OSError):
    """The path names a FIFO, socket, device or folder, which profboard never reads."""


def is_local(path: str) -> bool:
    """Whether `path` is a local path rather than an fsspec URL."""
    return fsspec.core.split_protocol(path)[0] in (None, "file", "local")


def kind_of(mode: int) -> str:
    """A word for a file type that is not a regular file, for messages."""
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return word
    return "not a regular file"


def open_regular(path: str) -> BinaryIO:
    """A binary reader of `path` (local path or fsspec URL); raises NotARegularFile for anything
    but a regular file, and OSError as `open` does."""
    if not is_local(path):
        return fsspec.open(path, "rb").open()
    local = fsspec.core.split_protocol(path)[1] if "://" in path else path
    # O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer.
    fd = os.open(local, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(f"it is {kind_of(mode)}, not a regular file")
        # Regular files ignore O_NONBLOCK, but clear it so the descriptor behaves as usual.
        os.set_blocking(fd, True)
        return io.open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def read_capped(fh: BinaryIO, max_bytes: int) -> bytearray | None:
    """Everything `fh` holds, or None when it holds more than `max_bytes`. A local file is read
    into a buffer of its size, anything else into one growing buffer: the bytes are held once,
    not once per piece and again joined."""
    try:
        expected = os.fstat(fh.fileno()).st_size
    except (OSError, AttributeError, io.UnsupportedOperation):
        expected = 0
    if expected > max_bytes:
        return None
    out = bytearray(expected)
    filled = fh.readinto(out) if expected else 0
    del out[filled:]
    while len(out) <= max_bytes:  # the file grew since fstat, or its size was unknown
        block = fh.read(min(_STEP, max_bytes + 1 - len(out)))
        if not block:
            return out
        out += block
    return None


_STEP = 8 << 20
