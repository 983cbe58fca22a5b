"""The consumers' rebalance listener (RocketMQ's MessageQueueListener) (issue 22)."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client import CONSUME_SUCCESS, LitePullConsumer, PushConsumer
from pocketmq.testing import Cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration


async def test_push_and_lite_consumers_report_their_queues(pmq: Cluster) -> None:
    await pmq.create_topic("RbT", queues=4)
    seen: list[tuple[str, int, int]] = []
    changed = asyncio.Event()

    async def on_change(topic, mq_all, mine) -> None:  # a coroutine listener
        seen.append((topic, len(mq_all), len(mine)))
        changed.set()

    async def listener(msgs, ctx):
        return CONSUME_SUCCESS

    first = PushConsumer("RbG", namesrv=pmq.namesrv_addr, listener=listener, instance_name="one")
    first.rebalance_listener = on_change
    first.subscribe("RbT")
    async with first:
        await asyncio.wait_for(changed.wait(), 30)
        assert seen[-1] == ("RbT", 4, 4)
        changed.clear()
        lite_seen: list[tuple[str, int]] = []
        lite = LitePullConsumer("RbG", namesrv=pmq.namesrv_addr, instance_name="two")

        def on_lite_change(topic, mq_all, mine) -> None:  # a plain function listener
            lite_seen.append((topic, len(mine)))
            changed.set()

        lite.rebalance_listener = on_lite_change
        lite.subscribe("RbT")
        async with lite:
            while not (seen[-1] == ("RbT", 4, 2) and lite_seen and lite_seen[-1] == ("RbT", 2)):
                await asyncio.wait_for(changed.wait(), 60)
                changed.clear()
