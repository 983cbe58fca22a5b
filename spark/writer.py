"""The sink's PySpark classes: ``df.write.format("rocketmq")`` and ``writeStream.format("rocketmq")``.

Rules, options and the send path are in :mod:`pocketmq.spark.sink`. Where things run: the
writer object is built on the driver (``DataSource.writer`` / ``streamWriter``) and pickled to
the tasks, which call ``write`` on Arrow record batches of their partition; ``commit`` /
``abort`` run on the driver with the tasks' :class:`SinkCommitMessage`.

Idempotent keys need a job identity that a retried task or a replayed micro-batch sees again:
a batch write's is a nonce drawn on the driver (pickled with the writer, so every attempt of a
task gets it); a stream's is the query id and the batch id, which Spark gives each task as the
local properties ``sql.streaming.queryId`` and ``streaming.sql.batchId`` (both survive a restart
from the checkpoint).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from pocketmq.spark.errors import InvalidOptionError
from pocketmq.spark.sink import (
    BatchSender,
    SendError,
    SinkOptions,
    check_columns,
    message_properties,
    parse_sink_options,
    uniq_key,
)

logger = logging.getLogger("pocketmq.spark")


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    partition: int
    messages: int
    requests: int


def sink_options(options: dict[str, str], schema: StructType, overwrite: bool) -> SinkOptions:
    if overwrite:
        raise InvalidOptionError("mode", "the rocketmq sink only appends (a topic cannot be overwritten)")
    opts = parse_sink_options(options)
    check_columns(schema.fieldNames(), {f.name: f.dataType.simpleString() for f in schema.fields}, opts)
    return opts


def write_partition(opts: SinkOptions, job: str, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    """Send every row of this task's partition; returns what was sent."""
    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    sender = BatchSender(opts, partition)
    index = 0
    default_topic = opts.topic
    try:
        for rb in batches:
            n = rb.num_rows
            names = rb.schema.names
            bodies = rb.column(names.index("body")).to_pylist()
            none: list[Any] = [None] * n
            topics = rb.column(names.index("topic")).to_pylist() if "topic" in names else none
            tags = rb.column(names.index("tags")).to_pylist() if "tags" in names else none
            keys = rb.column(names.index("keys")).to_pylist() if "keys" in names else none
            props = rb.column(names.index("properties")).to_pylist() if "properties" in names else none
            for i in range(n):
                body = bodies[i]
                if not body:
                    raise SendError(f"row {index} of partition {partition}: 'body' is null or empty")
                if isinstance(body, str):
                    body = body.encode()
                topic = topics[i] or default_topic
                if not topic:
                    raise SendError(
                        f"row {index} of partition {partition}: 'topic' is null and no topic option"
                    )
                row_props = dict(props[i]) if props[i] else None
                sender.add(
                    topic,
                    body,
                    message_properties(uniq_key(job, partition, index), tags[i], keys[i], row_props),
                )
                index += 1
        sender.flush()
    finally:
        sender.cluster.close()
    return SinkCommitMessage(partition, sender.sent, sender.requests)


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))


class RocketMQWriter(DataSourceArrowWriter):
    """``df.write.format("rocketmq")``: one send task per partition, append only."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.job = uuid.uuid4().hex  # drawn on the driver: the same for every attempt of a task

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_partition(self.opts, self.job, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.info("rocketmq sink: job %s wrote %d message(s)", self.job, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.warning(
            "rocketmq sink: job %s failed after %d message(s) were stored (they stay: at-least-once)",
            self.job,
            _total(messages),
        )


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rocketmq")``: each micro-batch's rows, at-least-once."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.fallback = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        ctx = TaskContext.get()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        job = f"{query}/{batch}" if query and batch else self.fallback
        return write_partition(self.opts, job, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        logger.info("rocketmq sink: batch %d wrote %d message(s)", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        logger.warning(
            "rocketmq sink: batch %d failed after %d message(s) were stored", batchId, _total(messages)
        )
