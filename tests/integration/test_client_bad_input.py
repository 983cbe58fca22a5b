"""Bad input: clear exceptions, retry paths for failing listeners, a clean loop at exit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    ClientClosedError,
    ClientStateError,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageQueue,
    MessageValidationError,
    Producer,
    PushConsumer,
    TopicRouteNotFoundError,
)
from pocketmq.testing import Cluster, cluster
from tests.integration.support import loop_clean_at_exit, open_dlq_for_reading  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
async def pmq(tmp_path) -> AsyncIterator[Cluster]:
    async with cluster(tmp_path / "pmq", broker_config={"autoCreateTopicEnable": False}) as c:
        yield c


async def test_producer_rejects_bad_input(pmq: Cluster) -> None:
    await pmq.create_topic("Exists", queues=2)
    producer = Producer("BPG", namesrv=pmq.namesrv_addr)
    with pytest.raises(ClientClosedError):
        await producer.send(Message("Exists", b"x"))
    async with producer:
        with pytest.raises(MessageValidationError, match="over the max"):
            await producer.send(Message("Exists", b"x" * (4 * 1024 * 1024 + 1)))
        with pytest.raises(MessageValidationError, match="illegal characters"):
            await producer.send(Message("no/such topic", b"x"))
        with pytest.raises(MessageValidationError, match="length is zero"):
            await producer.send(Message("Exists", b""))
        with pytest.raises(TopicRouteNotFoundError):
            await producer.send(Message("NeverCreated", b"x"))  # auto-create is off
        with pytest.raises(ClientStateError):
            await producer.start()
        assert (await producer.send(Message("Exists", b"still fine"))).queue_offset >= 0
    with pytest.raises(ClientClosedError):
        await producer.send(Message("Exists", b"x"))


async def test_consumer_misuse(pmq: Cluster) -> None:
    consumer = PushConsumer("BCG", namesrv=pmq.namesrv_addr)
    with pytest.raises(ClientStateError, match="listener"):
        await consumer.start()
    consumer.register_listener(lambda msgs, ctx: CONSUME_SUCCESS)
    with pytest.raises(ClientStateError, match="subscription"):
        await consumer.start()
    with pytest.raises(MessageValidationError):
        consumer.subscribe("bad topic")


async def test_sync_listener_and_raising_listener_do_not_lose_messages(pmq: Cluster) -> None:
    await pmq.create_topic("Raise", queues=1)
    seen: list[bytes] = []
    calls = 0

    def listener(msgs, ctx):  # a plain function works too
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("listener bug")
        seen.extend(m.body for m in msgs)
        return CONSUME_SUCCESS

    consumer = PushConsumer("RCG", namesrv=pmq.namesrv_addr, listener=listener,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe("Raise")
    async with Producer("RPG", namesrv=pmq.namesrv_addr) as producer:
        await producer.send(Message("Raise", b"m0"))
        async with consumer:
            await wait_until(lambda: b"m0" in seen, timeout=30)
    assert calls >= 2


async def test_hanging_listener_is_cancelled_and_its_message_kept(pmq: Cluster) -> None:
    await pmq.create_topic("Hang", queues=1)
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def listener(msgs, ctx):
        ctx.delay_level_when_next_consume = -1  # failed → DLQ at once (no schedule service needed)
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return CONSUME_SUCCESS

    consumer = PushConsumer("HCG", namesrv=pmq.namesrv_addr, listener=listener, consume_timeout=0.01,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe("Hang")
    async with Producer("HPG", namesrv=pmq.namesrv_addr) as producer, consumer:
        await producer.send(Message("Hang", b"slow"))
        await asyncio.wait_for(started.wait(), 20)
        await wait_until(lambda: bool(cancelled), timeout=10)  # 0.6 s consume timeout
        await open_dlq_for_reading(pmq, "HCG")
        probe = LitePullConsumer("HProbe", namesrv=pmq.namesrv_addr)
        async with probe:
            mq = MessageQueue("%DLQ%HCG", "broker-a", 0)
            found: list[bytes] = []
            for _ in range(100):
                try:
                    found = [m.body for m in (await probe.pull(mq, 0, 8)).msgs]
                except Exception:
                    found = []
                if found:
                    break
                await asyncio.sleep(0.05)
    assert found == [b"slow"]
