"""Executor side: pull one planned ``[start, until)`` range of one queue and yield Arrow batches.

The pull loop (reference §5.2 for statuses)::

    reply                                   action
    --------------------------------------- -----------------------------------------------------
    0 FOUND                                 send the next pull (nextBeginOffset) at once, then
                                            decode this body; rows with offset >= until are cut
    20 NO_MATCHED_MSG / MESSAGE_WAS_REMOVING advance to nextBeginOffset (without a tag filter
                                            the skipped offsets are data loss)
    19 NO_NEW_MSG / OFFSET_OVERFLOW_ONE      the planned offsets are not visible yet: back off and
                                            retry; after pullTimeoutMs without progress the rest
                                            of the range is data loss (MISSING_TAIL)
    21 PULL_OFFSET_MOVED                    offset < min: retention (OFFSET_MOVED) -> jump to
                                            nextBeginOffset; offset beyond max: MISSING_TAIL
    2 SYSTEM_BUSY / 215 FLOW_CONTROL         back off and retry (counts against pullTimeoutMs)
    anything else                           ReadError naming the queue and the broker's remark

Every data-loss event goes through :class:`DataLossPolicy` (``failOnDataLoss``: raise, or log
the skipped count and continue). Offsets are checked while decoding (strictly increasing, never
below the requested offset, no holes without a tag filter). Pulls never set COMMIT_OFFSET or
SUSPEND: the checkpoint is the only truth about progress, and a plain pull answers at once.

The read is deterministic (same range, same filter, same rows), which is what makes a replayed
batch give the same rows after a failure. Connection failures move to the next address of the
broker group, then re-resolve the route from the name server, before giving up.

Fault injection for tests: when ``POCKETMQ_SPARK_FAULT_DIR`` is set in the worker's environment
and holds a file ``fail-from-<N>``, the first range starting at offset >= N removes the file
and fails after yielding its rows (a task failure in the middle of a batch).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from pocketmq.remoting.protocol.acl import RequestSigner
from pocketmq.remoting.protocol.codes import FLAG_SUBSCRIPTION, LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import (
    RemoteProtocolError,
    RemotingConnectError,
    RemotingTimeoutError,
)
from pocketmq.remoting.protocol.heartbeat import MessageQueue, SubscriptionData
from pocketmq.remoting.transport.blocking import BlockingConnection, pool
from pocketmq.spark.errors import ReadError
from pocketmq.spark.metadata import ClusterClient, broker_addresses
from pocketmq.spark.offsets import queue_label
from pocketmq.spark.planning import DataLoss, DataLossPolicy, LossKind
from pocketmq.spark.rows import BATCH_BYTES, BATCH_ROWS, Columns

logger = logging.getLogger("pocketmq.spark")

FAULT_DIR_ENV = "POCKETMQ_SPARK_FAULT_DIR"
_RETRY_CODES = frozenset((ResponseCode.SYSTEM_BUSY, ResponseCode.FLOW_CONTROL))
_CONNECT_ATTEMPTS = 3
_PULL_CODES = frozenset(
    (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED)
)


@dataclass(frozen=True, slots=True)
class PullSettings:
    """What a read task needs besides its range (small: pickled with every task)."""

    name_servers: tuple[str, ...]
    group: str
    sub_expression: str
    batch_size: int
    timeout_ms: int
    fail_on_data_loss: bool
    include_properties: bool
    #: the ``filter`` option (SQL92), evaluated here on each message's properties
    sql_filter: str | None = None
    #: ACL credentials (strings: settings are pickled to executors; the signer is built there)
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    def signer(self) -> RequestSigner | None:
        return (
            RequestSigner(self.access_key, self.secret_key) if self.access_key and self.secret_key else None
        )

    @property
    def tags(self) -> frozenset[str] | None:
        sub = SubscriptionData.build("-", self.sub_expression)
        return None if sub.is_all or not sub.tags_set else frozenset(sub.tags_set)


class _RangeReader:
    """State of one range's pull loop (``offset`` is always the offset of the pull in flight)."""

    def __init__(
        self, settings: PullSettings, key: MessageQueue, start: int, until: int, addrs: tuple[str, ...]
    ) -> None:
        self.s = settings
        self.key = key
        self.start = self.offset = start
        self.until = until
        self.addrs = addrs
        self.tags = settings.tags
        self.policy = DataLossPolicy(settings.fail_on_data_loss)
        self.cols = Columns(
            key.topic, key.broker_name, key.queue_id, settings.include_properties, self.tags,
            sql_filter=settings.sql_filter,
        )  # fmt: skip
        self.timeout = settings.timeout_ms / 1000
        self.sign = settings.signer()
        self.ext = {
            "consumerGroup": settings.group,
            "topic": key.topic,
            "queueId": str(key.queue_id),
            "queueOffset": "0",
            "maxMsgNums": "0",
            "sysFlag": str(FLAG_SUBSCRIPTION),  # the header's expression, no heartbeat
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": settings.sub_expression,
            "subVersion": "0",
            "expressionType": "TAG",
            "bname": key.broker_name,
        }

    # ------------------------------------------------------------------------- helpers
    def _loss(self, kind: LossKind, to_offset: int, detail: str = "") -> None:
        self.policy.handle(DataLoss(kind, self.key, self.offset, min(to_offset, self.until), detail))

    def _on_gap(self, expected: int, found: int) -> None:
        self.policy.handle(
            DataLoss(LossKind.GAP, self.key, expected, found, "an unfiltered pull skipped offsets")
        )

    def _send(self, conn: BlockingConnection) -> int:
        ext = dict(self.ext)
        ext["queueOffset"] = str(self.offset)
        ext["maxMsgNums"] = str(min(self.s.batch_size, self.until - self.offset))
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext, language=LanguageCode.PYTHON)
        if self.sign is not None:
            self.sign(request)
        return conn.send(request)

    def _refresh_addrs(self) -> None:
        route = ClusterClient(
            self.s.name_servers, timeout_ms=self.s.timeout_ms, retries=1, signer=self.sign
        ).route(self.key.topic)
        if route is not None:
            fresh = broker_addresses(route).get(self.key.broker_name)
            if fresh:
                self.addrs = fresh

    # ---------------------------------------------------------------------------- loop
    def batches(self) -> Iterator[pa.RecordBatch]:
        failures: list[str] = []
        attempt = 0
        while self.offset < self.until:
            addr = self.addrs[attempt % len(self.addrs)] if self.addrs else ""
            try:
                if not addr:
                    raise RemotingConnectError(f"no address known for broker {self.key.broker_name}")
                with pool().connection(addr) as conn:
                    yield from self._pull_all(conn)
            except (RemotingConnectError, RemotingTimeoutError, RemoteProtocolError) as exc:
                failures.append(f"{addr}: {exc}")
                pool().discard(addr)
                attempt += 1
                if attempt >= _CONNECT_ATTEMPTS * max(1, len(self.addrs)):
                    raise ReadError(
                        f"queue {queue_label(self.key)}: cannot read [{self.offset}, {self.until}) from broker "
                        f"{self.key.broker_name}: {'; '.join(failures[-3:])}"
                    ) from exc
                if attempt % max(1, len(self.addrs)) == 0:
                    time.sleep(0.2)
                    try:
                        self._refresh_addrs()
                    except Exception as route_exc:  # the name server may be the problem too
                        failures.append(f"route refresh: {route_exc}")
        if len(self.cols):
            batch = self.cols.to_batch()
            if batch.num_rows:
                yield batch
        if self.policy.skipped_total:
            logger.warning(
                "queue %s: skipped %d lost offsets while reading [%d, %d)",
                queue_label(self.key), self.policy.skipped_total, self.start, self.until,
            )  # fmt: skip

    def _pull_all(self, conn: BlockingConnection) -> Iterator[pa.RecordBatch]:
        cols = self.cols
        pending = self._send(conn)
        stalled_since: float | None = None
        backoff = 0.005
        while True:
            reply, frame, body_at, body_end = conn.receive_frame(pending, self.timeout)
            code = reply.code
            ext = reply.ext_fields or {}
            try:
                nb = int(ext["nextBeginOffset"])
            except (KeyError, ValueError):
                if code == ResponseCode.SUCCESS or code in _PULL_CODES:
                    raise ReadError(
                        f"queue {queue_label(self.key)}: pull reply without nextBeginOffset: {ext}"
                    ) from None
                nb = self.offset
            if code == ResponseCode.SUCCESS:
                if nb <= self.offset:
                    raise ReadError(
                        f"queue {queue_label(self.key)}: broker returned FOUND at {self.offset} with nextBeginOffset {nb}"
                    )
                start = self.offset
                self.offset = nb
                if nb < self.until:
                    pending = self._send(conn)  # the broker works on it while we decode
                # decoded in the connection's receive buffer, before the next reply lands in it
                on_gap = None if self.tags is not None else self._on_gap
                expect = cols.decode(frame, start, self.until, on_gap, body_at, body_end)
                end = min(nb, self.until)
                if self.tags is None and expect < end:
                    self.policy.handle(
                        DataLoss(LossKind.GAP, self.key, expect, end, "the pull ended before nextBeginOffset")
                    )
                stalled_since = None
                backoff = 0.005
                if len(cols) >= BATCH_ROWS or cols.nbytes >= BATCH_BYTES:
                    batch = cols.to_batch()
                    if batch.num_rows:
                        yield batch
                if nb >= self.until:
                    return
                continue
            if (
                code in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_NOT_FOUND)
                and nb > self.offset
            ):
                # skipped entries: filtered out, commit log removed, or a missing CQ file
                if self.tags is None:
                    self._loss(LossKind.GAP, nb, f"broker status {reply.remark}")
                self.offset = nb
            elif code == ResponseCode.PULL_OFFSET_MOVED:
                min_offset = int(ext.get("minOffset", "0") or 0)
                if nb > self.offset and self.offset < min_offset:
                    self._loss(LossKind.OFFSET_MOVED, nb, f"broker min offset is {min_offset}")
                    self.offset = nb
                else:
                    self._loss(
                        LossKind.MISSING_TAIL,
                        self.until,
                        f"broker status {reply.remark}, max offset {ext.get('maxOffset')}",
                    )
                    self.offset = self.until
            elif (
                code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY)
                or code in _RETRY_CODES
            ):
                now = time.monotonic()
                if stalled_since is None:
                    stalled_since = now
                elif now - stalled_since > self.timeout:
                    if code in _RETRY_CODES:
                        raise ReadError(
                            f"queue {queue_label(self.key)}: broker busy for {self.s.timeout_ms} ms (code {code}: {reply.remark})"
                        )
                    self._loss(
                        LossKind.MISSING_TAIL,
                        self.until,
                        f"no message became readable within pullTimeoutMs={self.s.timeout_ms}",
                    )
                    self.offset = self.until
                    return
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.2)
            else:
                raise ReadError(
                    f"queue {queue_label(self.key)}: pull at offset {self.offset} failed: code {code}: {reply.remark}"
                )
            if self.offset >= self.until:
                return
            pending = self._send(conn)


def read_range(
    settings: PullSettings, key: MessageQueue, start: int, until: int, addrs: tuple[str, ...]
) -> Iterator[pa.RecordBatch]:
    """Rows of ``key`` with ``start <= queueOffset < until`` as Arrow batches."""
    if until <= start:
        return
    reader = _RangeReader(settings, key, start, until, addrs)
    fault = _fault_armed(start)
    yield from reader.batches()
    if fault is not None:
        _fire(fault, key, start, until)


def _fault_armed(start: int) -> str | None:
    directory = os.environ.get(FAULT_DIR_ENV)
    if not directory:
        return None
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    for name in names:
        if name.startswith("fail-from-") and name[10:].isdigit() and start >= int(name[10:]):
            return os.path.join(directory, name)
    return None


def _fire(path: str, key: MessageQueue, start: int, until: int) -> None:
    try:
        os.unlink(path)  # only one task wins the unlink
    except OSError:
        return
    raise ReadError(f"injected fault ({path}) after reading queue {queue_label(key)} [{start}, {until})")
