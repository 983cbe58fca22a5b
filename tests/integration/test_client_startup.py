"""Consumer start-up order (RocketMQ: routes, a heartbeat to every broker, then the first
rebalance) and a topic whose route only appears after the consumer started."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Message, Producer, PushConsumer
from pocketmq.testing import Cluster

if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.integration.support import collecting_consumer, loop_clean_at_exit  # noqa: E402, F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def consumer(c: Cluster, group: str, topic: str, got: list[Any]) -> PushConsumer:
    # Periodic rebalances and heartbeats far away: only the start-up sequence can assign queues.
    return collecting_consumer(
        c, group, topic, got, rebalance_interval=120_000, heartbeat_broker_interval=120_000
    )


async def send(c: Cluster, topic: str, n: int) -> None:
    async with Producer("PG-start", namesrv=c.namesrv_addr) as producer:
        for i in range(n):
            await producer.send(Message(topic, b"m-%d" % i))


async def test_start_announces_before_the_first_rebalance(two: Cluster, caplog: Any) -> None:
    await two.create_topic("Up", queues=2)
    await send(two, "Up", 8)
    got: list[Any] = []
    caplog.set_level(logging.INFO, logger="pocketmq.client")
    async with consumer(two, "CG-up", "Up", got) as pc:
        await wait_until(lambda: len(got) >= 8, 15.0)
        assert len(pc.rebalance.process_queue_table) == 4 + 2  # 2 x 2 queues + a %RETRY% queue per broker
    # the client's own warnings (the in-process brokers' loop-lag monitor may warn on a loaded
    # machine: a late loop is not a start-up defect)
    noisy = [
        r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("pocketmq.client")
    ]
    assert not noisy, [r.getMessage() for r in noisy]


async def test_topic_routed_after_start_is_consumed_without_waiting_for_a_period(
    two: Cluster, caplog: Any
) -> None:
    got: list[Any] = []
    caplog.set_level(logging.INFO, logger="pocketmq.client")
    async with consumer(two, "CG-late", "Late", got):
        # no route yet: the start-up heartbeat reached no broker of this topic
        await asyncio.sleep(0.3)
        await two.create_topic("Late", queues=2)
        await send(two, "Late", 6)
        # the route poll (1 s while a subscribed topic has none) finds it; the client announces
        # itself to the new brokers, then rebalances at once
        await wait_until(lambda: len(got) >= 6, 15.0)
    failed = [
        r.getMessage() for r in caplog.records if "rebalance" in r.getMessage() and "failed" in r.getMessage()
    ]
    assert not failed  # no rebalance ever asked a broker that did not know the group yet
