"""Producer retry across broker groups: one group goes away, sends go on with no caller change."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.testing import Cluster, cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration


@pytest.fixture
async def pmq(tmp_path) -> AsyncIterator[Cluster]:
    async with cluster(tmp_path / "pmq", brokers=2) as c:
        yield c


@pytest.mark.parametrize("fault_tolerance", [False, True])
async def test_sends_succeed_on_the_surviving_broker(pmq: Cluster, fault_tolerance: bool) -> None:
    await pmq.create_topic("Failover", queues=4)
    async with Producer(
        "FPG", namesrv=pmq.namesrv_addr, send_latency_fault_enable=fault_tolerance
    ) as producer:
        used = {
            (await producer.send(Message("Failover", b"warm"))).message_queue.broker_name for _ in range(16)
        }
        assert used == {"broker-a", "broker-b"}
        await pmq.stop_broker(1)  # broker-b is gone; the producer's cached route still lists it
        for i in range(100):
            res = await producer.send(Message("Failover", b"%d" % i))
            assert res.send_status is SendStatus.SEND_OK
            assert res.message_queue.broker_name == "broker-a"
