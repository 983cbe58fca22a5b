"""Issue 22 defect 7: the lite-pull consumer's ``with`` block starts it (as ``SyncProducer``'s
does), subscribe/assign work after start, and an assign-mode consumer shuts down quietly."""

from __future__ import annotations

import contextlib
import logging

import pytest

from pocketmq.client import Message, MessageQueue
from pocketmq.client.sync import SyncLitePullConsumer, SyncProducer, run
from pocketmq.testing import cluster

pytestmark = pytest.mark.integration


def poll_bodies(consumer: SyncLitePullConsumer, n: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < n:
        msgs = consumer.poll(10.0)
        assert msgs, f"only {len(got)} of {n} messages arrived"
        got += [m.body for m in msgs]
    return got


def test_with_block_starts_the_lite_pull_consumer(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    stack = contextlib.AsyncExitStack()
    c = run(stack.enter_async_context(cluster(tmp_path / "pmq")))
    try:
        run(c.create_topic("LiteCtx", queues=2))
        mq = MessageQueue("LiteCtx", "broker-a", 0)
        with SyncProducer("LCP", namesrv=c.namesrv_addr) as producer:
            for i in range(6):
                producer.send(Message("LiteCtx", b"%d" % i), queue=mq)
        opts = {"namesrv": c.namesrv_addr, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}
        with SyncLitePullConsumer("LCS", **opts) as consumer:  # subscribe mode, after start
            consumer.subscribe("LiteCtx")
            assert sorted(poll_bodies(consumer, 6)) == [b"%d" % i for i in range(6)]
        caplog.clear()
        with caplog.at_level(logging.WARNING), SyncLitePullConsumer("LCA", **opts) as consumer:
            consumer.assign([mq])  # assign mode, after start
            assert poll_bodies(consumer, 6) == [b"%d" % i for i in range(6)]
            consumer.commit_sync()
        # the client's warnings (not the in-process broker's loop-lag monitor on a loaded machine)
        warned = [
            r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("pocketmq.client")
        ]
        assert not warned, caplog.text
        with SyncLitePullConsumer("LCA", **opts) as consumer:  # the commit survived
            consumer.assign([mq])
            assert consumer.committed(mq) == 6
    finally:
        run(stack.aclose())


async def test_async_for_over_a_lite_pull_consumer(tmp_path) -> None:
    from pocketmq.client import LitePullConsumer, Producer

    async with cluster(tmp_path / "pmq") as c:
        await c.create_topic("LiteIter", queues=2)
        async with Producer("LIP", namesrv=c.namesrv_addr) as producer:
            for i in range(10):
                await producer.send(Message("LiteIter", b"%d" % i))
        consumer = LitePullConsumer(
            "LIC", namesrv=c.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        consumer.subscribe("LiteIter")
        got: list[bytes] = []
        async with consumer:
            async for msg in consumer:
                got.append(msg.body)
                if len(got) == 10:
                    break
        assert sorted(got) == sorted(b"%d" % i for i in range(10))
        # after shutdown the iteration ends instead of raising
        assert [m async for m in consumer] == []
