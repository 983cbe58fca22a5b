"""The stream/batch reader objects against a real cluster, called the way Spark's planner calls them.

No Spark session: ``initialOffset``/``latestOffset``/``partitions``/``read`` run directly
(in a thread, since they block and the servers share the test's event loop).
"""

from __future__ import annotations

import asyncio
import json
import pickle
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pocketmq.client import Producer
from pocketmq.client.message import MessageQueue
from pocketmq.spark.errors import DataLossError, InvalidOptionError
from pocketmq.spark.options import parse_options
from pocketmq.spark.source import (
    RangePartition,
    RocketMQBatchReader,
    RocketMQDataSource,
    RocketMQStreamReader,
)
from pocketmq.testing import Cluster, cluster
from tests.spark.cluster import commit_offset, send_to_queue

pytestmark = pytest.mark.integration


@pytest.fixture
async def two() -> AsyncIterator[tuple[Cluster, Producer]]:
    async with cluster(brokers=2) as c:
        await c.create_topic("S", queues=2)
        async with Producer("PG", namesrv=c.namesrv_addr) as p:
            for b in ("broker-a", "broker-b"):
                for q in range(2):
                    await send_to_queue(p, "S", b, q, 30)
            yield c, p


def stream_reader(c: Cluster, **opts: str) -> RocketMQStreamReader:
    return RocketMQStreamReader(parse_options({"nameServer": c.namesrv_addr, "topic": "S", **opts}, "stream"))


def full(n: int) -> dict[str, Any]:
    return {"S": {b: {"0": n, "1": n} for b in ("broker-a", "broker-b")}}


async def test_stream_planning_cycle(two: tuple[Cluster, Producer]) -> None:
    c, p = two
    r = stream_reader(c, startingOffsets="earliest", maxOffsetsPerTrigger="20")
    assert isinstance(r.getDefaultReadLimit(), ReadMaxRows)
    start = await asyncio.to_thread(r.initialOffset)
    assert start == full(0) and json.dumps(start) == json.dumps(start, sort_keys=True)
    end = await asyncio.to_thread(r.latestOffset, start, ReadMaxRows(20))
    assert end == full(5)  # 20 offsets shared by 4 queues
    assert r.reportLatestOffset() == full(30)
    parts = await asyncio.to_thread(r.partitions, start, end)
    assert [(x.key.broker_name, x.key.queue_id, x.start, x.until) for x in parts] == [
        ("broker-a", 0, 0, 5), ("broker-b", 0, 0, 5), ("broker-a", 1, 0, 5), ("broker-b", 1, 0, 5),
    ]  # fmt: skip
    # read() runs on a pickled copy of the reader, as in a Spark worker
    clone = pickle.loads(pickle.dumps(r))
    part = pickle.loads(pickle.dumps(parts[1]))
    assert isinstance(part, RangePartition)
    rows = await asyncio.to_thread(lambda: [row for b in clone.read(part) for row in b.to_pylist()])
    assert [row["body"] for row in rows] == [f"S/broker-b/0/{i}".encode() for i in range(5)]
    assert await asyncio.to_thread(r.latestOffset, end, ReadAllAvailable()) == full(30)
    assert await asyncio.to_thread(r.latestOffset, full(30), ReadAllAvailable()) == full(
        30
    )  # idle: same dict


async def test_latest_start_pins_an_empty_first_batch(two: tuple[Cluster, Producer]) -> None:
    c, p = two
    r = stream_reader(c)  # startingOffsets=latest (the streaming default)
    start = await asyncio.to_thread(r.initialOffset)
    assert start == full(30)
    await send_to_queue(p, "S", "broker-a", 0, 4, start=30)
    # the first call returns its start: batch 0 is empty, so a replay of it cannot move
    assert await asyncio.to_thread(r.latestOffset, start, ReadAllAvailable()) == start
    end = await asyncio.to_thread(r.latestOffset, start, ReadAllAvailable())
    assert end["S"]["broker-a"]["0"] == 34


async def test_available_now_stops_at_the_snapshot_and_new_queues_enter_empty(
    two: tuple[Cluster, Producer],
) -> None:
    c, p = two
    r = stream_reader(c, startingOffsets="earliest")
    start = await asyncio.to_thread(r.initialOffset)
    await asyncio.to_thread(r.prepareForTriggerAvailableNow)
    await send_to_queue(p, "S", "broker-a", 0, 5, start=30)  # after the snapshot: not part of this run
    assert await asyncio.to_thread(r.latestOffset, start, ReadAllAvailable()) == full(30)
    # a queue added later shows up at its min offset with an empty range
    await c.create_topic("S", queues=3)
    later = stream_reader(c)
    end = await asyncio.to_thread(later.latestOffset, full(30), ReadAllAvailable())
    assert end["S"]["broker-a"] == {"0": 35, "1": 30, "2": 0}
    assert list(end["S"]["broker-b"]) == ["0", "1", "2"]
    assert all(x.key.queue_id != 2 for x in await asyncio.to_thread(later.partitions, full(30), end))


async def test_min_offsets_per_trigger_holds_batches_back(two: tuple[Cluster, Producer]) -> None:
    c, p = two
    r = stream_reader(c, minOffsetsPerTrigger="10", maxTriggerDelay="400ms")
    start = full(30)
    r._first_call = False
    await send_to_queue(p, "S", "broker-a", 0, 4, start=30)
    assert await asyncio.to_thread(r.latestOffset, start, ReadAllAvailable()) == start  # 4 < 10
    await send_to_queue(p, "S", "broker-b", 1, 6, start=30)
    end = await asyncio.to_thread(r.latestOffset, start, ReadAllAvailable())  # 10 >= 10
    assert end["S"]["broker-a"]["0"] == 34 and end["S"]["broker-b"]["1"] == 36
    await send_to_queue(p, "S", "broker-a", 1, 1, start=30)
    assert await asyncio.to_thread(r.latestOffset, end, ReadAllAvailable()) == end
    await asyncio.sleep(0.45)
    assert (await asyncio.to_thread(r.latestOffset, end, ReadAllAvailable()))["S"]["broker-a"][
        "1"
    ] == 31  # delay expired


async def test_starting_positions(two: tuple[Cluster, Producer]) -> None:
    c, p = two
    await asyncio.sleep(0.05)
    stamp = int(time.time() * 1000)
    await asyncio.sleep(0.05)
    await send_to_queue(p, "S", "broker-a", 1, 3, start=30)
    r = stream_reader(c, startingTimestamp=str(stamp))
    assert await asyncio.to_thread(r.initialOffset) == {
        "S": {"broker-a": {"0": 30, "1": 30}, "broker-b": {"0": 30, "1": 30}}
    }
    await commit_offset(c, c.broker_addrs[1], "CG", MessageQueue("S", "broker-b", 0), 7)
    g = stream_reader(c, group="CG", startingOffsets="earliest")
    got = await asyncio.to_thread(g.initialOffset)
    assert got["S"]["broker-b"]["0"] == 7
    j = stream_reader(c, startingOffsets=json.dumps({"S": {"broker-a": {"1": 12, "0": -1}}}))
    assert await asyncio.to_thread(j.initialOffset) == {
        "S": {"broker-a": {"0": 30, "1": 12}, "broker-b": {"0": 0, "1": 0}}
    }
    bad = stream_reader(c, startingOffsets=json.dumps({"S": {"broker-a": {"0": 99}}}))
    with pytest.raises(InvalidOptionError, match="beyond its latest offset 30"):
        await asyncio.to_thread(bad.initialOffset)
    missing = stream_reader(c, startingOffsets=json.dumps({"S": {"broker-z": {"0": 1}}}))
    with pytest.raises(InvalidOptionError, match="S/broker-z/0 does not exist"):
        await asyncio.to_thread(missing.initialOffset)


async def test_batch_reader_plans_and_validates(two: tuple[Cluster, Producer]) -> None:
    c, _ = two
    base = {"nameServer": c.namesrv_addr, "topic": "S"}
    r = RocketMQBatchReader(parse_options({**base, "maxRecordsPerPartition": "8"}, "batch"))
    parts = await asyncio.to_thread(r.partitions)
    assert len(parts) == 4 * 4 and sum(x.until - x.start for x in parts) == 120  # type: ignore[attr-defined]
    over = RocketMQBatchReader(
        parse_options({**base, "endingOffsets": json.dumps({"S": {"broker-a": {"0": 31}}})}, "batch")
    )
    with pytest.raises(InvalidOptionError, match="'endingOffsets'.*beyond its latest offset 30"):
        await asyncio.to_thread(over.partitions)
    below = RocketMQBatchReader(
        parse_options(
            {
                **base,
                "startingOffsets": json.dumps({"S": {"broker-a": {"0": 20}}}),
                "endingOffsets": json.dumps({"S": {"broker-a": {"0": 10}}}),
            },
            "batch",
        )
    )
    with pytest.raises(InvalidOptionError, match="below its starting offset 20"):
        await asyncio.to_thread(below.partitions)
    # the DataSource entry point: schema per includeProperties, unknown names rejected early
    assert "properties" in RocketMQDataSource({**base, "includeproperties": "true"}).schema()
    with pytest.raises(InvalidOptionError, match="'bogus': unknown option"):
        RocketMQDataSource({**base, "bogus": "1"}).schema()


async def test_checkpoint_below_min_fails_or_skips_in_planning(two: tuple[Cluster, Producer]) -> None:
    c, _ = two
    r = stream_reader(c, startingOffsets="earliest")
    r._first_call = False
    gone = {
        "S": {"broker-a": {"0": 0, "1": 0, "5": 3}, "broker-b": {"0": 0, "1": 0}}
    }  # queue 5 does not exist
    with pytest.raises(DataLossError, match="S/broker-a/5: the queue no longer exists"):
        await asyncio.to_thread(r.latestOffset, gone, ReadAllAvailable())
    lenient = stream_reader(c, startingOffsets="earliest", failOnDataLoss="false")
    end = await asyncio.to_thread(lenient.latestOffset, gone, ReadAllAvailable())
    assert end["S"]["broker-a"] == {"0": 30, "1": 30, "5": 3}  # carried forward, not dropped
