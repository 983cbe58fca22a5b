"""RESET_CONSUMER_CLIENT_OFFSET on a live push consumer, with the races pinned down.

``mqadmin resetOffsetByTime`` asks each broker in turn; each broker commits the new offsets and
pushes its own queues to the client. The second push may arrive after the client already
re-created the first broker's process queues. RocketMQ semantics: a push only touches the
queues it names, the reset offsets win over anything in flight, and they are what the broker
stores afterwards.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Message, Producer, PushConsumer
from pocketmq.client.admin.admin import MQAdmin
from pocketmq.client.message import MessageQueue
from pocketmq.testing import Cluster

if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.integration.support import collecting_consumer, loop_clean_at_exit  # noqa: E402, F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC = "ResetT"
GROUP = "CG-reset"


async def start_consumer(c: Cluster, got: list[Any]) -> PushConsumer:
    pc = collecting_consumer(
        c, GROUP, TOPIC, got, persist_consumer_offset_interval=50, rebalance_interval=1000
    )
    await pc.start()
    return pc


async def send(c: Cluster, first: int, n: int) -> None:
    async with Producer("PG-reset", namesrv=c.namesrv_addr) as producer:
        for i in range(first, first + n):
            await producer.send(Message(TOPIC, b"m-%d" % i))


async def fill(c: Cluster, n: int) -> None:
    await c.create_topic(TOPIC, queues=2)
    await send(c, 0, n)


def live_queues(pc: PushConsumer, broker: str) -> dict[MessageQueue, Any]:
    return {
        mq: pq
        for mq, pq in pc.rebalance.process_queue_table.items()
        if mq.topic == TOPIC and mq.broker_name == broker and not pq.dropped
    }


async def test_second_broker_reset_keeps_the_first_brokers_new_queues(two: Cluster) -> None:
    """The flaky mqadmin reset: broker B's push used to drop the process queues the client had
    just re-created for broker A, and those queues were never pulled again."""
    await fill(two, 24)
    got: list[Any] = []
    pc = await start_consumer(two, got)
    try:
        await wait_until(lambda: len(got) >= 24)
        got.clear()
        names = sorted(b.config.broker_name for b in two.brokers)
        async with MQAdmin(two.namesrv_addr) as admin:
            addr = {b.config.broker_name: b.broker_addr for b in two.brokers}
            old = live_queues(pc, names[0])
            await admin.api.invoke_broker_to_reset_offset(addr[names[0]], TOPIC, GROUP, 0)
            # deterministic interleaving: B's push arrives only once A's queues are back
            await wait_until(lambda: len(live_queues(pc, names[0])) == 2)
            assert not set(map(id, live_queues(pc, names[0]).values())) & set(map(id, old.values()))
            await admin.api.invoke_broker_to_reset_offset(addr[names[1]], TOPIC, GROUP, 0)
        await wait_until(lambda: len({m.body for m in got}) >= 24)
        assert len(live_queues(pc, names[0])) == 2 and len(live_queues(pc, names[1])) == 2
        # and every queue keeps being pulled: new messages on all four queues arrive
        got.clear()
        await send(two, 24, 8)
        await wait_until(lambda: len({m.body for m in got}) >= 8)
    finally:
        await pc.shutdown()


async def test_reset_wins_over_the_offsets_in_flight(two: Cluster) -> None:
    """The consumer's own persists (periodic, every 50 ms here, and the commit offset each pull
    carries) must not put the pre-reset offsets back on the broker."""
    await fill(two, 24)
    got: list[Any] = []
    pc = await start_consumer(two, got)
    try:
        await wait_until(lambda: len(got) >= 24)
        await asyncio.sleep(0.2)  # several periodic persists of the consumed offsets
        got.clear()
        async with MQAdmin(two.namesrv_addr) as admin:
            await admin.reset_offset_by_time(GROUP, TOPIC, 0)
            await wait_until(lambda: len({m.body for m in got}) >= 24)
            await asyncio.sleep(0.2)
            progress = await admin.consumer_progress(GROUP, TOPIC)
        assert progress.diff_total == 0 and sum(r.consumer_offset for r in progress.rows) == 24
    finally:
        await pc.shutdown()
