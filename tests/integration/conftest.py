"""Fixtures for every integration test in this folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from pocketmq.testing import Cluster, cluster


@pytest_asyncio.fixture
async def two(tmp_path: Path) -> AsyncIterator[Cluster]:
    """A name server and two broker groups, in process, on ephemeral ports and a tmp dir."""
    async with cluster(tmp_path / "c", brokers=2) as c:
        yield c


@pytest_asyncio.fixture
async def pmq(tmp_path: Path) -> AsyncIterator[Cluster]:
    """A name server and one broker group, in process (a module may override it with its own)."""
    async with cluster(tmp_path / "pmq") as c:
        yield c
