"""`profboard summary`'s load alone, timed as bench/reference_plugin.py times the reference's RunLoader.load:
after the imports, which a first summary of a small trace does (on its own empty store).

    .venv/bin/python bench/summary_load.py SMALL_LOGDIR LOGDIR CACHE

Prints the seconds of `profboard summary LOGDIR --json --cache-dir CACHE` run in this process: with CACHE
empty, the trace parsed, stored and its overview computed, as a cold whole process does after its imports.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time


def main() -> int:
    small, logdir, cache = sys.argv[1:4]
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")  # as cli.main sets it before numpy is imported
    from profboard.server.cli import summary

    with tempfile.TemporaryDirectory() as warm, contextlib.redirect_stdout(io.StringIO()):
        if summary([small, "--json", "--cache-dir", warm]) != 0:
            return 1
        start = time.perf_counter()
        status = summary([logdir, "--json", "--cache-dir", cache])
        seconds = time.perf_counter() - start
    print(f"{seconds:.4f}")
    return status


if __name__ == "__main__":
    sys.exit(main())
