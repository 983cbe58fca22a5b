"""pocketmq's Spark source against Apache RocketMQ 4.9.7's broker.

The source's driver plans from ConsumeQueue ranges it asks for over the wire (route from the name
server, GET_MIN_OFFSET / GET_MAX_OFFSET per queue: ``ClusterClient.snapshot``) and its executors
read each range with PULL_MESSAGE (``read_range``). Both run here against Apache's name server and
broker, on a topic Apache's broker holds (written by pocketmq's SDK): no Spark session is needed
for either side of that seam (tests/spark runs the same calls under Spark against pocketmq).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pyarrow as pa
import pytest

from pocketmq.client import Producer
from pocketmq.client.message import MessageQueue
from pocketmq.spark.metadata import ClusterClient
from pocketmq.spark.reader import PullSettings, read_range
from tests.interop.apache_servers import apache_available, apache_servers
from tests.spark.cluster import send_to_queue

pytestmark = pytest.mark.integration

TOPIC = "SparkOnApache"
PER_QUEUE = [120, 45, 0, 300]


def _rows(batches: list[pa.RecordBatch]) -> list[dict[str, object]]:
    return [r for b in batches for r in b.to_pylist()]


def test_spark_source_plans_and_reads_a_topic_apache_holds(tmp_path: Path) -> None:
    apache_available()
    with apache_servers(tmp_path / "apache") as a:
        a.create_topics([TOPIC], queues=len(PER_QUEUE))

        async def fill() -> None:
            async with Producer("SparkApacheP", namesrv=a.namesrv_addr) as producer:
                for queue_id, count in enumerate(PER_QUEUE):
                    await send_to_queue(producer, TOPIC, "broker-a", queue_id, count)

        asyncio.run(fill())
        # Apache's reput thread dispatches to the ConsumeQueue after SEND_OK (every 1 ms, later on
        # a loaded machine): the plan is taken once the last send is dispatched, as a driver's
        # next micro-batch would see it
        want = {q: (0, n) for q, n in enumerate(PER_QUEUE)}
        client = ClusterClient((a.namesrv_addr,))
        try:
            deadline = time.monotonic() + 30
            while True:
                snap = client.snapshot([TOPIC], strict=True)
                ranges = {k.queue_id: (s.min_offset, s.max_offset) for k, s in snap.queues.items()}
                if ranges == want or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        finally:
            client.close()
        # the driver's plan: every queue of the route with Apache's ConsumeQueue range
        assert snap.broker_addrs == {"broker-a": (a.broker_addr,)}
        assert ranges == want
        settings = PullSettings((a.namesrv_addr,), "spark-on-apache", "*", 32, 5000, True, True)
        for key, state in snap.queues.items():
            got = _rows(
                list(
                    read_range(
                        settings, key, state.min_offset, state.max_offset, snap.broker_addrs["broker-a"]
                    )
                )
            )
            assert [r["queueOffset"] for r in got] == list(range(PER_QUEUE[key.queue_id]))
            assert [r["body"] for r in got] == [
                f"{TOPIC}/broker-a/{key.queue_id}/{i}".encode() for i in range(len(got))
            ]
            if got:
                assert got[4]["tags"] == "B" and got[4]["keys"] == "k4" and got[0]["topic"] == TOPIC
        # a middle range and a tag filter, as a later micro-batch and the subExpression option read
        key = MessageQueue(TOPIC, "broker-a", 3)
        part = _rows(list(read_range(settings, key, 100, 250, (a.broker_addr,))))
        assert [r["queueOffset"] for r in part] == list(range(100, 250))
        tagged = PullSettings((a.namesrv_addr,), "spark-on-apache", "A || C", 32, 5000, True, False)
        rows = _rows(list(read_range(tagged, key, 0, 300, (a.broker_addr,))))
        assert {r["tags"] for r in rows} == {"A", "C"} and len(rows) == 200
