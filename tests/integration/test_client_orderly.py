"""Orderly consumption: per-queue order kept through suspends and through a rebalance."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict

import pytest

from pocketmq.client import (
    SUCCESS,
    SUSPEND_CURRENT_QUEUE_A_MOMENT,
    ConsumeFromWhere,
    Message,
    Producer,
    PushConsumer,
)
from pocketmq.testing import Cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


KEYS = 8
PER_KEY = 60


async def produce(c: Cluster, topic: str, start: int, stop: int) -> None:
    async with Producer("OPG", namesrv=c.namesrv_addr) as producer:
        for seq in range(start, stop):
            for k in range(KEYS):
                await producer.send(Message(topic, f"k{k}:{seq}".encode()), sharding_key=f"k{k}")


async def test_orderly_order_survives_suspend_and_rebalance(pmq: Cluster) -> None:
    await pmq.create_topic("Ordered", queues=4)
    events: list[tuple[str, str, int, int]] = []  # (consumer, key, seq, queue)
    suspended: set[bytes] = set()

    def make(name: str) -> PushConsumer:
        async def listener(msgs, ctx):
            assert len(msgs) == 1
            m = msgs[0]
            if random.random() < 0.05 and m.body not in suspended:
                suspended.add(m.body)
                return SUSPEND_CURRENT_QUEUE_A_MOMENT
            key, seq = m.body.decode().split(":")
            events.append((name, key, int(seq), m.queue_id))
            await asyncio.sleep(0)
            return SUCCESS

        consumer = PushConsumer("OCG", namesrv=pmq.namesrv_addr, listener=listener, orderly=True,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                instance_name=name, rebalance_interval=1000, suspend_current_queue_time_millis=50)  # fmt: skip
        consumer.subscribe("Ordered")
        return consumer

    a = make("A")
    await a.start()
    b = make("B")
    try:
        await produce(pmq, "Ordered", 0, PER_KEY // 2)
        await wait_until(lambda: len(events) >= KEYS * PER_KEY // 4)
        await b.start()  # rebalance moves queues from A to B while A is consuming
        await wait_until(lambda: any(mq.topic == "Ordered" for mq in b.rebalance.process_queue_table))
        await produce(pmq, "Ordered", PER_KEY // 2, PER_KEY)
        await wait_until(lambda: len({(k, s) for _, k, s, _ in events}) >= KEYS * PER_KEY, timeout=60)
    finally:
        await b.shutdown()
        await a.shutdown()
    per_key: dict[str, list[int]] = defaultdict(list)
    for _, key, seq, _ in events:
        per_key[key].append(seq)
    assert len(per_key) == KEYS
    for key, seqs in per_key.items():
        assert seqs == sorted(seqs), f"{key} consumed out of order: {seqs}"
        assert sorted(set(seqs)) == list(range(PER_KEY)), f"{key} lost messages"
        assert len(seqs) == len(set(seqs)), f"{key} consumed a message twice: {seqs}"
    assert {n for n, *_ in events} == {"A", "B"}, "the second consumer never got a queue"
    assert suspended, "the suspend path was exercised"


async def test_batch_consumed_while_its_queue_is_dropped_is_committed(pmq: Cluster) -> None:
    """The A->B handover race, made deterministic: a rebalance drops a queue while the orderly
    listener is running on it. The remover waits for the queue lock, so the batch the listener
    finishes must be committed before the offset is persisted and the broker lock released;
    otherwise the next owner starts from the old offset and consumes the batch again."""
    await pmq.create_topic("OrderedDrop", queues=1)
    entered = asyncio.Event()
    release = asyncio.Event()
    consumed: list[bytes] = []

    async def listener(msgs, ctx):
        if not consumed:
            entered.set()
            await release.wait()
        consumed.extend(m.body for m in msgs)
        return SUCCESS

    consumer = PushConsumer("ODG", namesrv=pmq.namesrv_addr, listener=listener, orderly=True,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe("OrderedDrop")
    await consumer.start()
    try:
        async with Producer("ODP", namesrv=pmq.namesrv_addr) as producer:
            await producer.send(Message("OrderedDrop", b"first"))
        await asyncio.wait_for(entered.wait(), 30)
        [(mq, pq)] = [
            (m, p) for m, p in consumer.rebalance.process_queue_table.items() if m.topic == "OrderedDrop"
        ]
        pq.dropped = True  # what the rebalance does before it removes a queue
        removal = asyncio.ensure_future(consumer.remove_unnecessary_message_queue(mq, pq))
        await asyncio.sleep(0.05)
        assert not removal.done(), "the remover must wait for the running listener"
        release.set()
        assert await asyncio.wait_for(removal, 5)
        addr = pmq.brokers[0].broker_addr
        committed = await consumer.instance.query_consumer_offset(addr, "ODG", mq)
        assert consumed == [b"first"]
        assert committed == 1, f"the consumed batch was not committed before the handover: {committed}"
    finally:
        release.set()
        await consumer.shutdown()
