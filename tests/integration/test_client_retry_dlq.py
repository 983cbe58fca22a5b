"""Failed messages go back to the broker (CONSUMER_SEND_MSG_BACK, or a re-send to
``%RETRY%group`` when the broker refuses it), come back under their original topic with
reconsume_times + 1, and end in ``%DLQ%group`` after max_reconsume_times, or at once when the
listener asks for it (delay level -1)."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    RECONSUME_LATER,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageQueue,
    Producer,
    PushConsumer,
)
from pocketmq.testing import Cluster
from tests.integration.support import loop_clean_at_exit, open_dlq_for_reading  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


async def test_listener_sends_poison_straight_to_dlq(pmq: Cluster) -> None:
    await pmq.create_topic("PoisonT", queues=2)
    deliveries: list[bytes] = []

    async def listener(msgs, ctx):
        deliveries.extend(m.body for m in msgs)
        if any(m.body == b"poison" for m in msgs):
            ctx.delay_level_when_next_consume = -1
            return RECONSUME_LATER
        return CONSUME_SUCCESS

    consumer = PushConsumer("PTG", namesrv=pmq.namesrv_addr, listener=listener,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe("PoisonT")
    async with Producer("PTP", namesrv=pmq.namesrv_addr) as producer, consumer:
        for body in (b"ok1", b"poison", b"ok2"):
            await producer.send(Message("PoisonT", body))
        await wait_until(lambda: {b"ok1", b"ok2", b"poison"} <= set(deliveries))
        await open_dlq_for_reading(pmq, "PTG")
        dlq = LitePullConsumer("DLQReader", namesrv=pmq.namesrv_addr)
        async with dlq:
            mq = MessageQueue("%DLQ%PTG", "broker-a", 0)
            for _ in range(100):
                try:
                    res = await dlq.pull(mq, 0, 32)
                except Exception:
                    res = None
                if res is not None and res.msgs:
                    break
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
    assert res is not None and [m.body for m in res.msgs] == [b"poison"]
    dead = res.msgs[0]
    assert dead.get_property("RETRY_TOPIC") == "PoisonT"
    assert deliveries.count(b"poison") == 1 and deliveries.count(b"ok1") == 1


async def test_retry_then_success_and_poison_to_dlq(pmq: Cluster) -> None:
    await pmq.create_topic("RetryT", queues=2)
    deliveries: list[tuple[bytes, str, int]] = []
    delays: set[tuple[int, str | None]] = set()

    async def listener(msgs, ctx):
        ctx.delay_level_when_next_consume = 1  # 1 s: keep the test short
        for m in msgs:
            deliveries.append((m.body, m.topic, m.reconsume_times))
            delays.add((min(m.reconsume_times, 1), m.get_property("DELAY")))
            if m.body == b"poison" or (m.body == b"flaky" and m.reconsume_times == 0):
                return RECONSUME_LATER
        return CONSUME_SUCCESS

    consumer = PushConsumer("RTG", namesrv=pmq.namesrv_addr, listener=listener, max_reconsume_times=2,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe("RetryT")
    async with Producer("RTP", namesrv=pmq.namesrv_addr) as producer, consumer:
        for body in (b"ok", b"flaky", b"poison"):
            await producer.send(Message("RetryT", body, tags="t"))
        await wait_until(lambda: sum(1 for b, *_ in deliveries if b == b"poison") >= 3, timeout=30)
        await wait_until(lambda: sum(1 for b, *_ in deliveries if b == b"flaky") >= 2, timeout=30)
        await asyncio.sleep(1.5)
    flaky = [(t, r) for b, t, r in deliveries if b == b"flaky"]
    poison = [(t, r) for b, t, r in deliveries if b == b"poison"]
    assert flaky == [("RetryT", 0), ("RetryT", 1)]  # redelivered once, under its own topic
    assert poison == [("RetryT", 0), ("RetryT", 1), ("RetryT", 2)]  # then no more: DLQ
    assert [b for b, *_ in deliveries].count(b"ok") == 1
    # a redelivery came through the schedule service: DELAY holds the level it waited at
    assert delays == {(0, None), (1, "1")}
    await open_dlq_for_reading(pmq, "RTG")
    dlq = LitePullConsumer("DLQReader", namesrv=pmq.namesrv_addr)
    async with dlq:
        res = await dlq.pull(MessageQueue("%DLQ%RTG", "broker-a", 0), 0, 32)
    assert [m.body for m in res.msgs] == [b"poison"]
