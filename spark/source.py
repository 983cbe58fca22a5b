"""The PySpark Python Data Source: ``spark.read/readStream.format("rocketmq")``.

Where things run (SPARK_SOURCE.md §2.4, pitfall 18): ``DataSource.schema`` in the driver;
the stream reader's ``initialOffset``/``latestOffset``/``partitions``/``commit`` in Spark's
long-lived Python planner process; ``read`` in reused Python worker processes, on a pickled
copy of the reader (so readers pickle only their options).

Streaming, per trigger: fetch the cluster :class:`Snapshot` (routes + min/max offsets) ->
:func:`reconcile` with the batch's start (new queues, retention, gone queues) -> admission
control (``maxOffsetsPerTrigger`` through ``ReadMaxRows``, ``minOffsetsPerTrigger`` +
``maxTriggerDelay`` through a :class:`TriggerGate`) -> canonical offsets. ``AvailableNow``
fixes the snapshot once in ``prepareForTriggerAvailableNow``. ``commit`` does nothing that
matters: the checkpoint is the truth (pitfall 5).

Pitfall 6: ``initialOffset`` is re-run on every restart and its result ignored; when the start
depends on the moment (latest, timestamps, a group), the first ``latestOffset`` call returns
its start unchanged, so batch 0 is empty and a replayed batch 0 cannot move.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pocketmq.remoting.protocol.heartbeat import MessageQueue
from pocketmq.spark.errors import InvalidOptionError
from pocketmq.spark.metadata import ClusterClient, broker_addresses
from pocketmq.spark.offsets import (
    EARLIEST,
    LATEST,
    JsonOffsets,
    OffsetMap,
    from_json_dict,
    queue_label,
    to_json_dict,
)
from pocketmq.spark.options import SourceOptions, canonical_options, parse_options
from pocketmq.spark.planning import (
    DataLoss,
    DataLossPolicy,
    LossKind,
    OffsetRange,
    Snapshot,
    TriggerGate,
    backlog,
    plan_ranges,
    rate_limit,
    reconcile,
)
from pocketmq.spark.reader import PullSettings, read_range
from pocketmq.spark.rows import schema_ddl

logger = logging.getLogger("pocketmq.spark")


class RangePartition(InputPartition):
    """One task: ``[start, until)`` of one queue plus where its broker was last seen."""

    def __init__(self, key: MessageQueue, start: int, until: int, addrs: tuple[str, ...]) -> None:
        super().__init__((key.topic, key.broker_name, key.queue_id, start, until))
        self.key = key
        self.start = start
        self.until = until
        self.addrs = addrs

    def __repr__(self) -> str:
        return f"RangePartition({queue_label(self.key)} [{self.start}, {self.until}) @ {list(self.addrs)})"


# ------------------------------------------------------------------------------- shared


class _Base:
    """Options, the lazily created cluster client, and starting-offset resolution."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._cluster: ClusterClient | None = None
        self._addrs: dict[str, tuple[str, ...]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_addrs": self._addrs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.opts = state["opts"]
        self._addrs = state["_addrs"]
        self._cluster = None

    @property
    def cluster(self) -> ClusterClient:
        if self._cluster is None:
            o = self.opts
            self._cluster = ClusterClient(
                o.name_servers, timeout_ms=min(o.pull_timeout_ms, 10_000), retries=o.fetch_retries,
                retry_interval_ms=o.fetch_retry_interval_ms, signer=o.signer(),
            )  # fmt: skip
        return self._cluster

    @property
    def settings(self) -> PullSettings:
        o = self.opts
        return PullSettings(
            o.name_servers, o.pull_group, o.sub_expression, o.pull_batch_size, o.pull_timeout_ms,
            o.fail_on_data_loss, o.include_properties, o.sql_filter, o.access_key, o.secret_key,
        )  # fmt: skip

    def _snapshot(self, *, strict: bool) -> Snapshot:
        snap = self.cluster.snapshot(self.opts.topics, strict=strict)
        self._addrs.update(snap.broker_addrs)
        return snap

    def _addresses(self, brokers: set[str]) -> dict[str, tuple[str, ...]]:
        if not brokers <= self._addrs.keys():  # e.g. a replayed batch right after a restart
            for topic in self.opts.topics:
                route = self.cluster.route(topic)
                if route is not None:
                    self._addrs.update(broker_addresses(route))
        return self._addrs

    def resolve_start(self, snap: Snapshot) -> OffsetMap:
        """The starting offset of every queue in ``snap`` (see :mod:`pocketmq.spark.options`)."""
        spec = self.opts.start
        known = snap.queues
        for name, listed in (
            ("startingOffsets", spec.offsets),
            ("startingOffsetsByTimestamp", spec.timestamps),
        ):
            for key in listed or {}:
                if key not in known:
                    raise InvalidOptionError(
                        name,
                        f"queue {queue_label(key)} does not exist (queues: {sorted(map(queue_label, known))})",
                    )
        stamps: dict[MessageQueue, int] = {}
        if spec.timestamps is not None:
            stamps = dict(spec.timestamps)
        elif spec.timestamp is not None:
            stamps = dict.fromkeys(known, spec.timestamp)
        found = self.cluster.search_offsets(stamps, snap.broker_addrs) if stamps else {}
        committed = (
            self.cluster.committed_offsets(spec.group, list(known), snap.broker_addrs) if spec.group else {}
        )
        out: OffsetMap = {}
        for key, st in known.items():
            explicit = spec.offsets.get(key) if spec.offsets is not None else None
            if explicit is not None and explicit >= 0:
                if explicit > st.max_offset:
                    raise InvalidOptionError(
                        "startingOffsets",
                        f"offset {explicit} of queue {queue_label(key)} is beyond its latest offset {st.max_offset}",
                    )
                out[key] = explicit
            elif explicit == EARLIEST:
                out[key] = st.min_offset
            elif explicit == LATEST:
                out[key] = st.max_offset
            elif key in found:
                out[key] = min(max(found[key], st.min_offset), st.max_offset)
            elif committed.get(key, -1) >= 0:
                out[key] = min(committed[key], st.max_offset)
            else:
                out[key] = st.min_offset if spec.default == "earliest" else st.max_offset
        return out

    def _partitions(self, start: OffsetMap, end: OffsetMap) -> list[RangePartition]:
        o = self.opts
        policy = DataLossPolicy(o.fail_on_data_loss)
        ranges: list[OffsetRange] = plan_ranges(
            start, end, policy, min_partitions=o.min_partitions, max_records=o.max_records_per_partition
        )
        addrs = self._addresses({r.key.broker_name for r in ranges})
        return [RangePartition(r.key, r.start, r.until, addrs.get(r.key.broker_name, ())) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self.settings, partition.key, partition.start, partition.until, partition.addrs)


# ---------------------------------------------------------------------------- streaming


class RocketMQStreamReader(_Base, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        super().__init__(opts)
        self._target: Snapshot | None = None
        self._latest: OffsetMap | None = None
        self._initial: JsonOffsets | None = None
        self._first_call = True
        self._warned: set[tuple[LossKind | str, MessageQueue]] = set()
        now = time.monotonic() * 1000
        mn = opts.min_offsets_per_trigger
        self._gate = TriggerGate(mn, opts.max_trigger_delay_ms, now) if mn is not None else None

    def initialOffset(self) -> dict[str, Any]:
        start = self.resolve_start(self._snapshot(strict=True))
        self._initial = to_json_dict(start)
        logger.info("rocketmq source: initial offsets %s", self._initial)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._snapshot(strict=True)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        start_map = from_json_dict(start, what="checkpointed start offset")
        snap = self._target if self._target is not None else self._snapshot(strict=False)
        rec = reconcile(start_map, snap)
        policy = DataLossPolicy(self.opts.fail_on_data_loss)
        for loss in rec.losses:
            if loss.kind is LossKind.QUEUE_GONE:
                if (loss.kind, loss.key) in self._warned:
                    continue
                self._warned.add((loss.kind, loss.key))
            policy.handle(loss)
        for key in rec.unavailable:
            if ("unavailable", key) not in self._warned:
                self._warned.add(("unavailable", key))
                logger.warning(
                    "queue %s is not in the route (broker down or topic missing); keeping offset %d",
                    queue_label(key),
                    start_map[key],
                )
        self._latest = rec.latest
        first, self._first_call = self._first_call, False
        if first and self._target is None and not self.opts.start.deterministic and start == self._initial:
            return to_json_dict(start_map)  # an empty batch 0 pins the start (pitfall 6)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(limit.max_rows, rec.effective_start, rec.latest)
        else:
            end = dict(rec.latest)
        if self._gate is not None and self._target is None:
            available = backlog(rec.effective_start, rec.latest)
            if not self._gate.admit(available, time.monotonic() * 1000):
                return to_json_dict(start_map)
        return to_json_dict(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else to_json_dict(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self._partitions(
            from_json_dict(start, what="batch start offset"), from_json_dict(end, what="batch end offset")
        )

    def commit(self, end: dict[str, Any]) -> None:
        logger.debug("rocketmq source: committed %s", end)

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()


# -------------------------------------------------------------------------------- batch


class RocketMQBatchReader(_Base, DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        snap = self._snapshot(strict=True)
        start = self.resolve_start(snap)
        end: OffsetMap = {}
        explicit = self.opts.end or {}
        for key in explicit:
            if key not in snap.queues:
                raise InvalidOptionError("endingOffsets", f"queue {queue_label(key)} does not exist")
        policy = DataLossPolicy(self.opts.fail_on_data_loss)
        for key, st in snap.queues.items():
            value = explicit.get(key, LATEST)
            if value == LATEST:
                value = st.max_offset
            elif value > st.max_offset:
                raise InvalidOptionError(
                    "endingOffsets",
                    f"offset {value} of queue {queue_label(key)} is beyond its latest offset {st.max_offset}",
                )
            if value < start[key]:
                raise InvalidOptionError(
                    "endingOffsets",
                    f"offset {value} of queue {queue_label(key)} is below its starting offset {start[key]}",
                )
            if start[key] < st.min_offset:  # the read skips to the min offset (or fails)
                policy.handle(DataLoss(LossKind.RETENTION, key, start[key], st.min_offset))
            end[key] = value
        self._cluster_close()
        return self._partitions(start, end)

    def _cluster_close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()


# ----------------------------------------------------------------------------- the source


class RocketMQDataSource(DataSource):
    """``format("rocketmq")``: read RocketMQ topics as a batch or a stream."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        opts = canonical_options(self.options)  # unknown option names fail at load()
        include = opts.get("includeProperties", "false").strip().lower()
        if include not in ("true", "false"):
            raise InvalidOptionError("includeProperties", f"must be true or false, got {include!r}")
        return schema_ddl(include == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketMQBatchReader(parse_options(self.options, "batch"))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RocketMQStreamReader(parse_options(self.options, "stream"))
