"""Issue 22 defect 2: empty ranges give empty results, unknown topics a clear error."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.cluster import ThreadedCluster

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def batch(spark: Any, **opts: str) -> Any:
    reader = spark.read.format("rocketmq")
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_of_an_empty_topic_is_empty(spark: Any, mq: ThreadedCluster) -> None:
    mq.create_topic("EmptyTopic", 2)
    assert batch(spark, nameServer=mq.namesrv, topic="EmptyTopic").count() == 0


def test_batch_read_from_a_future_timestamp_is_empty(spark: Any, mq: ThreadedCluster) -> None:
    mq.create_topic("FutureTs", 2)
    mq.fill("FutureTs", 5, 2)
    future = str(int(time.time() * 1000) + 3_600_000)
    df = batch(spark, nameServer=mq.namesrv, topic="FutureTs", startingTimestamp=future)
    assert df.count() == 0


def test_batch_read_of_an_unknown_topic_names_it(spark: Any, mq: ThreadedCluster) -> None:
    with pytest.raises(Exception, match=r"topic.*NoSuchTopicXyz.*does not exist"):
        batch(spark, nameServer=mq.namesrv, topic="NoSuchTopicXyz").count()


def test_stream_over_a_misspelled_topic_fails_naming_it(
    spark: Any, mq: ThreadedCluster, tmp_path: Path
) -> None:
    q = (
        spark.readStream.format("rocketmq")
        .option("nameServer", mq.namesrv)
        .option("topic", "MisspelledTopicXyz")
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"MisspelledTopicXyz.*does not exist"):
        q.awaitTermination(90)


def test_batch_read_up_to_an_ending_timestamp(spark: Any, mq: ThreadedCluster) -> None:
    mq.create_topic("EndTs", 1)
    mq.fill("EndTs", 10, 1)
    cut = int(time.time() * 1000) + 2
    while time.time() * 1000 <= cut + 2:  # the next messages are stored strictly after `cut`
        time.sleep(0.001)
    mq.fill("EndTs", 10, 1, start=10)
    df = batch(spark, nameServer=mq.namesrv, topic="EndTs", endingTimestamp=str(cut))
    assert df.count() == 2 * 10  # two brokers x one queue x the first 10
    both = batch(spark, nameServer=mq.namesrv, topic="EndTs", includeHeaders="true")
    assert "properties" in both.columns and both.count() == 40
    with pytest.raises(Exception, match="endingTimestamp"):
        batch(spark, nameServer=mq.namesrv, topic="EndTs", endingTimestamp=str(cut),
              endingOffsets='{"EndTs": {"broker-a": {"0": 5}}}').count()  # fmt: skip


def test_assign_reads_only_the_named_queues(spark: Any, mq: ThreadedCluster) -> None:
    from pocketmq.spark.options import parse_options

    mq.create_topic("Assigned", 2)
    mq.fill("Assigned", 5, 2)  # 2 brokers x 2 queues x 5
    spec = '{"Assigned": {"broker-a": [1], "broker-b": [0]}}'
    df = batch(spark, nameServer=mq.namesrv, assign=spec)
    rows = df.select("brokerName", "queueId").distinct().collect()
    assert sorted((r["brokerName"], r["queueId"]) for r in rows) == [("broker-a", 1), ("broker-b", 0)]
    assert df.count() == 10
    with pytest.raises(Exception, match="assign.*Assigned/broker-a/7"):
        batch(spark, nameServer=mq.namesrv, assign='{"Assigned": {"broker-a": [7]}}').count()
    with pytest.raises(Exception, match="conflicts with 'topic'"):
        parse_options({"nameServer": mq.namesrv, "topic": "Assigned", "assign": spec}, "batch")


def test_topic_pattern_reads_every_matching_topic(spark: Any, mq: ThreadedCluster) -> None:
    for topic in ("PatOne", "PatTwo", "PatternNot"):
        mq.create_topic(topic, 1)
        mq.fill(topic, 3, 1)  # 2 brokers x 1 queue x 3
    df = batch(spark, nameServer=mq.namesrv, topicPattern="Pat(One|Two)")
    counts = {r["topic"]: r["count"] for r in df.groupBy("topic").count().collect()}
    assert counts == {"PatOne": 6, "PatTwo": 6}
    assert batch(spark, nameServer=mq.namesrv, topicPattern="NoMatch.*").count() == 0
    with pytest.raises(Exception, match="topicPattern.*conflicts with 'topic'"):
        batch(spark, nameServer=mq.namesrv, topic="PatOne", topicPattern="Pat.*").count()
