"""Polling for state that has no event of its own (a route to appear, a consumer to catch up)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable


async def wait_until(predicate: Callable[[], object], timeout: float = 20.0, step: float = 0.02) -> None:
    """Return once ``predicate()`` is true (awaited first when it returns an awaitable); raise
    AssertionError after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(step)
