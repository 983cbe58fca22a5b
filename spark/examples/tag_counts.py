"""Example pipeline: stream a RocketMQ topic, count messages per tag, write Parquet.

Each micro-batch's counts go to ``<output>/batchId=<n>/`` with mode ``overwrite``, so a batch
that Spark replays after a failure rewrites the same directory: together with the checkpoint
(which makes the source replay exactly the same offsets) the output is exactly-once. The total
per tag is ``spark.read.parquet(output).groupBy("tag").sum("count")``.

Run it with the venv activated (``pocketmq up`` starts a local name server and broker)::

    python spark/examples/tag_counts.py --name-server 127.0.0.1:9876 --topic TopicTest \\
        --output /tmp/tag_counts --checkpoint /tmp/tag_counts_checkpoint --available-now
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery


def start(
    spark: SparkSession,
    name_server: str,
    topic: str,
    output: str,
    checkpoint: str,
    *,
    available_now: bool = True,
    max_offsets_per_trigger: int = 100_000,
) -> StreamingQuery:
    """Start the query; it stops by itself after the available data when ``available_now``."""
    messages = (
        spark.readStream.format("rocketmq")  # found by PySpark through the installed pyspark_rocketmq shim
        .option("nameServer", name_server)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .load()
    )

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        counts = batch.groupBy(F.coalesce("tags", F.lit("")).alias("tag")).count()
        counts.write.mode("overwrite").parquet(f"{output}/batchId={batch_id}")

    writer = messages.writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)
    writer = (
        writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="10 seconds")
    )
    return writer.start()


def totals(spark: SparkSession, output: str) -> dict[str, int]:
    """Messages per tag over every batch written so far."""
    rows = spark.read.parquet(output).groupBy("tag").agg(F.sum("count").alias("n")).collect()
    return {row["tag"]: int(row["n"]) for row in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name-server", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    args = parser.parse_args()
    spark = SparkSession.builder.appName("rocketmq-tag-counts").getOrCreate()
    query = start(
        spark, args.name_server, args.topic, args.output, args.checkpoint, available_now=args.available_now
    )
    query.awaitTermination()
    for tag, n in sorted(totals(spark, args.output).items()):
        print(f"{tag or '(no tag)'}\t{n}")


if __name__ == "__main__":
    main()
