"""`run(coroutine)`: asyncio.run for tests that drive an ASGI app directly.

A test process that has used Playwright's sync API (the browser tests, on the same pytest-xdist
worker) keeps Playwright's event loop marked as running in its main thread, and asyncio.run
refuses to start there; a thread of its own has no running loop.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
