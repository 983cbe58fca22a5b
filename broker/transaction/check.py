"""``TransactionalMessageCheckService``: asks producers about unresolved half messages.

Every ``transactionCheckInterval`` (60 s) one run (RocketMQ 4.9 ``TransactionalMessageServiceImpl.check``):

1. reads the op records written since the last run into the resolved set;
2. walks the half queue from its progress (``CID_RMQ_SYS_TRANS``'s offset), deciding each half
   with :func:`~pocketmq.broker.transaction.bookkeeping.half_action`:

   * resolved, or older than ``fileReservedTime``: passed;
   * checked ``transactionCheckMax`` (15) times: moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0
     (plus an op record, so a late commit is refused and a restart does not revisit it);
   * due (older than ``transactionTimeOut``, 6 s, or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``): a
     copy is appended to the half queue with ``TRANSACTION_CHECK_TIMES`` + 1 and
     ``TRAN_PREPARED_QUEUE_OFFSET`` = the transaction's first offset, then CHECK_TRANSACTION_STATE
     (39) goes oneway over the connection of a live producer of the message's ``PGROUP``, naming
     the copy; the body is the copy with its real topic and queue. No live producer: the check
     still counts (as RocketMQ), the copy waits for the next run;
   * stored since the run began, or not old enough: the run stops there (later halves are younger);
   * a message asking for an immunity longer than ``transactionTimeOut`` and not old enough yet is
     copied to the tail unchanged, so it does not hold back the others.

3. the progress moves past every half it passed (each unresolved transaction keeps a copy at or
   beyond it), and the op progress past every op naming only transactions that are over; the
   resolved set forgets what it no longer needs as the progress passes it (issue 17: bounded
   memory and startup; :mod:`~pocketmq.broker.transaction.bookkeeping`, "Open transactions").

A run works in slices of ``budget`` records (op records read, halves decided, twice as many
resolved offsets forgotten) and yields to the event loop between slices, so a large backlog (a
minute of op records at tens of thousands of transactions a second) never stalls requests. A put the store refuses (disk full, ...) stops the run at that half;
the next run retries it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pocketmq.broker.processor.message_props import join_batch_properties
from pocketmq.broker.transaction.bookkeeping import (
    HalfAction,
    advance_op_progress,
    check_times,
    half_action,
    transaction_offset,
)
from pocketmq.broker.transaction.records import (
    F_BODY_LEN,
    F_BORN_IP,
    F_BORN_PORT,
    F_BORN_TS,
    F_CRC,
    F_FLAG,
    F_PREPARED_TX,
    F_QUEUE_OFFSET,
    F_RECONSUME,
    F_STORE_IP,
    F_STORE_PORT,
    F_STORE_TS,
    F_SYS_FLAG,
    HalfMessage,
    record_properties,
)
from pocketmq.broker.transaction.service import READ_BATCH, SKIP_STATUSES, edit_properties
from pocketmq.remoting.common.service import Service
from pocketmq.remoting.protocol.headers import CheckTransactionStateRequestHeader
from pocketmq.remoting.protocol.message import (
    HOST_FLAGS_MASK,
    MESSAGE_MAGIC_CODE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    RECORD_PREFIX_STRUCTS,
    MessageConst,
    create_offset_msg_id,
    encode_tail,
    get_property,
)
from pocketmq.remoting.protocol.route import (
    CID_SYS_RMQ_TRANS,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from pocketmq.store import AppendResult, GetMessageStatus, MessageInner

if TYPE_CHECKING:
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.transaction.service import TransactionalMessageService

logger = logging.getLogger(__name__)

__all__ = ["SendCheck", "TransactionalMessageCheckService", "copy_properties"]

#: ``(producer group, header, body) -> written``: CHECK_TRANSACTION_STATE to a live producer
SendCheck = Callable[[str, CheckTransactionStateRequestHeader, bytes], bool]

_S = GetMessageStatus
_V4 = RECORD_PREFIX_STRUCTS[0]
_STOPS = (HalfAction.NEW, HalfAction.WAIT)
_CHECK = HalfAction.CHECK
#: due halves whose copies one append takes. Few enough that a run's live objects (~5 per half:
#: the half, its copy, their tuples) stay under the collector's first threshold (700): at 256, each
#: run pushed survivors into the older generations, and the full collections that followed walked
#: the broker's whole heap (the check scan of a backlog with half of it resolved fell from ~105k to
#: 77-93k halves/s; at 64, 113-126k)
_RUN_MAX = 64
#: records a slice reads or decides. A due half costs ~7 us (copied and checked), an op record
#: ~1.5 us with its store read: ~0.7 ms a slice for a backlog of op records or resolved halves,
#: ~4 ms for due ones (at 4096, 5.6 and 30 ms), and the run's CPU is the same
BUDGET = 512
_TIMES = MessageConst.TRANSACTION_CHECK_TIMES
_PREPARED = MessageConst.TRAN_PREPARED_QUEUE_OFFSET
_IMMUNITY = MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS
_COPY_DROPS = (_TIMES, _PREPARED)
_TIMES_KEY, _PREPARED_KEY = _TIMES + NAME_VALUE_SEPARATOR, _PREPARED + NAME_VALUE_SEPARATOR
_IMMUNITY_KEY = _IMMUNITY + NAME_VALUE_SEPARATOR
_COPY_NEEDLES = (_TIMES_KEY, _PREPARED_KEY)


def copy_properties(props: str, times: int, tx_offset: int) -> str:
    """``props`` with ``TRANSACTION_CHECK_TIMES`` = ``times`` and ``TRAN_PREPARED_QUEUE_OFFSET`` =
    ``tx_offset`` (replacing earlier values): the properties of a check copy. A first copy (the
    common case) has neither, so it is one string join."""
    if _COPY_NEEDLES[0] in props or _COPY_NEEDLES[1] in props:
        props = edit_properties(props, _COPY_DROPS)
    return join_batch_properties(
        props,
        f"{_TIMES}{NAME_VALUE_SEPARATOR}{times}{PROPERTY_SEPARATOR}{_PREPARED}{NAME_VALUE_SEPARATOR}{tx_offset}",
    )


def _copy_of(half: HalfMessage, topic: str, times: int) -> MessageInner:
    """A copy of ``half`` for ``topic`` queue 0: its fields and body bytes as stored, its
    properties with ``times`` checks counted (:func:`copy_properties`)."""
    f = half.fields
    return MessageInner(
        topic, half.body, 0, f[F_FLAG], copy_properties(half.props_str, times, half.tx_offset), f[F_SYS_FLAG],
        f[F_BORN_TS], (f[F_BORN_IP], f[F_BORN_PORT]), (f[F_STORE_IP], f[F_STORE_PORT]), f[F_RECONSUME],
        f[F_PREPARED_TX],
    )  # fmt: skip


class TransactionalMessageCheckService(Service):
    """The check-back loop (module docstring); not started on a slave."""

    def __init__(
        self,
        service: TransactionalMessageService,
        *,
        send_check: SendCheck,
        config: Callable[[], BrokerConfig],
        now_ms: Callable[[], int],
        budget: int = BUDGET,
    ) -> None:
        interval = config().transaction_check_interval / 1000
        super().__init__(interval=interval, initial_delay=interval, name="transaction-check")
        self.service = service
        self.send_check = send_check
        self.config = config
        self.now_ms = now_ms
        self.budget = max(1, budget)
        #: completed runs (tests wait on it)
        self.runs = 0
        #: the op queue's end at the previous slice (-1: none yet)
        self._op_end = -1

    async def run_once(self) -> None:
        self.interval = max(0.001, self.config().transaction_check_interval / 1000)
        run_start = self.now_ms()
        self._op_end = -1
        more = self.check_slice(run_start)
        while more and not self.is_stopping:
            await asyncio.sleep(0)  # let requests and the store's dispatch run between slices
            more = self.check_slice(run_start)
        self.runs += 1

    def check_once(self) -> None:
        """One whole run, synchronously (tests and the bench)."""
        run_start = self.now_ms()
        self._op_end = -1
        while self.check_slice(run_start):
            pass
        self.runs += 1

    # ------------------------------------------------------------------------------ scan
    def check_slice(self, run_start: int) -> bool:
        """Read a slice of op records or, once none is left, decide up to ``budget`` halves
        from the progress on; True when the run should go on.

        Per-half cost is what bounds a large backlog (issue 17: >= 100k halves/s), so a half
        resolved by its own offset is passed without reading it, and the others are read from
        the batch's bytes in place: one prefix unpack, the properties string, then only the
        properties the decision needs (no decoded message, no property dict).
        """
        svc = self.service
        store = svc.store
        # the op records first (their own slices while a backlog lasts): a half is decided only
        # once every op record stored before this slice was read, so none is taken for
        # unresolved because its op was not read yet. A slice reads twice what arrived since the
        # last one (at least budget): the backlog shrinks even when more than budget op records
        # arrive between two slices, and a slice's reading stays in proportion to them
        op_end = store.get_max_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        limit = max(self.budget, 2 * (op_end - self._op_end)) if self._op_end >= 0 else self.budget
        self._op_end = op_end
        if svc.read_ops(limit) >= limit:
            return True
        cfg = self.config()
        offset = max(svc.half_progress, store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0))
        high = store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        now = self.now_ms()
        reserved_ms = cfg.store.file_reserved_time * 3_600_000
        check_max, timeout_ms = cfg.transaction_check_max, cfg.transaction_time_out
        done = svc.done
        # ResolvedOffsets' test per half, inline: the scan goes up the offsets, so the set of a
        # sealed range is looked up once per range (span), then tested with ``cur``
        lo, hi, sealed = done.span(offset)
        budget = self.budget
        stop = False
        # due halves whose copies go to the store together (_check_run): one append, one reput
        # wake-up and one store time for up to _RUN_MAX copies instead of a put each
        run: list[tuple[HalfMessage, MessageInner]] = []
        while offset < high and budget > 0 and not stop:
            if lo <= offset < hi:
                resolved = offset in sealed or offset in done.cur
            else:
                resolved = offset in done
                lo, hi, sealed = done.span(offset)
            if resolved:  # resolved by its own offset: passed without a read
                offset += 1
                budget -= 1
                continue
            result = store.get_message(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, 0, offset, READ_BATCH)
            if result.status is not _S.FOUND:
                if result.status in SKIP_STATUSES and result.next_begin_offset > offset:
                    offset = result.next_begin_offset
                    continue
                break
            buf = result.body
            pos, end = 0, len(buf)
            while pos < end and budget > 0:
                prefix = _V4
                fields = _V4.unpack_from(buf, pos)
                if fields[F_SYS_FLAG] & HOST_FLAGS_MASK:
                    prefix = RECORD_PREFIX_STRUCTS[fields[F_SYS_FLAG] & HOST_FLAGS_MASK]
                    fields = prefix.unpack_from(buf, pos)
                total, q = fields[0], fields[F_QUEUE_OFFSET]
                budget -= 1
                if q < offset:
                    pos += total
                    continue
                if lo <= q < hi:
                    resolved = q in sealed or q in done.cur
                else:
                    resolved = q in done
                    lo, hi, sealed = done.span(q)
                if resolved:  # resolved by its own offset: no decoding
                    offset = max(offset, q + 1)
                    pos += total
                    continue
                body_at = pos + prefix.size
                props_str = record_properties(buf, pos, body_at, fields)
                if props_str is None:
                    logger.error("half queue: unreadable record at offset %d; passed", q)
                    offset = q + 1
                    pos = pos + total if total > 0 else end
                    continue
                # the three properties the decision reads, each looked up only when its name is
                # in the string (a first half has none of them): no dict of every property
                times = check_times(get_property(props_str, _TIMES)) if _TIMES_KEY in props_str else 0
                tx = q
                if _PREPARED_KEY in props_str:
                    tx = transaction_offset(q, get_property(props_str, _PREPARED))
                action = half_action(
                    resolved=tx in done, times=times, check_max=check_max, now_ms=now,
                    born_ms=fields[F_BORN_TS], store_ms=fields[F_STORE_TS], run_start_ms=run_start,
                    timeout_ms=timeout_ms,
                    immunity_raw=get_property(props_str, _IMMUNITY) if _IMMUNITY_KEY in props_str else None,
                    file_reserved_ms=reserved_ms,
                )  # fmt: skip
                if action is _CHECK:
                    half = HalfMessage(buf, body_at, fields, props_str, tx)
                    run.append((half, _copy_of(half, RMQ_SYS_TRANS_HALF_TOPIC, times + 1)))
                    if len(run) >= _RUN_MAX:
                        failed = self._check_run(run)
                        run = []
                        if failed is not None:  # (the store refused it: the run stops there)
                            offset, stop = failed, True
                            break
                elif action in _STOPS:
                    stop = True
                    break
                elif action is not HalfAction.RESOLVED:
                    # (copies in scan order: the due ones before this one's)
                    failed = self._check_run(run) if run else None
                    run = []
                    if failed is not None or not self._act(
                        action, HalfMessage(buf, body_at, fields, props_str, tx), times
                    ):
                        offset, stop = q if failed is None else failed, True
                        break
                offset = q + 1
                pos += total
            if not stop and pos >= end:
                offset = max(offset, result.next_begin_offset)
        if run:
            failed = self._check_run(run)
            if failed is not None:
                offset, stop = min(offset, failed), True
        svc.half_progress = offset
        svc.passed(offset)
        op_progress = advance_op_progress(
            svc.op_progress, svc.op_named, offset, svc.open_txs.counts, self.budget * 4
        )
        if op_progress != svc.op_progress:
            svc.op_named.drop_below(op_progress)
            svc.op_progress = op_progress
        # the resolved offsets the progress passed, forgotten a bounded stretch per slice
        pruning = svc.prune_step(self.budget * 2)
        return (not stop and offset < high) or pruning

    def _act(self, action: HalfAction, half: HalfMessage, times: int) -> bool:
        """Carry out ``action`` (not CHECK: :meth:`_check_run`); False when the store refused a
        put (the run stops there)."""
        counters = self.service.counters
        if action is HalfAction.DEFER:
            return self._put_copy(half, _copy_of(half, RMQ_SYS_TRANS_HALF_TOPIC, times)) is not None
        if action is HalfAction.DISCARD:
            self.service.ensure_topic(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)
            if self._put_copy(half, _copy_of(half, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, times)) is None:
                return False
            counters.discarded += 1
            q = half.fields[F_QUEUE_OFFSET]
            logger.info(
                "half message %d (%s) checked %d times: moved to %s",
                q, get_property(half.props_str, MessageConst.UNIQ_KEY), times, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
            )  # fmt: skip
            self.service.write_op(q, half.tx_offset)
        elif action is HalfAction.EXPIRED:
            counters.expired += 1
        return True

    def _check_run(self, run: list[tuple[HalfMessage, MessageInner]]) -> int | None:
        """Store the check copies of ``run`` (due halves, in scan order) in one append, then ask
        each one's producer group; when the store will not take them so (a segment roll, a
        refusal), one at a time. The queue offset of the first half whose copy the store
        refused (the run stops there; nothing after it was stored or asked), else None."""
        svc = self.service
        appended = svc.store.put_run([inner for _, inner in run])
        send = self._send
        if appended is None:
            for half, inner in run:
                append = self._put_copy(half, inner)
                if append is None:
                    return int(half.fields[F_QUEUE_OFFSET])
                props: str = inner.properties  # type: ignore[assignment]  # (a string: _copy_of's)
                send(
                    half, props, inner.body, append.wrote_offset, append.logics_offset, append.store_timestamp,
                    append.msg_id,
                )  # fmt: skip
            return None
        open_add = svc.open_txs.add
        for (half, inner), record in zip(run, appended, strict=True):
            # (physical offset, size, topic, queue id, queue offset, store time, ...)
            phy, qoff = record[0], record[4]
            # (stored): the transaction stays open while the copy is at or past the progress
            open_add(qoff, half.tx_offset)
            ip, port = inner.store_host
            props = inner.properties  # type: ignore[assignment]
            send(half, props, inner.body, phy, qoff, record[5], create_offset_msg_id(ip, port, phy))
        return None

    def _put_copy(self, half: HalfMessage, inner: MessageInner) -> AppendResult | None:
        """Append ``inner``, a copy of ``half`` (:func:`_copy_of`), on its own: where it landed,
        None when the store refused it."""
        topic = inner.topic
        result = self.service.store.put_message(inner)
        if result.append is not None and topic == RMQ_SYS_TRANS_HALF_TOPIC:
            # (stored, even when refused after the append): the transaction stays open while
            # the copy is at or past the progress
            self.service.open_txs.add(result.append.logics_offset, half.tx_offset)
        if result.append is None or not result.status.is_ok:
            logger.warning(
                "copy of half message %d to %s refused (%s)",
                half.fields[F_QUEUE_OFFSET],
                topic,
                result.status.name,
            )
            return None
        return result.append

    def _send(
        self,
        half: HalfMessage,
        props_str: str,
        body: bytes,
        wrote_offset: int,
        logics_offset: int,
        store_timestamp: int,
        msg_id: str,
    ) -> None:
        """CHECK_TRANSACTION_STATE for the check copy of ``half`` stored at ``wrote_offset``
        (queue offset ``logics_offset``, with ``props_str`` and ``body``)."""
        # the half's fields and properties: the copy differs in its check count and offset
        f, props = half.fields, half.props_str
        real_qid = get_property(props, MessageConst.REAL_QID) or ""
        uniq = get_property(props, MessageConst.UNIQ_KEY)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=logics_offset, commit_log_offset=wrote_offset,
            msg_id=uniq, transaction_id=uniq, offset_msg_id=msg_id,
        )  # fmt: skip
        # the copy as a record with its real topic and queue (inline of encode_message: the body
        # and its CRC are the half's, the prefix fields the half's or the copy's)
        real_topic = get_property(props, MessageConst.REAL_TOPIC) or RMQ_SYS_TRANS_HALF_TOPIC
        tail = encode_tail(real_topic.encode(), props_str.encode())
        prefix = RECORD_PREFIX_STRUCTS[f[F_SYS_FLAG] & HOST_FLAGS_MASK]
        blen = f[F_BODY_LEN]
        head = prefix.pack(
            prefix.size + blen + len(tail), MESSAGE_MAGIC_CODE, f[F_CRC], int(real_qid) if real_qid.isdigit() else 0,
            f[F_FLAG], logics_offset, wrote_offset, f[F_SYS_FLAG], f[F_BORN_TS], f[F_BORN_IP],
            f[F_BORN_PORT], store_timestamp, f[F_STORE_IP], f[F_STORE_PORT], f[F_RECONSUME],
            f[F_PREPARED_TX], blen,
        )  # fmt: skip
        record = b"".join((head, body, tail))
        counters = self.service.counters
        if self.send_check(get_property(props, MessageConst.PGROUP) or "", header, record):
            counters.checks += 1
        else:
            counters.checks_no_producer += 1
