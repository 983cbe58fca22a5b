"""``TransactionalMessageService``: half messages, commit and rollback, op records, progress.

RocketMQ 4.x's half-topic design (``TransactionalMessageServiceImpl`` + ``...Bridge``):

* **prepare** (:meth:`prepare_message`, from the send processor): the message keeps its real
  topic and queue in ``REAL_TOPIC`` / ``REAL_QID``, its sysFlag transaction bits are cleared, and
  it is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, where no consumer of the real topic sees it;
* **commit** (:meth:`commit`): a copy goes to the real topic and queue (same UNIQ_KEY, sysFlag
  transaction type COMMIT, ``preparedTransactionOffset`` = the half's CommitLog offset, the
  half's whole property map re-encoded as Apache's ``endMessageTransaction`` does), then an op
  record is written;
* **rollback** (:meth:`rollback`): only the op record;
* END_TRANSACTION of a half this process stored lately (no read back; oneway ones stored with
  their loop turn's others): :mod:`.ends` (``ends``);
* op records and the transaction identity of check copies: :mod:`.bookkeeping`.

The resolved half offsets the check scan and END_TRANSACTION still need are kept in memory
(``done``), so a second commit or rollback of a transaction (a late END_TRANSACTION racing a
check-back, a retried one) is refused and never stores a second copy; a transaction the half
progress has passed and that is not open is over and answered so without an entry
(:mod:`.bookkeeping`, "Open transactions"). Memory: the offsets resolved at or past the half
progress plus the open transactions, whatever the history's length; :meth:`load` reads the op
queue from the op progress and the half queue from the half progress (to rebuild the open
transactions) only.

Checks: :mod:`.check`. Progress: the offsets of group ``CID_RMQ_SYS_TRANS`` on the half and op
queues in ``consumerOffset.json`` (as RocketMQ), persisted with the other consumer offsets every
``flushConsumerOffsetInterval`` and at shutdown.

Put order of a commit: the real message first, the op second. A crash in between leaves the half
unresolved: it is checked again after the restart and, if the producer still says commit,
committed again (at-least-once, as RocketMQ); nothing is ever lost.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pocketmq.broker.processor.message_props import (
    java_half_properties,
    java_reput_properties,
    join_batch_properties,
    new_shape_cache,
    strip_property,
)
from pocketmq.broker.transaction.bookkeeping import (
    OP_TAG,
    OpenTransactions,
    OpNames,
    is_over,
    is_resolved,
    op_bodies,
    parse_op_body,
    transaction_offset,
)
from pocketmq.broker.transaction.ends import RecentEnds
from pocketmq.broker.transaction.half_props import Planned
from pocketmq.broker.transaction.recent import MAX_BODY, RecentHalves
from pocketmq.broker.transaction.records import (
    F_BODY_LEN,
    F_BORN_IP,
    F_BORN_PORT,
    F_BORN_TS,
    F_FLAG,
    F_PHYSICAL_OFFSET,
    F_QUEUE_OFFSET,
    F_RECONSUME,
    F_STORE_IP,
    F_STORE_PORT,
    F_SYS_FLAG,
    HalfMessage,
    op_records,
    read_half,
)
from pocketmq.broker.transaction.resolved import SEAL, ResolvedOffsets
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.remoting.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
    MessageDecodeError,
    get_property,
    properties_to_string,
)
from pocketmq.remoting.protocol.route import (
    CID_SYS_RMQ_TRANS,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    PermName,
)
from pocketmq.store import BrokerRole, FlushDiskType, GetMessageStatus, MessageInner, PutResult

if TYPE_CHECKING:
    from pocketmq.broker.offset_manager import ConsumerOffsetManager
    from pocketmq.broker.state import BrokerState
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.protocol.headers import EndTransactionRequestHeader
    from pocketmq.store import MessageStore

logger = logging.getLogger(__name__)

__all__ = ["TransactionCounters", "TransactionalMessageService", "edit_properties"]

#: records per store read of the op and half queues (the store's in-memory transfer limit)
READ_BATCH = 32
_OP_PROPERTIES = properties_to_string({MessageConst.TAGS: OP_TAG})
_TX_BITS = TRANSACTION_ROLLBACK_TYPE  # the two transaction-type bits of sysFlag (0xC)
_S = GetMessageStatus
#: store read statuses past which a reader moves on (to ``next_begin_offset``)
SKIP_STATUSES = frozenset(
    {_S.OFFSET_TOO_SMALL, _S.MESSAGE_WAS_REMOVING, _S.NO_MATCHED_MESSAGE, _S.OFFSET_FOUND_NULL}
)


def half_properties(stored: str, wait: str | None, topic: str, queue_id: int) -> str:
    """``java_half_properties``, through ``java_reput_properties``' cached reordering by shape.

    Java puts ``WAIT`` / ``REAL_TOPIC`` / ``REAL_QID`` into the map read from ``stored``; a put
    of a name already there keeps its place and takes the new value, which is what
    ``java_reput_properties`` does with a repeated name, so appending the three entries to the
    string and reordering it gives the same bytes (per prepare: a split, a cached shape and a
    join instead of a map, a hash sort and a join). An empty ``WAIT`` (which the string path
    would drop as Java's reader does) goes the map way.
    """
    if wait == "":
        return java_half_properties(stored, wait, topic, queue_id)
    tail = f"{_REAL_TOPIC_KEY}{topic}{PROPERTY_SEPARATOR}{_REAL_QID_KEY}{queue_id}"
    if wait is not None:
        tail = f"{_WAIT_KEY}{wait}{PROPERTY_SEPARATOR}{tail}"
    return java_reput_properties(join_batch_properties(stored, tail), _HALF_SHAPE)


_HALF_SHAPE = new_shape_cache()
_COMMIT_SHAPE = new_shape_cache()
_WAIT_KEY = MessageConst.WAIT + NAME_VALUE_SEPARATOR
_REAL_TOPIC_KEY = MessageConst.REAL_TOPIC + NAME_VALUE_SEPARATOR
_REAL_QID_KEY = MessageConst.REAL_QID + NAME_VALUE_SEPARATOR


def edit_properties(props: str, drop: tuple[str, ...], add: tuple[tuple[str, str], ...] = ()) -> str:
    """``props`` without the ``drop`` names, with the ``add`` entries appended (string work only:
    no dict of every property, as this runs for each half, commit and check copy)."""
    for name in drop:
        if name + NAME_VALUE_SEPARATOR in props:
            props, _ = strip_property(props, name)
    if add:
        tail = PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in add)
        props = join_batch_properties(props, tail)
    return props


_REAL = (MessageConst.REAL_TOPIC, MessageConst.REAL_QID)
_REAL_TOPIC, _REAL_QID, _PGROUP = MessageConst.REAL_TOPIC, MessageConst.REAL_QID, MessageConst.PGROUP
_HALF_TOPIC_BYTES = RMQ_SYS_TRANS_HALF_TOPIC.encode()
_OP_TOPIC = RMQ_SYS_TRANS_OP_HALF_TOPIC
_PREPARED = MessageConst.TRAN_PREPARED_QUEUE_OFFSET
_PREPARED_KEY = _PREPARED + NAME_VALUE_SEPARATOR
_PREPARED_KEY_BYTES = _PREPARED_KEY.encode()
#: a record's first field, its total size
_TOTAL = struct.Struct(">i")
#: resolved offsets ``done.far`` may hold beyond the open transactions before a pass over it
#: forgets them (:meth:`TransactionalMessageService.prune_step`)
_LEFT_BEHIND = 65_536


@dataclass(slots=True)
class TransactionCounters:
    """Counts since start (GET_BROKER_RUNTIME_INFO ``transaction*`` keys)."""

    prepared: int = 0
    committed: int = 0
    rolled_back: int = 0
    #: END_TRANSACTION refused because the transaction was already resolved
    already_resolved: int = 0
    #: CHECK_TRANSACTION_STATE requests written to a producer
    checks: int = 0
    #: due halves whose producer group had no live channel (counted as checked, as RocketMQ)
    checks_no_producer: int = 0
    #: halves moved to TRANS_CHECK_MAX_TIME_TOPIC
    discarded: int = 0
    #: halves older than the CommitLog retention, passed unchecked
    expired: int = 0
    #: op records read at start (from the op progress on: ``TransactionalMessageService.load``)
    loaded_ops: int = 0


@dataclass(eq=False, kw_only=True)
class TransactionalMessageService:
    """The broker's ``transactional_message_service`` (module docstring)."""

    store: MessageStore
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    state: BrokerState
    now_ms: Callable[[], int]
    #: half offsets named by op records (and by discards): resolved transactions, those still
    #: needed (:meth:`prune`)
    done: ResolvedOffsets = field(default_factory=ResolvedOffsets)
    #: op-queue offset (from ``op_progress`` on) → the half offset it names, or the offsets
    #: (a tuple) when not one: ints only in the common case, which the collector does not walk
    op_named: OpNames = field(default_factory=OpNames)
    #: the transactions of the copies at or past the half progress (:mod:`.bookkeeping`)
    open_txs: OpenTransactions = field(default_factory=OpenTransactions)
    counters: TransactionCounters = field(default_factory=TransactionCounters)

    def __post_init__(self) -> None:
        #: next op-queue offset to read into ``done``
        self.op_read = 0
        #: ``done`` holds no offset below this one that :func:`~.bookkeeping.keeps_resolved`
        #: lets go (:meth:`prune_step`)
        self.pruned_to = 0
        self._ready_topics: set[str] = set()
        #: halves stored since start, until END_TRANSACTION takes them (:mod:`.recent`)
        self.recent = RecentHalves()
        #: END_TRANSACTION of those halves, oneway ones stored at the end of their loop turn
        self.ends = RecentEnds(self)

    # ------------------------------------------------------------------------- progress
    @property
    def half_progress(self) -> int:
        return max(0, self.offsets.query_offset(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, 0))

    @half_progress.setter
    def half_progress(self, offset: int) -> None:
        self.offsets.commit_offset(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, 0, offset)

    @property
    def op_progress(self) -> int:
        return max(0, self.offsets.query_offset(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0))

    @op_progress.setter
    def op_progress(self, offset: int) -> None:
        self.offsets.commit_offset(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, offset)

    def load(self) -> None:
        """After store recovery: fit the progress to the queues, find the open transactions
        (:meth:`read_open`) and read the op records from the op progress on.

        A progress beyond its queue's end (the store was truncated by recovery or replaced) is
        moved back to the end; one below the first offset (deleted by retention) to the start.
        """
        store = self.store
        for topic in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC):
            low = store.get_min_offset_in_queue(topic, 0)
            high = store.get_max_offset_in_queue(topic, 0)
            stored = self.offsets.query_offset(CID_SYS_RMQ_TRANS, topic, 0)
            fitted = min(max(stored, low), high)
            if stored >= 0 and fitted != stored:
                logger.warning("%s progress %d outside [%d, %d]; using %d", topic, stored, low, high, fitted)
            if stored >= 0 or fitted > 0:
                self.offsets.commit_offset(CID_SYS_RMQ_TRANS, topic, 0, fitted)
        self.done.clear()
        self.op_named.clear()
        self.recent.clear()
        self.open_txs.clear()
        self.read_open()
        self.op_read = self.op_progress
        self.counters.loaded_ops = self.read_ops()
        self.prune()

    def read_open(self) -> int:
        """Add the copies from the half progress to the half queue's end to ``open_txs``; how
        many records were read. Bounded as the scan's backlog: the halves and copies stored
        since the progress, which stops only at a half younger than ``transactionTimeOut``
        (or at a put the store refused), so about ``transactionTimeOut`` plus one
        ``transactionCheckInterval`` of them in steady state."""
        add = self.open_txs.add
        count = 0
        for buf, offset in self._batches(RMQ_SYS_TRANS_HALF_TOPIC, self.half_progress):
            pos, end = 0, len(buf)
            while pos < end:
                total = _TOTAL.unpack_from(buf, pos)[0]
                if total <= 0:
                    logger.error("half queue: unreadable record before offset %d", offset)
                    break
                # only a record with the name in its bytes can be a copy (a first half, the
                # most, is passed without reading its properties)
                if buf.find(_PREPARED_KEY_BYTES, pos, pos + total) >= 0:
                    try:
                        half = read_half(buf, pos)
                    except MessageDecodeError:
                        logger.error("half queue: unreadable record before offset %d", offset)
                        break
                    add(half.queue_offset, half.tx_offset)
                pos += total
                count += 1
        return count

    def _batches(self, topic: str, offset: int) -> Iterator[tuple[bytes, int]]:
        """Queue 0 of ``topic`` from ``offset`` to its end: (records, the offset after them), in
        reads of ``READ_BATCH`` (empty records for a range retention removed); stops at a read
        the store cannot answer."""
        store = self.store
        high = store.get_max_offset_in_queue(topic, 0)
        while offset < high:
            result = store.get_message(CID_SYS_RMQ_TRANS, topic, 0, offset, READ_BATCH)
            if result.status is _S.FOUND:
                offset = max(offset + 1, result.next_begin_offset)
                yield result.body, offset
            elif result.status in SKIP_STATUSES and result.next_begin_offset > offset:
                offset = result.next_begin_offset
                yield b"", offset
            else:
                return

    def read_ops(self, limit: int | None = None) -> int:
        """Read op records from ``op_read`` towards the op queue's end into ``done``; how many.
        ``limit``: stop after the read that reaches it (the check run reads a minute of
        END_TRANSACTIONs in slices between which the loop serves requests); None: to the end.

        In place (:func:`~.records.op_records`): ~10 times cheaper than decoding each record,
        which held the loop for seconds at a busy broker's first check run."""
        offset = self.op_read
        keep_from = self.op_progress
        done, op_named = self.done, self.op_named
        cur, add = done.cur, done.cur.add
        # (op_named.put inline for the common case, the next offset of its list)
        names = op_named.names
        append = names.append
        count = 0
        for body, offset in self._batches(RMQ_SYS_TRANS_OP_HALF_TOPIC, self.op_read):
            try:
                records = op_records(body)
            except MessageDecodeError:
                logger.exception("op queue: unreadable records before offset %d", offset)
                records = []
            for queue_offset, op_body in records:
                named: int | tuple[int, ...]
                if op_body is None:
                    named = ()
                elif op_body.isdigit():  # (one offset, what RocketMQ 4.x writes: parse_op_body's)
                    named = int(op_body)
                    add(named)  # (ResolvedOffsets.add inline)
                    if len(cur) >= SEAL:
                        done.seal()
                        cur, add = done.cur, done.cur.add
                else:
                    named = tuple(parse_op_body(op_body))
                    done.update(named)
                    cur, add = done.cur, done.cur.add  # (a seal may have replaced it)
                if queue_offset >= keep_from:
                    if queue_offset - op_named.base == len(names) and names:
                        append(named)
                    else:
                        op_named.put(queue_offset, named)
            count += len(records)
            if limit is not None and count >= limit:
                break
        self.op_read = offset
        return count

    def ops_stored(self, first: int, named: list[int]) -> None:
        """Op records this process just stored at op-queue offsets ``first`` on, one naming each
        of ``named`` (already in ``done``): recorded as :meth:`read_ops` would record them, and
        passed by it when they follow what it read (``op_read``), so a check run does not read
        back what this process wrote (~2.3 µs of the loop per transaction). A gap (a record
        stored another way) leaves ``op_read`` there: the run reads from it, as before."""
        if first != self.op_read:
            return
        op_named = self.op_named
        names = op_named.names
        if first - op_named.base == len(names) and names:
            names.extend(named)
        else:
            for i, half in enumerate(named):
                op_named.put(first + i, half)
        self.op_read = first + len(named)

    def passed(self, half_progress: int) -> None:
        """The check scan moved the half progress to ``half_progress``: forget the copies it
        passed (``open_txs``) and the recent halves below it, whose END_TRANSACTION then reads
        the half back (:meth:`find_half`, which knows a transaction that is over without
        ``done``; the recent table is in prepare order, so only its oldest entries go); a
        transaction that is no longer open leaves ``done`` if :meth:`prune_step` passed it."""
        closed = self.open_txs.pass_below(half_progress)
        if closed:
            pruned_to, discard = self.pruned_to, self.done.discard
            for tx in closed:
                if tx < pruned_to:
                    discard(tx)
        table = self.recent
        entries = table.entries
        while entries:
            offset = next(iter(entries))
            recent = entries[offset]
            if recent[2] >= half_progress:
                break
            del entries[offset]
            table.bytes -= len(recent[0].body)

    def prune(self) -> None:
        """Forget the resolved offsets no longer needed (:func:`~.bookkeeping.keeps_resolved`)
        all at once: at load (before the port opens)."""
        half_progress, open_txs = self.half_progress, self.open_txs.counts
        self.done.prune_all(half_progress, open_txs)
        self.pruned_to = half_progress

    def prune_step(self, limit: int) -> bool:
        """Forget the resolved offsets from ``pruned_to`` up to the half progress, at most
        ``limit`` of them, but the open transactions (whose offsets :meth:`passed` forgets when
        they close); True when some are left for the next call.

        The check run's way: bounded work per slice (a discard per offset: a set's
        ``difference_update`` rebuilds its table once a quarter of it is deleted entries), and
        each of :class:`~.resolved.ResolvedOffsets`' sealed sets the pruning passed dropped,
        its open transactions moved to the small ``far`` set. Offsets added below ``pruned_to``
        afterwards (an END_TRANSACTION of an old copy of an open transaction) go with their
        sealed set, or, below them, stay in ``far`` until it holds ``_LEFT_BEHIND`` more than
        the open transactions: then one pass over ``far``.
        """
        half_progress = self.half_progress
        # (a progress moved back, by an admin's offset reset: the range is pruned again from it)
        start = min(self.pruned_to, half_progress)
        stop = min(half_progress, start + limit)
        done, open_txs = self.done, self.open_txs.counts
        if start < stop:
            done.forget(start, stop, open_txs)
            done.drop_below(stop, open_txs)
        self.pruned_to = stop
        if len(done.far) > len(open_txs) + _LEFT_BEHIND:
            done.prune_far(stop, open_txs)
        return stop < half_progress

    # --------------------------------------------------------------------------- topics
    def ensure_topic(self, topic: str) -> None:
        """Create a system topic's config (1 queue, read/write) on first use, as RocketMQ."""
        if topic not in self._ready_topics:
            self.topics.create_topic_in_send_message_back_method(
                topic, 1, PermName.PERM_READ | PermName.PERM_WRITE
            )
            self._ready_topics.add(topic)
            if topic == RMQ_SYS_TRANS_HALF_TOPIC:
                # the progress exists from the first half on: consumerProgress of
                # CID_RMQ_SYS_TRANS shows the pending backlog before the first check run
                for queue_topic in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC):
                    if self.offsets.query_offset(CID_SYS_RMQ_TRANS, queue_topic, 0) < 0:
                        self.offsets.commit_offset(CID_SYS_RMQ_TRANS, queue_topic, 0, 0)

    # -------------------------------------------------------------------------- prepare
    def prepare_message(
        self, inner: MessageInner, wait: bool = False, sent_wait: str | None = None
    ) -> PutResult | Awaitable[PutResult]:
        """Store ``inner`` as a half message; awaitable when ``wait`` and the flush policy waits.

        ``sent_wait``: the sender's raw ``WAIT`` value, which the half keeps (as Apache's does).
        """
        props = half_properties(inner.properties_string(), sent_wait, inner.topic, inner.queue_id)
        prepared = get_property(props, _PREPARED) if _PREPARED_KEY in props else None
        # an empty WAIT is the one half whose properties Java's commit re-encodes differently
        # (it drops the entry): those are read back (``commit``); see :mod:`.recent`
        planned = (props, get_property(props, _PGROUP), prepared, None, None)
        return self.put_half(inner, planned, wait, sent_wait != "")

    def put_half(
        self, inner: MessageInner, planned: Planned, wait: bool, keep: bool = True
    ) -> PutResult | Awaitable[PutResult]:
        """Store ``inner`` as a half message with ``planned``: its half properties and their
        ``PGROUP`` and ``TRAN_PREPARED_QUEUE_OFFSET`` (``half_props.sent_half_properties``, from
        the send processor, which builds them from the request's in one pass; the sender's
        ``TRAN_MSG`` and ``WAIT`` there are not read here); ``keep``: remember it (:mod:`.recent`)."""
        real_topic, real_queue_id = inner.topic, inner.queue_id
        inner.properties = planned[0]
        inner.sys_flag = (inner.sys_flag & ~_TX_BITS) | TRANSACTION_NOT_TYPE
        inner.topic = RMQ_SYS_TRANS_HALF_TOPIC
        inner.queue_id = 0
        return self.store_half(inner, planned, wait, real_topic, real_queue_id, keep)

    def store_half(
        self,
        inner: MessageInner,
        planned: Planned,
        wait: bool,
        real_topic: str,
        real_queue_id: int,
        keep: bool = True,
    ) -> PutResult | Awaitable[PutResult]:
        """:meth:`put_half` of ``inner`` already made the half (its topic, queue, sysFlag and
        properties those :meth:`put_half` sets; ``real_topic`` / ``real_queue_id``: the sent
        ones), as the send processor's half branch builds it (no fields rewritten)."""
        if RMQ_SYS_TRANS_HALF_TOPIC not in self._ready_topics:
            self.ensure_topic(RMQ_SYS_TRANS_HALF_TOPIC)
        self.counters.prepared += 1
        if wait:
            cfg = self.state.config.store
            if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH or cfg.broker_role is BrokerRole.SYNC_MASTER:
                return self.store.put_message_async(inner)
        result = self.store.put_message(inner)
        append = result.append
        if append is not None and keep:
            size = len(inner.body)
            if size <= MAX_BODY:
                qoff = append.logics_offset
                prepared = planned[2]  # (subscripts: no unpacking of the five into locals)
                recent = (
                    inner, planned[0], qoff, qoff if prepared is None else transaction_offset(qoff, prepared),
                    real_topic, real_queue_id, planned[1],
                )  # fmt: skip
                table = self.recent
                entries = table.entries
                held = table.bytes + size
                if held <= table.max_bytes and len(entries) < table.max_entries:  # inline of .add
                    entries[append.wrote_offset] = recent
                    table.bytes = held
                else:
                    table.add(append.wrote_offset, recent)
        return result

    # ---------------------------------------------------------------------- end (37)
    def find_half(self, header: EndTransactionRequestHeader) -> HalfMessage:
        """The half message END_TRANSACTION names, checked as RocketMQ's ``checkPrepareMessage``.

        Raises:
            RemoteSystemError: no record there, not a half message, another producer group,
                another queue offset, or the transaction is already resolved.
        """
        offset = header.commit_log_offset
        raw = self.store.get_message_bytes_by_offset(offset) if offset >= 0 else None
        half = None
        if raw is not None:
            try:
                half = read_half(raw)
            except MessageDecodeError:
                half = None
        if half is None:
            raise RemoteSystemError("Find prepared transaction message failed")
        f, buf = half.fields, half.buf
        # the topic compared as bytes: no decode for the common case
        p = half.body_at + f[F_BODY_LEN]
        if buf[p + 1 : p + 1 + buf[p]] != _HALF_TOPIC_BYTES:
            raise RemoteSystemError(
                f"the message at commit log offset {offset} is not a half message (topic {half.topic})"
            )
        if get_property(half.props_str, _PGROUP) != header.producer_group:
            raise RemoteSystemError("The producer group wrong")
        queue_offset = f[F_QUEUE_OFFSET]
        if queue_offset != header.tran_state_table_offset:
            raise RemoteSystemError("The transaction state table offset wrong")
        if f[F_PHYSICAL_OFFSET] != offset:
            raise RemoteSystemError("The commit log offset wrong")
        if (
            is_resolved(queue_offset, half.tx_offset, self.done)
            or is_resolved(queue_offset, half.tx_offset, self.ends.ending)
            or is_over(queue_offset, half.tx_offset, self.half_progress, self.open_txs)
        ):
            self.counters.already_resolved += 1
            raise RemoteSystemError(
                f"the transaction of half message {queue_offset} is already committed or rolled back"
            )
        return half

    def commit(self, half: HalfMessage) -> PutResult:
        """Put the real message; on success write the op record. The real message's put result."""
        # Apache's endMessageTransaction writes the half's whole map (TRAN_MSG, REAL_TOPIC,
        # REAL_QID and WAIT stay in the string) re-encoded in HashMap order; only its sysFlag
        # loses the prepared type
        props = java_reput_properties(half.props_str, _COMMIT_SHAPE)
        real_topic = get_property(props, _REAL_TOPIC)
        real_qid = get_property(props, _REAL_QID)
        if not real_topic or real_qid is None or not real_qid.isdigit():
            raise RemoteSystemError(
                f"half message {half.queue_offset} has no REAL_TOPIC/REAL_QID ({real_topic!r}, {real_qid!r})"
            )
        f = half.fields
        body_at = half.body_at
        copy = MessageInner(
            real_topic,
            half.buf[body_at : body_at + f[F_BODY_LEN]],
            int(real_qid),
            f[F_FLAG],
            props,
            (f[F_SYS_FLAG] & ~_TX_BITS) | TRANSACTION_COMMIT_TYPE,
            f[F_BORN_TS],
            (f[F_BORN_IP], f[F_BORN_PORT]),
            (f[F_STORE_IP], f[F_STORE_PORT]),
            f[F_RECONSUME],
            f[F_PHYSICAL_OFFSET],
        )
        return self.put_commit(copy, f[F_QUEUE_OFFSET], half.tx_offset)

    def put_commit(self, copy: MessageInner, half_offset: int, tx_offset: int) -> PutResult:
        """Store a committed copy and, once it is stored, its op record (one store call)."""
        if _OP_TOPIC not in self._ready_topics:
            self.ensure_topic(_OP_TOPIC)
        host = self.state.store_host
        # op_bodies' first body, built here: the one op record of nearly every commit
        op = MessageInner(
            _OP_TOPIC, str(half_offset).encode(), 0, 0, _OP_PROPERTIES, 0, self.now_ms(), host, host
        )
        result, op_result = self.store.put_message_pair(copy, op)
        if result.append is not None:
            self.counters.committed += 1
            self.resolved(half_offset, tx_offset)
            if op_result is not None and op_result.append is not None:
                self.ops_stored(op_result.append.logics_offset, [half_offset])
            # a later copy of the transaction: a second op names the first half (op_bodies)
            rest = self.op_records(half_offset, tx_offset)[1:] if tx_offset != half_offset else []
            self.put_ops(half_offset, rest, op_result)
        return result

    def rollback(self, half: HalfMessage) -> None:
        self.counters.rolled_back += 1
        self.write_op(half.queue_offset, half.tx_offset)

    def write_op(self, half_offset: int, tx_offset: int) -> bool:
        """Record that the transaction is resolved (in memory at once, and as op records)."""
        self.resolved(half_offset, tx_offset)
        return self.put_ops(half_offset, self.op_records(half_offset, tx_offset))

    def resolved(self, half_offset: int, tx_offset: int) -> None:
        done = self.done
        done.add(half_offset)
        done.add(tx_offset)

    def op_records(self, half_offset: int, tx_offset: int) -> list[MessageInner]:
        """The op records resolving the half at ``half_offset`` (:func:`~.bookkeeping.op_bodies`)."""
        if _OP_TOPIC not in self._ready_topics:
            self.ensure_topic(_OP_TOPIC)
        host = self.state.store_host
        now = self.now_ms()
        return [
            MessageInner(_OP_TOPIC, body, 0, 0, _OP_PROPERTIES, 0, now, host, host)
            for body in op_bodies(half_offset, tx_offset)
        ]

    def put_ops(self, half_offset: int, ops: list[MessageInner], first: PutResult | None = None) -> bool:
        """Store ``ops`` (``first``: the result of one stored before); whether all were stored."""
        if not ops and first is not None and first.append is not None:
            return True  # (a commit's one op record, stored: the common case)
        put = self.store.put_message
        stored = True
        results = [first] if first is not None else []
        for op in ops:
            result = put(op)
            if result.append is not None:  # (an op body is one offset: op_bodies)
                self.ops_stored(result.append.logics_offset, [int(op.body)])
            results.append(result)
        for result in results:
            if result.append is None:
                # resolved for this run of the broker; after a restart the half is checked again
                logger.error("op record for half %d not stored (%s)", half_offset, result.status.name)
                stored = False
        return stored

    # ----------------------------------------------------------------------- reporting
    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO keys of the transaction services."""
        c = self.counters
        half_max = self.store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        return {
            "transactionHalfOffset": f"{self.half_progress},{half_max}",
            "transactionOpOffset": f"{self.op_progress},{self.op_read}",
            "transactionPreparedCount": str(c.prepared),
            "transactionCommitCount": str(c.committed),
            "transactionRollbackCount": str(c.rolled_back),
            "transactionAlreadyResolvedCount": str(c.already_resolved),
            "transactionCheckCount": str(c.checks),
            "transactionCheckNoProducerCount": str(c.checks_no_producer),
            "transactionDiscardCount": str(c.discarded),
            "transactionExpiredCount": str(c.expired),
        }
