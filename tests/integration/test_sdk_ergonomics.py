"""The SDK as a user meets it (issue 21 part 3): send_async backpressure past ``max_in_flight``
(asyncio and blocking), per-message ids of a batch, an awaitable "queues assigned" signal, and
``MQAdmin`` from the top-level package; against a real in-process name server + broker."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    ClientClosedError,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageQueue,
    MQAdmin,
    Producer,
    PushConsumer,
    SendStatus,
)
from pocketmq.client.sync import SyncProducer, SyncPushConsumer
from pocketmq.testing import Cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def test_send_async_loop_past_max_in_flight_completes_every_send(pmq: Cluster) -> None:
    await pmq.create_topic("Window", queues=4)
    async with Producer("PGW", namesrv=pmq.namesrv_addr, max_in_flight=4) as producer:
        await producer.send(Message("Window", b"warm"))
        # no await between the calls: 300 futures, at most 4 requests out at a time
        futs = [producer.send_async(Message("Window", b"%d" % i)) for i in range(300)]
        assert producer._window.busy <= 4
        results = await asyncio.gather(*futs)
        assert all(r.send_status is SendStatus.SEND_OK for r in results)
        # submit: the loop itself is held back, never more than 4 in flight
        peak = 0
        for i in range(200):
            await producer.submit(Message("Window", b"s%d" % i))
            peak = max(peak, producer._window.busy)
        assert peak <= 4
        await wait_until(lambda: producer._window.busy == 0)
        assert len({r.msg_id for r in results}) == 300


async def test_blocking_send_async_applies_backpressure(pmq: Cluster) -> None:
    await pmq.create_topic("WindowSync", queues=2)

    def produce() -> list[SendStatus]:
        with SyncProducer("PGWS", namesrv=pmq.namesrv_addr, max_in_flight=2) as producer:
            futs = [producer.send_async(Message("WindowSync", b"%d" % i)) for i in range(200)]
            assert all(isinstance(f, concurrent.futures.Future) for f in futs)
            return [f.result(timeout=30).send_status for f in futs]

    # the servers run on this loop: the blocking client runs in a thread
    statuses = await asyncio.to_thread(produce)
    assert statuses == [SendStatus.SEND_OK] * 200


async def test_send_batch_result_lists_one_id_per_message(pmq: Cluster) -> None:
    await pmq.create_topic("BatchIds", queues=1)
    async with Producer("PGB", namesrv=pmq.namesrv_addr) as producer:
        result = await producer.send_batch([Message("BatchIds", b"b%d" % i) for i in range(5)])
        single = await producer.send(Message("BatchIds", b"single"))
    assert len(result.msg_ids) == 5 and len(set(result.msg_ids)) == 5
    assert result.msg_ids == result.msg_id.split(",")
    assert len(result.offset_msg_ids) == 5 and len(set(result.offset_msg_ids)) == 5
    assert single.msg_ids == [single.msg_id] and single.offset_msg_ids == [single.offset_msg_id]
    async with LitePullConsumer("CGB", namesrv=pmq.namesrv_addr, consume_from_where=FIRST) as consumer:
        consumer.subscribe("BatchIds")
        got: list = []
        while len(got) < 6:
            got.extend(await consumer.poll(5.0))
    by_body = {m.body: m for m in got}
    # the i-th ids are the i-th message's UNIQ_KEY and its broker offset msgId
    assert [by_body[b"b%d" % i].uniq_key for i in range(5)] == result.msg_ids
    assert [by_body[b"b%d" % i].msg_id for i in range(5)] == result.offset_msg_ids


async def test_push_consumer_wait_assigned_then_receives_what_is_sent_after(pmq: Cluster) -> None:
    await pmq.create_topic("Assigned", queues=4)
    got: list = []

    async def listener(msgs, ctx):
        got.extend(msgs)
        return CONSUME_SUCCESS

    consumer = PushConsumer("CGA", namesrv=pmq.namesrv_addr, listener=listener, consume_from_where=LAST)
    consumer.subscribe("Assigned")
    async with consumer, Producer("PGA", namesrv=pmq.namesrv_addr) as producer:
        queues = await consumer.wait_assigned(30.0)
        assert queues == {MessageQueue("Assigned", "broker-a", i) for i in range(4)}
        assert queues == consumer.assignment()
        assert await consumer.wait_assigned(0.01) == queues  # at once when assigned already
        for i in range(8):
            await producer.send(Message("Assigned", b"%d" % i))
        await wait_until(lambda: len(got) >= 8)
    with pytest.raises(ClientClosedError):
        await consumer.wait_assigned(1.0)


async def test_lite_pull_wait_assigned_subscribe_and_assign(pmq: Cluster) -> None:
    await pmq.create_topic("AssignedLite", queues=2)
    async with LitePullConsumer("CGL", namesrv=pmq.namesrv_addr) as consumer:
        consumer.subscribe("AssignedLite")
        assert await consumer.wait_assigned(30.0) == {
            MessageQueue("AssignedLite", "broker-a", i) for i in range(2)
        }
    one = {MessageQueue("AssignedLite", "broker-a", 1)}
    async with LitePullConsumer("CGL2", namesrv=pmq.namesrv_addr) as consumer:
        waiter = asyncio.ensure_future(consumer.wait_assigned(30.0))
        consumer.assign(one)
        assert await waiter == one


async def test_wait_assigned_times_out_without_queues(pmq: Cluster) -> None:
    consumer = LitePullConsumer("CGT", namesrv=pmq.namesrv_addr)
    consumer.subscribe("NoSuchTopicYet")
    async with consumer:
        with pytest.raises(TimeoutError):
            await consumer.wait_assigned(0.3)


async def test_blocking_push_consumer_wait_assigned(pmq: Cluster) -> None:
    await pmq.create_topic("AssignedSync", queues=2)

    def run() -> set[MessageQueue]:
        consumer = SyncPushConsumer("CGS", namesrv=pmq.namesrv_addr, listener=lambda m, c: CONSUME_SUCCESS)
        consumer.subscribe("AssignedSync")
        with consumer:
            return consumer.wait_assigned(30.0)

    assert len(await asyncio.to_thread(run)) == 2


async def test_mqadmin_is_exported_from_the_client_package(pmq: Cluster) -> None:
    await pmq.create_topic("AdminTop", queues=2)
    async with MQAdmin(pmq.namesrv_addr) as admin:
        assert "AdminTop" in await admin.topic_list()
