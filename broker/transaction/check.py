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
   beyond it), and the op progress past every op naming only offsets below the half progress.

A run works in slices of ``budget`` records and yields to the event loop between slices, so a large
backlog never stalls requests. A put the store refuses (disk full, ...) stops the run at that half;
the next run retries it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pocketmq.broker.transaction.bookkeeping import (
    HalfAction,
    advance_op_progress,
    check_times,
    half_action,
    is_resolved,
)
from pocketmq.broker.transaction.service import (
    READ_BATCH,
    SKIP_STATUSES,
    HalfMessage,
    edit_properties,
    read_half,
)
from pocketmq.remoting.common.service import Service
from pocketmq.remoting.protocol.headers import CheckTransactionStateRequestHeader
from pocketmq.remoting.protocol.message import (
    HOST_FLAGS_MASK,
    RECORD_PREFIX_STRUCTS,
    MessageConst,
    MessageDecodeError,
    encode_message,
)
from pocketmq.remoting.protocol.route import (
    CID_SYS_RMQ_TRANS,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
)
from pocketmq.store import GetMessageStatus, MessageInner, PutResult

if TYPE_CHECKING:
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.transaction.service import TransactionalMessageService

logger = logging.getLogger(__name__)

__all__ = ["SendCheck", "TransactionalMessageCheckService"]

#: ``(producer group, header, body) -> written``: CHECK_TRANSACTION_STATE to a live producer
SendCheck = Callable[[str, CheckTransactionStateRequestHeader, bytes], bool]

_S = GetMessageStatus
_V4 = RECORD_PREFIX_STRUCTS[0]
_STOPS = (HalfAction.NEW, HalfAction.WAIT)
_TIMES = MessageConst.TRANSACTION_CHECK_TIMES
_PREPARED = MessageConst.TRAN_PREPARED_QUEUE_OFFSET
_COPY_DROPS = (_TIMES, _PREPARED)


class TransactionalMessageCheckService(Service):
    """The check-back loop (module docstring); not started on a slave."""

    def __init__(
        self,
        service: TransactionalMessageService,
        *,
        send_check: SendCheck,
        config: Callable[[], BrokerConfig],
        now_ms: Callable[[], int],
        budget: int = 4096,
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

    async def run_once(self) -> None:
        self.interval = max(0.001, self.config().transaction_check_interval / 1000)
        run_start = self.now_ms()
        more = self.check_slice(run_start)
        while more and not self.is_stopping:
            await asyncio.sleep(0)  # let requests and the store's dispatch run between slices
            more = self.check_slice(run_start)
        self.runs += 1

    def check_once(self) -> None:
        """One whole run, synchronously (tests and the bench)."""
        run_start = self.now_ms()
        while self.check_slice(run_start):
            pass
        self.runs += 1

    # ------------------------------------------------------------------------------ scan
    def check_slice(self, run_start: int) -> bool:
        """Decide up to ``budget`` halves from the progress on; True when the run should go on."""
        svc = self.service
        svc.read_ops()
        store = svc.store
        cfg = self.config()
        offset = max(svc.half_progress, store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0))
        high = store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        now = self.now_ms()
        reserved_ms = cfg.store.file_reserved_time * 3_600_000
        done = svc.done
        budget = self.budget
        stop = False
        while offset < high and budget > 0 and not stop:
            result = store.get_message(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, 0, offset, READ_BATCH)
            if result.status is not _S.FOUND:
                if result.status in SKIP_STATUSES and result.next_begin_offset > offset:
                    offset = result.next_begin_offset
                    continue
                break
            buf = result.body
            pos, end = 0, len(buf)
            while pos < end and budget > 0:
                fields = _V4.unpack_from(buf, pos)
                if fields[7] & HOST_FLAGS_MASK:
                    fields = RECORD_PREFIX_STRUCTS[fields[7] & HOST_FLAGS_MASK].unpack_from(buf, pos)
                total, q = fields[0], fields[5]
                budget -= 1
                if q < offset or q in done:  # resolved by its own offset: no decoding
                    offset = max(offset, q + 1)
                    pos += total
                    continue
                try:
                    half = read_half(buf, pos)
                except MessageDecodeError:
                    logger.exception("half queue: unreadable record at offset %d; passed", q)
                    offset = q + 1
                    pos += total
                    continue
                msg = half.msg
                props = msg.properties  # parsed once: the decision, the copy and the check read it
                times = check_times(props.get(_TIMES))
                action = half_action(
                    resolved=is_resolved(q, half.tx_offset, done), times=times,
                    check_max=cfg.transaction_check_max, now_ms=now, born_ms=msg.born_timestamp,
                    store_ms=msg.store_timestamp, run_start_ms=run_start, timeout_ms=cfg.transaction_time_out,
                    immunity_raw=props.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS),
                    file_reserved_ms=reserved_ms,
                )  # fmt: skip
                if action in _STOPS or not self._act(action, half, times):
                    stop = True
                    break
                offset = q + 1
                pos += total
            if not stop and pos >= end:
                offset = max(offset, result.next_begin_offset)
        svc.half_progress = offset
        op_progress = advance_op_progress(svc.op_progress, svc.op_max_half, offset)
        if op_progress != svc.op_progress:
            for k in range(svc.op_progress, op_progress):
                svc.op_max_half.pop(k, None)
            svc.op_progress = op_progress
        svc.prune()
        return not stop and offset < high

    def _act(self, action: HalfAction, half: HalfMessage, times: int) -> bool:
        """Carry out ``action``; False when the store refused a put (the run stops there)."""
        counters = self.service.counters
        if action is HalfAction.CHECK:
            copy = self._copy(half, RMQ_SYS_TRANS_HALF_TOPIC, times + 1)
            if copy is None:
                return False
            self._send(half, copy)
        elif action is HalfAction.DEFER:
            return self._copy(half, RMQ_SYS_TRANS_HALF_TOPIC, times) is not None
        elif action is HalfAction.DISCARD:
            self.service.ensure_topic(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)
            if self._copy(half, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, times) is None:
                return False
            counters.discarded += 1
            logger.info(
                "half message %d (%s) checked %d times: moved to %s",
                half.msg.queue_offset, half.msg.get_property(MessageConst.UNIQ_KEY), times,
                RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
            )  # fmt: skip
            self.service.write_op(half.msg.queue_offset, half.tx_offset)
        elif action is HalfAction.EXPIRED:
            counters.expired += 1
        return True

    def _copy(self, half: HalfMessage, topic: str, times: int) -> tuple[PutResult, str] | None:
        """Append a copy of ``half`` to ``topic`` queue 0; its put result and properties."""
        msg = half.msg
        add = ((_TIMES, str(times)), (_PREPARED, str(half.tx_offset)))
        props_str = edit_properties(msg.properties_str, _COPY_DROPS, add)
        inner = MessageInner(
            topic, msg.body, 0, msg.flag, props_str, msg.sys_flag, msg.born_timestamp, half.born_host,
            half.store_host, msg.reconsume_times, msg.prepared_transaction_offset,
        )  # fmt: skip
        result = self.service.store.put_message(inner)
        if result.append is None or not result.status.is_ok:
            logger.warning(
                "copy of half message %d to %s refused (%s)", msg.queue_offset, topic, result.status.name
            )
            return None
        return result, props_str

    def _send(self, half: HalfMessage, copy: tuple[PutResult, str]) -> None:
        result, props_str = copy
        append = result.append
        assert append is not None
        msg = half.msg
        props = msg.properties  # the half's: the copy differs only in its check count and offset
        real_qid = props.get(MessageConst.REAL_QID, "")
        uniq = props.get(MessageConst.UNIQ_KEY)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=append.logics_offset, commit_log_offset=append.wrote_offset,
            msg_id=uniq, transaction_id=uniq, offset_msg_id=append.msg_id,
        )  # fmt: skip
        body = encode_message(
            topic=props.get(MessageConst.REAL_TOPIC) or RMQ_SYS_TRANS_HALF_TOPIC, body=msg.body,
            properties=props_str, queue_id=int(real_qid) if real_qid.isdigit() else 0, flag=msg.flag,
            queue_offset=append.logics_offset, commit_log_offset=append.wrote_offset, sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, born_host=half.born_host, store_timestamp=append.store_timestamp,
            store_host=half.store_host, reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
        )  # fmt: skip
        counters = self.service.counters
        if self.send_check(props.get(MessageConst.PGROUP, ""), header, body):
            counters.checks += 1
        else:
            counters.checks_no_producer += 1
