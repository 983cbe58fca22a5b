"""The sink: ``df.write`` / ``writeStream.format("rocketmq")`` (issue 22)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pocketmq.spark.errors import InvalidOptionError
from pocketmq.spark.sink import SinkOptions, check_columns, message_properties, parse_sink_options, uniq_key
from tests.spark.cluster import ThreadedCluster

ROWS = 100_000


# ------------------------------------------------------------------------------ pure parts


def test_options_and_columns_are_checked_by_name() -> None:
    opts = parse_sink_options({"NAMESERVER": "127.0.0.1:9876", "topic": "T", "sendBatchSize": "64"})
    assert opts.batch_size == 64 and opts.topic == "T"
    with pytest.raises(InvalidOptionError, match="'sendBatchBytes'"):
        parse_sink_options({"nameServer": "127.0.0.1:9876", "sendBatchBytes": str(8 << 20)})
    with pytest.raises(InvalidOptionError, match="'bogus'"):
        parse_sink_options({"nameServer": "127.0.0.1:9876", "bogus": "1"})
    no_topic = SinkOptions(name_servers=("127.0.0.1:9876",))
    with pytest.raises(InvalidOptionError, match="'topic' option or a 'topic' column"):
        check_columns(["body"], {"body": "binary"}, no_topic)
    with pytest.raises(InvalidOptionError, match=r"\['value'\]"):
        check_columns(["body", "value"], {"body": "binary", "value": "string"}, opts)
    with pytest.raises(InvalidOptionError, match="column 'tags' has type int"):
        check_columns(["body", "tags"], {"body": "binary", "tags": "int"}, opts)
    check_columns(["body", "topic", "tags", "keys", "properties"],
                  {"body": "string", "topic": "string", "tags": "string", "keys": "string",
                   "properties": "map<string,string>"}, no_topic)  # fmt: skip


def test_keys_are_deterministic_per_job_partition_and_row() -> None:
    a = uniq_key("job", 3, 17)
    assert a == uniq_key("job", 3, 17) and len(a) == 32 and a == a.upper()
    assert len({a, uniq_key("job", 3, 18), uniq_key("job", 4, 17), uniq_key("other", 3, 17)}) == 4
    props = message_properties(a, "TagA", "k1 k2", {"color": "red"})
    assert "TAGS\x01TagA" in props and "KEYS\x01k1 k2" in props and f"UNIQ_KEY\x01{a}" in props
    assert "UNIQ_KEY\x01mine" in message_properties(a, None, None, {"UNIQ_KEY": "mine"})


# ---------------------------------------------------------------------------- with Spark


@pytest.mark.spark
@pytest.mark.integration
def test_batch_write_100k_rows_each_received_once(spark: Any, mq: ThreadedCluster) -> None:
    from pyspark.sql import functions as F

    mq.create_topic("SinkBatch", 4)
    df = spark.range(ROWS, numPartitions=4).select(
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("body"),
        F.when(F.col("id") % 2 == 0, F.lit("even")).otherwise(F.lit("odd")).alias("tags"),
        F.col("id").cast("string").alias("keys"),
        F.create_map(F.lit("n"), F.col("id").cast("string")).alias("properties"),
    )
    df.write.format("rocketmq").option("nameServer", mq.namesrv).option("topic", "SinkBatch").option(
        "sendBatchSize", "512"
    ).option("producerGroup", "SinkPG").mode("append").save()
    back = (
        spark.read.format("rocketmq")
        .option("nameServer", mq.namesrv)
        .option("topic", "SinkBatch")
        .option("includeProperties", "true")
        .load()
    )
    stats = back.agg(
        F.count("*").alias("n"),
        F.countDistinct("body").alias("bodies"),
        F.countDistinct("msgId").alias("ids"),
        F.sum(F.when(F.col("tags") == "even", 1).otherwise(0)).alias("even"),
        F.sum(F.when(F.col("properties")["n"] == F.col("keys"), 1).otherwise(0)).alias("props_ok"),
    ).collect()[0]
    assert (stats["n"], stats["bodies"], stats["ids"]) == (ROWS, ROWS, ROWS)
    assert stats["even"] == ROWS // 2 and stats["props_ok"] == ROWS


@pytest.mark.spark
@pytest.mark.integration
def test_stream_copies_a_topic_with_a_topic_column(spark: Any, mq: ThreadedCluster, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    mq.create_topic("SinkIn", 2)
    mq.create_topic("SinkOut", 2)
    mq.fill("SinkIn", 50, 2)  # 2 brokers x 2 queues x 50
    q = (
        spark.readStream.format("rocketmq")
        .option("nameServer", mq.namesrv)
        .option("topic", "SinkIn")
        .option("startingOffsets", "earliest")
        .load()
        .select("body", "tags", F.lit("SinkOut").alias("topic"))
        .writeStream.format("rocketmq")
        .option("nameServer", mq.namesrv)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    out = spark.read.format("rocketmq").option("nameServer", mq.namesrv).option("topic", "SinkOut").load()
    assert out.count() == 200 and out.select("body").distinct().count() == 200


@pytest.mark.spark
@pytest.mark.integration
def test_overwrite_and_unknown_columns_fail_before_sending(spark: Any, mq: ThreadedCluster) -> None:
    df = spark.createDataFrame([("a", "x")], "body string, value string")
    with pytest.raises(Exception, match="value"):
        df.write.format("rocketmq").option("nameServer", mq.namesrv).option("topic", "T").mode(
            "append"
        ).save()
    with pytest.raises(Exception, match="only appends"):
        df.select("body").write.format("rocketmq").option("nameServer", mq.namesrv).option("topic", "T").mode(
            "overwrite"
        ).save()
