"""The blocking facade, used from plain (non-async) code."""

from __future__ import annotations

import contextlib

import pytest

from pocketmq.client import Message, MessageQueue, SendStatus
from pocketmq.client.sync import SyncLitePullConsumer, SyncProducer, run
from pocketmq.testing import cluster

pytestmark = pytest.mark.integration


def test_sync_producer_and_lite_consumer(tmp_path) -> None:
    stack = contextlib.AsyncExitStack()
    c = run(stack.enter_async_context(cluster(tmp_path / "pmq")))  # servers on the facade's loop
    try:
        run(c.create_topic("SyncT", queues=2))
        with SyncProducer("SPG", namesrv=c.namesrv_addr) as producer:
            results = [
                producer.send(Message("SyncT", b"%d" % i), queue=MessageQueue("SyncT", "broker-a", 0))
                for i in range(10)
            ]
            assert all(r.send_status is SendStatus.SEND_OK for r in results)
            producer.send_batch([Message("SyncT", b"b%d" % i) for i in range(5)])
        consumer = SyncLitePullConsumer(
            "SCG", namesrv=c.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        consumer.start()
        with consumer:
            mqs = consumer.fetch_message_queues("SyncT")
            assert len(mqs) == 2
            mq = MessageQueue("SyncT", "broker-a", 0)
            assert consumer.max_offset(mq) >= 10
            res = consumer.pull(mq, 0, 5)
            assert [m.body for m in res.msgs] == [b"0", b"1", b"2", b"3", b"4"]
            consumer.assign([mq])
            got: list[bytes] = []
            while len(got) < 10:
                msgs = consumer.poll(5.0)
                assert msgs
                got += [m.body for m in msgs]
            consumer.commit_sync()
            assert consumer.committed(mq) >= 10
    finally:
        run(stack.aclose())
