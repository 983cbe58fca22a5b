"""Shared by the client integration tests: import ``loop_clean_at_exit`` to activate it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio


@pytest_asyncio.fixture(autouse=True)
async def loop_clean_at_exit() -> AsyncIterator[None]:
    """Set up first, torn down last: once every fixture is gone, no task may be left."""
    yield
    for _ in range(3):
        await asyncio.sleep(0)
    current = asyncio.current_task()
    leaked = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    assert not leaked, f"tasks left on the loop: {sorted(t.get_name() for t in leaked)}"
