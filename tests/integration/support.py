"""Shared by the client integration tests: import ``loop_clean_at_exit`` to activate it.
(The two-broker ``two`` fixture lives in conftest.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, PushConsumer
from pocketmq.testing import Cluster


def collecting_consumer(c: Cluster, group: str, topic: str, got: list[Any], **options: Any) -> PushConsumer:
    """A push consumer from the first offset whose listener appends every message to ``got``."""

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        got.extend(msgs)
        return CONSUME_SUCCESS

    options.setdefault("consume_from_where", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    pc = PushConsumer(group, namesrv=c.namesrv_addr, listener=listener, **options)
    pc.subscribe(topic, "*")
    return pc


@pytest_asyncio.fixture(autouse=True)
async def loop_clean_at_exit() -> AsyncIterator[None]:
    """Set up first, torn down last: once every fixture is gone, no task may be left."""
    yield
    for _ in range(3):
        await asyncio.sleep(0)
    current = asyncio.current_task()
    leaked = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    assert not leaked, f"tasks left on the loop: {sorted(t.get_name() for t in leaked)}"


async def open_dlq_for_reading(pmq: Cluster, group: str) -> None:
    """%DLQ% topics are created write-only, as in RocketMQ; an operator grants read first
    (``mqadmin updateTopicPerm -t %DLQ%<group> -p 6``)."""
    from pocketmq.client.admin.admin import MQAdmin

    await wait_until_dlq_exists(pmq, group)
    async with MQAdmin(pmq.namesrv_addr) as admin:
        await admin.update_topic_perm(f"%DLQ%{group}", 6, broker_addr=pmq.brokers[0].broker_addr)


async def wait_until_dlq_exists(pmq: Cluster, group: str) -> None:
    tcm = pmq.brokers[0].topic_config_manager
    for _ in range(200):
        if tcm.select_topic_config(f"%DLQ%{group}") is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"%DLQ%{group} was never created")
