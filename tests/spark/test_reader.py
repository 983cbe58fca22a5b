"""The executor pull loop and the driver's metadata calls against a real name server + broker.

No Spark here: the blocking reader runs in a thread (``asyncio.to_thread``) while the servers
run on the test's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pyarrow as pa
import pytest

from pocketmq.client import Message, Producer
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.message import COMPRESSED_FLAG
from pocketmq.remoting.transport.blocking import pool
from pocketmq.spark.errors import DataLossError, ReadError, UnknownTopicError
from pocketmq.spark.metadata import ClusterClient
from pocketmq.spark.reader import PullSettings, read_range
from pocketmq.testing import Cluster, cluster
from tests.spark.cluster import RETENTION_STORE, commit_offset, force_retention, send_to_queue

pytestmark = pytest.mark.integration


def settings(
    c: Cluster,
    *,
    sub: str = "*",
    batch: int = 32,
    timeout_ms: int = 3000,
    fail: bool = True,
    props: bool = False,
) -> PullSettings:
    return PullSettings((c.namesrv_addr,), "spark-test", sub, batch, timeout_ms, fail, props)


def rows(batches: list[pa.RecordBatch]) -> list[dict[str, object]]:
    return [r for b in batches for r in b.to_pylist()]


async def read(
    s: PullSettings, key: MessageQueue, start: int, until: int, addrs: tuple[str, ...]
) -> list[pa.RecordBatch]:
    return await asyncio.to_thread(lambda: list(read_range(s, key, start, until, addrs)))


@pytest.fixture
async def one() -> AsyncIterator[tuple[Cluster, Producer]]:
    async with cluster(brokers=1) as c:
        await c.create_topic("T", queues=2)
        async with Producer("PG", namesrv=c.namesrv_addr) as p:
            yield c, p


async def test_read_exact_ranges_over_many_pulls(one: tuple[Cluster, Producer]) -> None:
    c, p = one
    await send_to_queue(p, "T", "broker-a", 0, 300)
    addrs = (c.broker_addrs[0],)
    key = MessageQueue("T", "broker-a", 0)
    got = rows(await read(settings(c), key, 0, 300, addrs))
    assert [r["queueOffset"] for r in got] == list(range(300))
    assert [r["body"] for r in got[:2]] == [b"T/broker-a/0/0", b"T/broker-a/0/1"]
    assert {r["queueId"] for r in got} == {0} and got[5]["tags"] == "C" and got[5]["keys"] == "k5"
    part = rows(await read(settings(c, batch=7), key, 17, 123, addrs))
    assert [r["queueOffset"] for r in part] == list(range(17, 123))
    # the same range twice gives the same rows (what makes a replayed batch exactly-once)
    again = rows(await read(settings(c, batch=7), key, 17, 123, addrs))
    assert again == part
    assert await read(settings(c), key, 5, 5, addrs) == []


async def test_big_range_yields_several_arrow_batches_and_reuses_connections(
    one: tuple[Cluster, Producer],
) -> None:
    c, p = one
    await send_to_queue(p, "T", "broker-a", 1, 5000)
    addr = c.broker_addrs[0]
    key = MessageQueue("T", "broker-a", 1)
    batches = await read(settings(c, batch=1024), key, 0, 5000, (addr,))
    assert [b.num_rows for b in batches] == [4096, 904]
    assert pool()._idle.get(addr), "the connection went back to the per-process pool"
    conn = pool()._idle[addr][-1]
    await read(settings(c), key, 4990, 5000, (addr,))
    assert conn in pool()._idle[addr] and not conn.broken
    pool().discard(addr)  # what a failed read does: the other idle connections are suspect too
    assert conn.broken and addr not in pool()._idle


async def test_tag_filter_is_exact(one: tuple[Cluster, Producer]) -> None:
    c, p = one
    await send_to_queue(p, "T", "broker-a", 0, 90)
    got = rows(
        await read(settings(c, sub="A || C"), MessageQueue("T", "broker-a", 0), 0, 90, (c.broker_addrs[0],))
    )
    assert {r["tags"] for r in got} == {"A", "C"}
    assert [r["queueOffset"] for r in got] == [i for i in range(90) if i % 3 != 1]


async def test_compressed_bodies_are_inflated(one: tuple[Cluster, Producer]) -> None:
    c, p = one
    big = bytes(range(256)) * 40  # over the producer's 4 KiB compression threshold
    await p.send(Message("T", big, tags="Z"), queue=MessageQueue("T", "broker-a", 1))
    (row,) = rows(await read(settings(c), MessageQueue("T", "broker-a", 1), 0, 1, (c.broker_addrs[0],)))
    assert row["body"] == big and row["sysFlag"] & COMPRESSED_FLAG


async def test_range_beyond_the_end_is_data_loss(
    one: tuple[Cluster, Producer], caplog: pytest.LogCaptureFixture
) -> None:
    c, p = one
    await send_to_queue(p, "T", "broker-a", 0, 20)
    key, addrs = MessageQueue("T", "broker-a", 0), (c.broker_addrs[0],)
    with pytest.raises(DataLossError, match=r"not available on the broker.*\[20, 30\)"):
        await read(settings(c, timeout_ms=300), key, 10, 30, addrs)
    with caplog.at_level(logging.WARNING, logger="pocketmq.spark"):
        got = rows(await read(settings(c, timeout_ms=300, fail=False), key, 10, 30, addrs))
    assert [r["queueOffset"] for r in got] == list(range(10, 20))
    assert "skipped 10 lost offsets" in caplog.text


async def test_stale_address_recovers_through_the_name_server(one: tuple[Cluster, Producer]) -> None:
    c, p = one
    await send_to_queue(p, "T", "broker-a", 0, 10)
    key = MessageQueue("T", "broker-a", 0)
    got = rows(await read(settings(c), key, 0, 10, ("127.0.0.1:1",)))
    assert len(got) == 10
    dead = PullSettings(("127.0.0.1:1",), "g", "*", 32, 500, True, False)
    with pytest.raises(ReadError, match=r"T/broker-a/0: cannot read \[0, 10\)"):
        await read(dead, key, 0, 10, ("127.0.0.1:1",))


async def test_retention_is_data_loss_or_skipped(caplog: pytest.LogCaptureFixture) -> None:
    async with cluster(brokers=1, store_config=RETENTION_STORE) as c:
        await c.create_topic("R", queues=1)
        async with Producer("PG", namesrv=c.namesrv_addr) as p:
            await send_to_queue(p, "R", "broker-a", 0, 300, body_size=1000)
        await force_retention(c.brokers[0])
        cc = ClusterClient([c.namesrv_addr])
        snap = await asyncio.to_thread(cc.snapshot, ["R"], strict=True)
        key = MessageQueue("R", "broker-a", 0)
        lo, hi = snap.queues[key].min_offset, snap.queues[key].max_offset
        assert 0 < lo < hi == 300
        addrs = (c.broker_addrs[0],)
        with pytest.raises(DataLossError, match=r"OFFSET_TOO_SMALL.*\[0, " + str(lo)):
            await read(settings(c), key, 0, 300, addrs)
        with caplog.at_level(logging.WARNING, logger="pocketmq.spark"):
            got = rows(await read(settings(c, fail=False), key, 0, 300, addrs))
        assert [r["queueOffset"] for r in got] == list(range(lo, 300))
        assert f"skipped {lo} lost offsets" in caplog.text


async def test_metadata_snapshot_timestamps_and_committed_offsets() -> None:
    async with cluster(brokers=2) as c:
        await c.create_topic("M", queues=3)
        async with Producer("PG", namesrv=c.namesrv_addr) as p:
            await send_to_queue(p, "M", "broker-a", 0, 10)
            await asyncio.sleep(0.05)
            middle = int(time.time() * 1000)
            await asyncio.sleep(0.05)
            await send_to_queue(p, "M", "broker-a", 0, 5, start=10)
            await send_to_queue(p, "M", "broker-b", 2, 7)
        cc = ClusterClient([c.namesrv_addr])
        with pytest.raises(UnknownTopicError, match="'NoSuchTopic' does not exist"):
            await asyncio.to_thread(cc.snapshot, ["M", "NoSuchTopic"], strict=True)  # a query's start
        snap = await asyncio.to_thread(cc.snapshot, ["M", "NoSuchTopic"], strict=False)  # a later trigger
        a0, b2 = MessageQueue("M", "broker-a", 0), MessageQueue("M", "broker-b", 2)
        assert len(snap.queues) == 6
        assert (snap.queues[a0].min_offset, snap.queues[a0].max_offset, snap.queues[b2].max_offset) == (
            0,
            15,
            7,
        )
        assert snap.broker_addrs == {"broker-a": (c.broker_addrs[0],), "broker-b": (c.broker_addrs[1],)}
        found = await asyncio.to_thread(cc.search_offsets, {a0: middle}, snap.broker_addrs)
        assert found == {a0: 10}
        # no stored offset on a young queue: RocketMQ answers 0, not QUERY_NOT_FOUND
        assert await asyncio.to_thread(cc.committed_offsets, "CG", [a0, b2], snap.broker_addrs) == {
            a0: 0,
            b2: 0,
        }
        await commit_offset(c, c.broker_addrs[0], "CG", MessageQueue("M", "broker-a", 0), 12)
        assert (await asyncio.to_thread(cc.committed_offsets, "CG", [a0], snap.broker_addrs))[a0] == 12
        cc.close()
