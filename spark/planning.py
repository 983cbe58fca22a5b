"""Driver-side planning (pure): reconcile offsets with the cluster, admission control, ranges.

* :func:`reconcile` compares the offsets a micro-batch starts from with a :class:`Snapshot` of
  the cluster (queues from the name server, per-queue min/max offsets from the brokers). It
  yields the latest offsets, the effective starts used to size a batch, and every data-loss
  event (the decision table is on :class:`LossKind`).
* A queue that appears for the first time enters the offsets at its min offset with an empty
  range; it is read from the next batch on. That way ``partitions(start, end)`` never has to
  look anything up for a queue missing from ``start``, so a replayed batch plans exactly the
  same ranges.
* :func:`rate_limit` is the Kafka source's proportional ``maxOffsetsPerTrigger`` split: every
  queue with data gets its share, small shares round up (no queue starves), big ones down, and
  nothing passes a queue's latest offset.
* :func:`split_ranges` is Kafka's ``KafkaOffsetRangeCalculator`` (``maxRecordsPerPartition``
  first, then ``minPartitions`` with Scala's half-up ``math.round``: Python's ``round`` is
  banker's rounding); :func:`interleave` orders the ranges so that consecutive tasks
  go to different brokers.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pocketmq.remoting.protocol.heartbeat import MessageQueue
from pocketmq.spark.errors import DataLossError
from pocketmq.spark.offsets import OffsetMap, queue_label

logger = logging.getLogger("pocketmq.spark")

_INT64_MAX = 2**63 - 1


# ------------------------------------------------------------------------------ data loss


class LossKind(enum.Enum):
    """Why offsets were lost. ``failOnDataLoss=true`` fails the query on every kind."""

    #: The batch starts below the queue's min offset (retention deleted the files).
    RETENTION = "offsets were removed by retention"
    #: The queue's broker still serves the topic but the queue id is gone (topic shrunk).
    QUEUE_GONE = "the queue no longer exists"
    #: The planned end is below the start (the queue was reset or recreated).
    QUEUE_RESET = "the queue's offsets went backwards (reset or recreated)"
    #: A queue seen for the first time does not start at offset 0.
    NEW_QUEUE = "a new queue's earliest offset is not 0"
    #: The broker answered OFFSET_TOO_SMALL / PULL_OFFSET_MOVED while reading.
    OFFSET_MOVED = "the broker moved the pull offset (OFFSET_TOO_SMALL / OFFSET_ILLEGAL)"
    #: Unfiltered messages skipped offsets (commit log removed under the consume queue).
    GAP = "offsets are missing in the middle of the range"
    #: The planned range end never became readable within pullTimeoutMs.
    MISSING_TAIL = "the end of the planned range is not available on the broker"


@dataclass(frozen=True, slots=True)
class DataLoss:
    kind: LossKind
    key: MessageQueue
    from_offset: int  # first lost offset
    to_offset: int  # first offset after the lost ones (may equal from_offset when unknown)
    detail: str = ""

    @property
    def skipped(self) -> int:
        return max(0, self.to_offset - self.from_offset)

    def describe(self) -> str:
        extra = f"; {self.detail}" if self.detail else ""
        if self.to_offset <= self.from_offset:  # how much is lost is unknown (gone / reset queue)
            return f"data loss on queue {queue_label(self.key)}: {self.kind.value} (at offset {self.from_offset}){extra}"
        return (
            f"data loss on queue {queue_label(self.key)}: {self.kind.value}; offsets [{self.from_offset}, "
            f"{self.to_offset}) ({self.skipped} messages) cannot be read{extra}"
        )


class DataLossPolicy:
    """``failOnDataLoss``: raise :class:`DataLossError`, or log and let the caller skip."""

    __slots__ = ("fail", "skipped_total")

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.skipped_total = 0

    def handle(self, loss: DataLoss) -> None:
        if self.fail:
            raise DataLossError(
                loss.describe() + ". Some data may have been lost; if this is expected, set the "
                "source option failOnDataLoss=false to skip to the earliest available offset."
            )
        self.skipped_total += loss.skipped
        logger.warning("%s; failOnDataLoss=false: skipping them", loss.describe())


# ------------------------------------------------------------------------------ snapshots


@dataclass(frozen=True, slots=True)
class QueueState:
    min_offset: int
    max_offset: int  # next offset to be written (exclusive)


@dataclass(slots=True)
class Snapshot:
    """What the driver saw this trigger."""

    queues: dict[MessageQueue, QueueState] = field(default_factory=dict)
    #: (topic, brokerName) pairs the topic route lists; a queue missing while its broker is
    #: listed is gone for good, a queue whose broker is not listed is only unavailable.
    topic_brokers: set[tuple[str, str]] = field(default_factory=set)
    #: brokerName -> addresses, master (brokerId 0) first.
    broker_addrs: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def latest(self) -> OffsetMap:
        return {k: s.max_offset for k, s in self.queues.items()}


@dataclass(slots=True)
class Reconciled:
    latest: OffsetMap  # where each queue's data ends now (new queues: their min offset)
    effective_start: OffsetMap  # start clamped up to the min offset (sizes batches)
    losses: list[DataLoss]
    new_queues: list[MessageQueue]
    unavailable: list[MessageQueue]  # carried forward: broker or topic missing from the route


def reconcile(start: Mapping[MessageQueue, int], snap: Snapshot) -> Reconciled:
    """Decide every queue's latest offset for the next batch (see the module docstring)."""
    latest: OffsetMap = {}
    eff: OffsetMap = {}
    losses: list[DataLoss] = []
    new: list[MessageQueue] = []
    unavailable: list[MessageQueue] = []
    for key, st in snap.queues.items():
        s = start.get(key)
        if s is None:
            new.append(key)
            if st.min_offset > 0:
                losses.append(DataLoss(LossKind.NEW_QUEUE, key, 0, st.min_offset))
            latest[key] = eff[key] = st.min_offset
            continue
        if s < st.min_offset:
            losses.append(DataLoss(LossKind.RETENTION, key, s, st.min_offset))
            eff[key] = st.min_offset
        else:
            eff[key] = s
        # max < start (queue reset) passes through: partitions() reports it for the range.
        latest[key] = st.max_offset
    for key, s in start.items():
        if key in snap.queues:
            continue
        latest[key] = eff[key] = s
        if (key.topic, key.broker_name) in snap.topic_brokers:
            losses.append(DataLoss(LossKind.QUEUE_GONE, key, s, s, "the topic route no longer lists it"))
        else:
            unavailable.append(key)
    return Reconciled(latest, eff, losses, new, unavailable)


# --------------------------------------------------------------------------- admission


def rate_limit(
    limit: int, start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int]
) -> OffsetMap:
    """Kafka ``rateLimit``: at most about ``limit`` offsets, shared in proportion to the backlog.

    Queues missing from ``start`` or with no backlog keep their latest offset.
    """
    sizes = {k: end - start[k] for k, end in latest.items() if k in start and end - start[k] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: OffsetMap = {}
    for key, end in latest.items():
        size = sizes.get(key)
        if size is None:
            out[key] = end
            continue
        begin = start[key]
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        off = _INT64_MAX if share > _INT64_MAX - begin else begin + share
        out[key] = min(end, off)
    return out


def backlog(start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int]) -> int:
    """Offsets available past ``start`` (queues whose end is not beyond their start count 0)."""
    return sum(max(0, end - start.get(k, end)) for k, end in latest.items())


class TriggerGate:
    """``minOffsetsPerTrigger`` + ``maxTriggerDelay``: hold a batch back until enough data.

    The Python ``ReadMinRows`` has no delay and there is no CompositeReadLimit in PySpark, so
    the gate lives in ``latestOffset``. The delay counts from the last batch let through, or
    from the gate's creation (a restarted query also waits for the minimum first).
    """

    __slots__ = ("delay_ms", "last_ms", "min_rows")

    def __init__(self, min_rows: int, delay_ms: int, now_ms: float) -> None:
        self.min_rows = min_rows
        self.delay_ms = delay_ms
        self.last_ms = now_ms

    def admit(self, available: int, now_ms: float) -> bool:
        """True when a batch should run now (and the delay clock restarts)."""
        if available <= 0:
            return False
        if available >= self.min_rows or now_ms - self.last_ms >= self.delay_ms:
            self.last_ms = now_ms
            return True
        return False


# ------------------------------------------------------------------------------- ranges


@dataclass(frozen=True, slots=True)
class OffsetRange:
    key: MessageQueue
    start: int
    until: int

    @property
    def size(self) -> int:
        return self.until - self.start


def _divide(parts: int, r: OffsetRange) -> list[OffsetRange]:
    """Kafka ``getDividedPartition``: near-equal pieces, the rounding left to the last ones."""
    out = []
    remaining = r.size
    start = r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.until)
        if end > start:
            out.append(OffsetRange(r.key, start, end))
        start = end
    return out


def split_ranges(
    ranges: Iterable[OffsetRange], min_partitions: int | None = None, max_records: int | None = None
) -> list[OffsetRange]:
    """Kafka's ``getRanges``: drop empty ranges, cap by ``max_records``, then reach ``min_partitions``."""
    out = [r for r in ranges if r.size > 0]
    if max_records is not None:
        out = [piece for r in out for piece in _divide(math.ceil(r.size / max_records), r)]
    if min_partitions is not None and min_partitions > len(out):
        total = sum(r.size for r in out)
        split: list[OffsetRange] = []
        for r in out:
            # Scala math.round is half-up: floor(x + 0.5)
            parts = max(math.floor(r.size / total * min_partitions + 0.5), 1)
            split.extend(_divide(parts, r))
        out = split
    return out


def interleave(ranges: Iterable[OffsetRange]) -> list[OffsetRange]:
    """Deterministic task order: round robin over brokers, each broker's ranges in key order."""
    by_broker: dict[str, list[OffsetRange]] = {}
    for r in sorted(ranges, key=lambda r: (r.key.broker_name, r.key.topic, r.key.queue_id, r.start)):
        by_broker.setdefault(r.key.broker_name, []).append(r)
    lanes = [by_broker[b] for b in sorted(by_broker)]
    out: list[OffsetRange] = []
    depth = max((len(lane) for lane in lanes), default=0)
    for i in range(depth):
        out.extend(lane[i] for lane in lanes if i < len(lane))
    return out


def plan_ranges(
    start: Mapping[MessageQueue, int],
    end: Mapping[MessageQueue, int],
    policy: DataLossPolicy,
    *,
    min_partitions: int | None = None,
    max_records: int | None = None,
) -> list[OffsetRange]:
    """The ranges of one batch: ``[start, end)`` per queue, split and interleaved.

    A queue whose end is below its start is a :data:`LossKind.QUEUE_RESET`; a queue missing
    from ``start`` has no range (new queues enter with an empty range, see module docstring).
    """
    ranges = []
    for key, until in end.items():
        begin = start.get(key)
        if begin is None:
            logger.warning(
                "queue %s has no start offset in this batch; it is read from the next one", queue_label(key)
            )
            continue
        if until < begin:
            detail = f"the broker's offsets now end at {until}, below the start {begin}"
            policy.handle(DataLoss(LossKind.QUEUE_RESET, key, begin, begin, detail))
            continue
        ranges.append(OffsetRange(key, begin, until))
    return interleave(split_ranges(ranges, min_partitions, max_records))
