"""Client test helpers: every async test must leave its event loop without stray tasks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio


@pytest_asyncio.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    yield
    await asyncio.sleep(0)
    current = asyncio.current_task()
    leaked = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    assert not leaked, f"tasks leaked by the test: {[t.get_name() for t in leaked]}"
