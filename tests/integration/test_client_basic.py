"""Client SDK against a real in-process name server + broker (pocketmq.testing)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    ClientClosedError,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageModel,
    MessageValidationError,
    Producer,
    PushConsumer,
    SendStatus,
    unpack_body,
)
from pocketmq.testing import Cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


@contextlib.asynccontextmanager
async def collecting(c: Cluster, group: str, topic: str, expr: str = "*", **opts) -> AsyncIterator[list]:
    got: list = []

    async def listener(msgs, ctx):
        got.extend(msgs)
        return CONSUME_SUCCESS

    consumer = PushConsumer(
        group, namesrv=c.namesrv_addr, listener=listener, consume_from_where=FIRST, **opts
    )
    consumer.subscribe(topic, expr)
    async with consumer:
        yield got


async def test_send_all_forms_and_consume_with_tags(pmq: Cluster) -> None:
    await pmq.create_topic("Basic", queues=4)
    async with Producer("PG", namesrv=pmq.namesrv_addr) as producer:
        r = await producer.send(Message("Basic", b"a", tags="TagA", keys="k1"))
        assert r.send_status is SendStatus.SEND_OK and len(r.msg_id) == 32 and len(r.offset_msg_id) == 32
        await producer.send(Message("Basic", b"b", tags="TagB"))
        await producer.send(Message("Basic", b"c", tags="TagC"))
        fut = producer.send_async(Message("Basic", b"d", tags="TagA"))
        # the first attempt's fast path (send_first): its future is made with the producer's
        # loop, recorded at start (no running-loop look-up, a getpid syscall in 3.11, per send)
        assert type(fut).__name__ == "SendFuture"
        assert fut.get_loop() is asyncio.get_running_loop() is producer._sender.loop
        assert (await fut).send_status is SendStatus.SEND_OK
        await producer.send_oneway(Message("Basic", b"e", tags="TagB"))
        batch = await producer.send_batch([Message("Basic", f"f{i}".encode(), tags="TagA") for i in range(5)])
        assert len(batch.msg_id.split(",")) == 5
        await producer.send(Message.from_object("Basic", {"n": 1, "l": [1, 2]}, tags="TagB"))
        big = b"z" * 10_000  # compressed on the wire, inflated for the consumer
        await producer.send(Message("Basic", big, tags="TagA"))
    async with collecting(pmq, "CG1", "Basic", "TagA || TagB") as got:
        await wait_until(lambda: len(got) >= 11)
        await asyncio.sleep(0.2)
    bodies = sorted(m.body for m in got)
    assert len(got) == 11
    assert b"c" not in bodies and big in bodies
    obj = [m for m in got if m.properties.get("CONTENT_TYPE")][0]
    assert unpack_body(obj) == {"n": 1, "l": [1, 2]}
    assert {m.tags for m in got} == {"TagA", "TagB"}
    assert [m for m in got if m.body == b"a"][0].keys == "k1"


async def test_auto_created_topic(pmq: Cluster) -> None:
    async with Producer("PG", namesrv=pmq.namesrv_addr) as producer:
        r = await producer.send(Message("AutoCreated", b"x"))
        assert r.send_status is SendStatus.SEND_OK


async def test_clustering_three_consumers_each_message_once(pmq: Cluster) -> None:
    await pmq.create_topic("Cluster3", queues=8)
    counts: dict[bytes, int] = {}
    owners: dict[str, set[int]] = {}

    def make(i: int):
        async def listener(msgs, ctx):
            for m in msgs:
                counts[m.body] = counts.get(m.body, 0) + 1
                owners.setdefault(f"c{i}", set()).add(m.queue_id)
            return CONSUME_SUCCESS

        c = PushConsumer("CG3", namesrv=pmq.namesrv_addr, listener=listener, consume_from_where=FIRST,
                         instance_name=f"c{i}", rebalance_interval=1000)  # fmt: skip
        c.subscribe("Cluster3")
        return c

    consumers = [make(i) for i in range(3)]
    for c in consumers:
        await c.start()
    try:
        # membership settles (every member sees all three ids) before anything is produced
        await wait_until(lambda: sum(len(c.rebalance.process_queue_table) for c in consumers) >= 8 + 1)
        await asyncio.sleep(1.5)
        n = 10_000
        async with Producer("PG", namesrv=pmq.namesrv_addr) as producer:
            for start in range(0, n, 100):
                await producer.send_batch([Message("Cluster3", b"%d" % i) for i in range(start, start + 100)])
        await wait_until(lambda: len(counts) >= n, timeout=60)
        await asyncio.sleep(0.5)
    finally:
        for c in consumers:
            await c.shutdown()
    assert len(counts) == n
    assert max(counts.values()) == 1, "a message was consumed twice while membership was stable"
    queue_sets = list(owners.values())
    assert len(queue_sets) == 3 and sum(len(s) for s in queue_sets) == 8
    assert not (queue_sets[0] & queue_sets[1]) and not (queue_sets[1] & queue_sets[2])


async def test_broadcasting_delivers_to_every_consumer(pmq: Cluster, tmp_path) -> None:
    await pmq.create_topic("Bcast", queues=4)
    got: dict[int, list[bytes]] = {0: [], 1: []}

    def make(i: int):
        async def listener(msgs, ctx):
            got[i].extend(m.body for m in msgs)
            return CONSUME_SUCCESS

        c = PushConsumer("BG", namesrv=pmq.namesrv_addr, listener=listener, consume_from_where=FIRST,
                         message_model=MessageModel.BROADCASTING, instance_name=f"b{i}",
                         local_offset_store_dir=str(tmp_path / "offsets"))  # fmt: skip
        c.subscribe("Bcast")
        return c

    consumers = [make(0), make(1)]
    for c in consumers:
        await c.start()
    try:
        async with Producer("PG", namesrv=pmq.namesrv_addr) as producer:
            await producer.send_batch([Message("Bcast", b"%d" % i) for i in range(300)])
        await wait_until(lambda: len(got[0]) >= 300 and len(got[1]) >= 300)
    finally:
        for c in consumers:
            await c.shutdown()
    assert sorted(got[0]) == sorted(got[1]) == sorted(b"%d" % i for i in range(300))
    assert list((tmp_path / "offsets").rglob("offsets.json"))  # local offset store persisted


async def test_lite_pull_assign_seek_commit_and_restart(pmq: Cluster) -> None:
    await pmq.create_topic("Lite", queues=2)
    async with Producer("PG", namesrv=pmq.namesrv_addr) as producer:
        mqs = sorted(await producer.fetch_publish_message_queues("Lite"))
        for i in range(20):
            await producer.send(Message("Lite", b"%d" % i), queue=mqs[0])
    mq = mqs[0]

    async def drain(consumer: LitePullConsumer, want: int) -> list[int]:
        out: list[int] = []
        while len(out) < want:
            msgs = await consumer.poll(5.0)
            assert msgs, "poll timed out"
            out += [m.queue_offset for m in msgs]
        return out

    consumer = LitePullConsumer("LG", namesrv=pmq.namesrv_addr, consume_from_where=FIRST, auto_commit=False)
    consumer.assign([mq])
    async with consumer:
        assert await drain(consumer, 20) == list(range(20))
        await consumer.seek(mq, 5)
        assert (await drain(consumer, 15)) == list(range(5, 20))
        await consumer.seek(mq, 12)
        assert (await drain(consumer, 8))[:3] == [12, 13, 14]
        await consumer.commit_sync()
        assert await consumer.committed(mq) == 20
        await consumer.commit_sync({mq: 10})
        with pytest.raises(MessageValidationError):
            await consumer.seek(mq, 1000)
    assert await consumer_committed_after_restart(pmq, mq) == 10

    # a restarted consumer resumes at the committed offset
    again = LitePullConsumer("LG", namesrv=pmq.namesrv_addr, consume_from_where=FIRST)
    again.assign([mq])
    async with again:
        assert (await drain(again, 10))[0] == 10
        again.pause([mq])
        assert again.is_paused(mq)
        await again.seek_to_begin(mq)
        assert await again.poll(0.3) == []  # paused: nothing pulled
        again.resume([mq])
        assert (await drain(again, 20))[0] == 0
    with pytest.raises(ClientClosedError):
        await again.poll(0.1)


async def consumer_committed_after_restart(pmq: Cluster, mq) -> int:
    probe = LitePullConsumer("LG", namesrv=pmq.namesrv_addr)
    probe.assign([mq])
    async with probe:
        return await probe.committed(mq)


async def test_lite_pull_subscribe_mode(pmq: Cluster) -> None:
    await pmq.create_topic("LiteSub", queues=4)
    async with Producer("PG", namesrv=pmq.namesrv_addr) as producer:
        await producer.send_batch([Message("LiteSub", b"%d" % i, tags="T1") for i in range(50)])
    consumer = LitePullConsumer("LSG", namesrv=pmq.namesrv_addr, consume_from_where=FIRST)
    consumer.subscribe("LiteSub", "T1")
    got: list[bytes] = []
    async with consumer:
        while len(got) < 50:
            msgs = await consumer.poll(5.0)
            assert msgs
            got += [m.body for m in msgs]
        # the rebalance adds the 4 queues one by one; the 50 messages (one queue) may be
        # polled before the last is added
        await wait_until(lambda: len(consumer.assignment()) == 4)
    assert sorted(got) == sorted(b"%d" % i for i in range(50))


async def test_pull_helpers(pmq: Cluster) -> None:
    await pmq.create_topic("Pulls", queues=1)
    async with Producer("PG", namesrv=pmq.namesrv_addr) as producer:
        await producer.send_batch([Message("Pulls", b"%d" % i) for i in range(10)])
    consumer = LitePullConsumer("PLG", namesrv=pmq.namesrv_addr)
    async with consumer:
        (mq,) = await consumer.fetch_message_queues("Pulls")
        assert await consumer.min_offset(mq) == 0 and await consumer.max_offset(mq) == 10
        res = await consumer.pull(mq, 3, 4)
        assert [m.body for m in res.msgs] == [b"3", b"4", b"5", b"6"] and res.next_begin_offset == 7


async def test_a_pull_reply_is_consumed_before_the_next_pull_which_commits_it(pmq: Cluster) -> None:
    """The reply is handled as the connection reads it (``push._PullReply``, the requests' path
    without RPC hooks): the listener runs before the queue's next pull is built, and that pull
    carries the offset just consumed as its commit offset."""
    await pmq.create_topic("PullTurn", queues=1)
    events: list[tuple[str, int, int]] = []

    async def listener(msgs, ctx):
        events.append(("consumed", msgs[-1].queue_offset, 0))
        return CONSUME_SUCCESS

    def before(addr: str, request) -> None:
        if request.code == 11:  # PULL_MESSAGE
            ext = request.ext_fields
            events.append(("pull", int(ext["queueOffset"]), int(ext["commitOffset"])))

    consumer = PushConsumer(
        "CGPullTurn", namesrv=pmq.namesrv_addr, listener=listener, consume_from_where=FIRST
    )
    consumer.subscribe("PullTurn")
    async with consumer, Producer("PGPullTurn", namesrv=pmq.namesrv_addr) as producer:
        consumer.instance.remoting.before_hooks.append(before)
        for i in range(3):
            await producer.send(Message("PullTurn", b"m%d" % i))
            await wait_until(lambda i=i: ("consumed", i, 0) in events, timeout=10)
        await wait_until(lambda: events[-1][0] == "pull", timeout=10)
    consumed = [k for k, e in enumerate(events) if e[0] == "consumed"]
    assert [events[k][1] for k in consumed] == [0, 1, 2]
    for k in consumed:
        offset = events[k][1]
        assert events[k + 1] == ("pull", offset + 1, offset + 1), events
