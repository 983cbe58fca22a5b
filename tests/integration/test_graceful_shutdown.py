"""Graceful push-consumer shutdown (issue 22): running listeners (concurrent and orderly) finish and their offsets commit
with ``await_termination_millis_when_shutdown``; without it they are cancelled (RocketMQ's 0)."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    SUCCESS,
    ConsumeFromWhere,
    Message,
    MessageQueue,
    Producer,
    PushConsumer,
)
from pocketmq.client.api import MQClientAPI
from pocketmq.remoting.transport.client import RemotingClient
from pocketmq.testing import Cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration


async def committed(c: Cluster, group: str, mq: MessageQueue) -> int:
    remoting = RemotingClient()
    try:
        return await MQClientAPI(remoting, [c.namesrv_addr]).query_consumer_offset(
            c.broker_addrs[0], group, mq
        )
    finally:
        await remoting.close()


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
@pytest.mark.parametrize(("grace_ms", "expected"), [(20_000, 1), (0, 0)])
async def test_shutdown_waits_for_running_listeners(
    pmq: Cluster, grace_ms: int, expected: int, orderly: bool
) -> None:
    topic, group = f"Grace{grace_ms}{orderly}", f"GraceCG{grace_ms}{orderly}"
    await pmq.create_topic(topic, queues=1)
    mq = MessageQueue(topic, "broker-a", 0)
    async with Producer("GracePG", namesrv=pmq.namesrv_addr) as producer:
        await producer.send(Message(topic, b"slow"), queue=mq)
    started, release = asyncio.Event(), asyncio.Event()
    finished: list[bytes] = []

    async def listener(msgs, ctx):
        started.set()
        await release.wait()
        finished.extend(m.body for m in msgs)
        return SUCCESS if orderly else CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv=pmq.namesrv_addr, listener=listener, orderly=orderly,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        await_termination_millis_when_shutdown=grace_ms,
    )  # fmt: skip
    consumer.subscribe(topic)
    await consumer.start()
    await asyncio.wait_for(started.wait(), 30)
    stopping = asyncio.create_task(consumer.shutdown())
    if expected:  # the listener may finish before or while shutdown waits: either way it commits
        asyncio.get_running_loop().call_later(0.2, release.set)
    await asyncio.wait_for(stopping, 60)
    release.set()  # without a grace period the listener was cancelled before this
    assert finished == ([b"slow"] if expected else [])
    assert await committed(pmq, group, mq) == expected
