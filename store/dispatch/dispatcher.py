"""Record checking (``check_message``) and the reput dispatcher core (``Dispatcher``).

``check_message`` wraps ``records.validate_record`` (the one routine that decides whether bytes
at a CommitLog position are a valid record) and returns ``(size, request)``:

* ``size > 0`` and a ``DispatchRequest`` - a valid record of that size;
* ``size > 0`` and ``None``               - a BLANK: the rest of the segment is unused;
* ``END`` (0)                             - zeros: end of written data;
* ``INCOMPLETE``                          - a record cut at ``limit`` (HA data still arriving);
* ``CORRUPT``                             - anything else (bad magic, sizes, CRC, offset, UTF-8).

Records appended by this process skip all of that: ``CommitLog.appended`` hands reput their
dispatch fields, and ``dispatch.appended.reput_appended`` dispatches them without decoding anything.

``Dispatcher.do_reput`` runs synchronously on the loop: it decodes from ``reput_from_offset``
up to the CommitLog's written end, appends ConsumeQueue units, index entries, and notifies the
arriving listener. ``store/services/reput.py`` drives it when a put sets the wake-up event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from pocketmq.remoting.protocol.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    tags_hash,
)
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.dispatch.appended import RUN_MIN, Arriving, Carried, reput_appended, reput_one, reput_run
from pocketmq.store.dispatch.props_fields import (
    NO_PROPERTIES,
    LazyProperties,
    deliver_time,
    dispatch_fields,
    tags_code_of,
    wants_properties,
)
from pocketmq.store.index.file import IndexService
from pocketmq.store.listener import MessageArrivingListener
from pocketmq.store.log.commitlog import CommitLog
from pocketmq.store.log.layout import SCHEDULE_TOPIC
from pocketmq.store.log.records import CORRUPT, END, INCOMPLETE, Buf, validate_record
from pocketmq.store.queue.cq_table import ConsumeQueueTable

__all__ = [
    "CORRUPT",
    "END",
    "INCOMPLETE",
    "DispatchRequest",
    "Dispatcher",
    "check_message",
    "dispatch_fields",
    "make_request",
    "tags_code_of",
]

logger = logging.getLogger(__name__)

_TX_MASK = TRANSACTION_ROLLBACK_TYPE


@dataclass(slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    properties_str: str


def check_message(
    buf: Buf,
    pos: int,
    limit: int,
    phy: int,
    *,
    check_crc: bool,
    delay_levels: list[int],
) -> tuple[int, DispatchRequest | None]:
    """Validate the record at ``buf[pos]`` (CommitLog offset ``phy``); see the module docstring."""
    size, fields = validate_record(buf, pos, limit, phy, check_crc)
    if fields is None:
        return size, None
    topic, queue_id, queue_offset, sys_flag, store_ts, prepared, props = fields
    return size, make_request(
        topic, queue_id, phy, size, store_ts, queue_offset, sys_flag, prepared, props, delay_levels
    )


def make_request(
    topic: str,
    queue_id: int,
    phy: int,
    size: int,
    store_ts: int,
    queue_offset: int,
    sys_flag: int,
    prepared: int,
    props: str,
    delay_levels: list[int],
) -> DispatchRequest:
    """The dispatch view of a record: tagsCode, KEYS and UNIQ_KEY come from its properties."""
    keys = uniq = None
    tags_code = 0
    if props:
        tags, keys, uniq = dispatch_fields(props)
        if tags:
            tags_code = tags_hash(tags)
        if topic == SCHEDULE_TOPIC:
            tags_code = deliver_time(props, store_ts, delay_levels, tags_code)
    return DispatchRequest(
        topic, queue_id, phy, size, tags_code, store_ts, queue_offset, keys, uniq, sys_flag, prepared, props
    )


def is_dispatched_to_queue(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction records get no ConsumeQueue unit."""
    tx = sys_flag & _TX_MASK
    return tx not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def is_indexed(sys_flag: int) -> bool:
    return sys_flag & _TX_MASK != TRANSACTION_ROLLBACK_TYPE


class IndexChild(Protocol):
    """What the dispatcher reads of a running index process (``index.process.control.IndexProcess``)."""

    @property
    def indexed(self) -> int: ...

    @property
    def flushed_timestamp(self) -> int: ...


class Dispatcher:
    """Reput core: turns CommitLog records into ConsumeQueue units and index entries."""

    def __init__(
        self,
        commitlog: CommitLog,
        cq_table: ConsumeQueueTable,
        index: IndexService,
        config: MessageStoreConfig,
        listener: MessageArrivingListener | None = None,
    ) -> None:
        self.commitlog = commitlog
        self.cq_table = cq_table
        self.index = index
        self._listener: MessageArrivingListener | None = None
        #: what the fast path reads of the listener per slice (``dispatch.appended``): the
        #: listener, ``wants_properties`` of it and its ``held_queues`` view (live: read once)
        self.listener_view: Arriving = (None, True, None)
        self.listener = listener
        self.index_enable = config.message_index_enable
        self.delay_levels = config.delay_levels_ms
        self.reput_from_offset = 0
        #: store time of the last dispatched record (checkpoint logics/index timestamps)
        self.last_dispatched_timestamp = 0
        self.dispatched_total = 0
        #: index entries of fast-path slices not written yet (``dispatch.appended``): hashes,
        #: record offsets, store times; written by ``write_index_backlog``
        self.index_backlog: tuple[list[int], list[int], list[int]] | None = None
        #: store time of the last record dispatched while ``index_backlog`` waited: becomes
        #: ``last_dispatched_timestamp`` once the backlog is written
        self.backlog_timestamp = 0
        #: half message CommitLog offset -> its dispatch parse, until its committed copy is
        #: dispatched (``dispatch.appended``, "Committed copies"; at most ``CARRIED_MAX``)
        self.carried: dict[int, Carried] = {}
        #: the index process while it builds the index (then ``index_enable`` is off)
        self.index_child: IndexChild | None = None

    @property
    def listener(self) -> MessageArrivingListener | None:
        return self._listener

    @listener.setter
    def listener(self, listener: MessageArrivingListener | None) -> None:
        # (its facets read here once rather than per reput slice: a Python call and two
        # ``getattr`` with a default, ~0.5k instructions a send at one in flight)
        self._listener = listener
        self.listener_view = (listener, wants_properties(listener), getattr(listener, "held_queues", None))

    @property
    def behind(self) -> int:
        """Bytes written but not yet dispatched - or not yet indexed by the index process."""
        off = self.reput_from_offset
        child = self.index_child
        if child is not None:
            off = min(off, child.indexed)
        return max(0, self.commitlog.max_offset - off)

    def write_index_backlog(self) -> None:
        """Write the index entries reput's fast path collected (``dispatch.appended``).

        The fast path writes them once ``INDEX_RUN`` are pending (at one send in flight a
        slice is one record, and a write per slice cost ~3 us of the ~5.5 us indexing added
        per message); everything that reads the index or moves past it calls this first:
        the decoding path, queries, the ConsumeQueue/index flush, the index process's start,
        reput's stop. A write that raised leaves the backlog whole (records already indexed
        are skipped when it is written again).

        Raises:
            OSError: a new index file could not be created.
        """
        backlog = self.index_backlog
        if backlog is not None:
            self.index.put_hashes(*backlog)
            self.index_backlog = None
            self.index.write_headers()
            if self.backlog_timestamp:
                self.last_dispatched_timestamp = self.backlog_timestamp
                self.backlog_timestamp = 0

    def index_timestamp(self) -> int:
        """The checkpoint's indexMsgTimestamp once the index files are flushed: the last
        dispatched record's, or what the index process has flushed."""
        child = self.index_child
        return self.last_dispatched_timestamp if child is None else child.flushed_timestamp

    def dispatch(self, req: DispatchRequest, *, notify: bool = True) -> None:
        """One record to its ConsumeQueue and the index. Raises OSError if a file cannot be made."""
        sys_flag = req.sys_flag
        tx = sys_flag & _TX_MASK
        queued = tx not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
        if queued:
            cq = self.cq_table.find_or_create(req.topic, req.queue_id)
            cq.put(
                req.commit_log_offset,
                req.msg_size,
                req.tags_code,
                req.consume_queue_offset,
                req.store_timestamp,
            )
        if self.index_enable and tx != TRANSACTION_ROLLBACK_TYPE and (req.uniq_key or req.keys):
            self.index.build_index(
                req.topic, req.commit_log_offset, req.store_timestamp, req.uniq_key, req.keys
            )
        self.last_dispatched_timestamp = req.store_timestamp
        listener, lazy, _ = self.listener_view
        if notify and queued and listener is not None:
            listener.arriving(
                req.topic, req.queue_id, req.consume_queue_offset + 1, req.tags_code, req.store_timestamp,
                None, LazyProperties(req.properties_str) if lazy else NO_PROPERTIES,
            )  # fmt: skip

    def do_reput(self, budget: int = 1 << 62) -> int:
        """Dispatch up to ``budget`` records that are written but not yet dispatched.

        Records appended by this process come with their dispatch fields (``CommitLog.appended``)
        and skip decoding; anything else (HA data, records after a restart, BLANKs) is decoded
        by ``check_message``. Stops early at a record cut short (HA data still arriving). A
        corrupt record stops dispatch (logged) rather than being skipped: nothing failing
        checks is ever served. Raises OSError (e.g. ENOSPC creating a ConsumeQueue file); the
        record is then retried by the next call.
        """
        # (a call per send at one in flight: only what the fast path needs is read up front;
        # the written end read inline, not the CommitLog's property, which 3.11 does not specialize)
        mfq = self.commitlog.mfq
        pending = self.commitlog.appended
        # one new record of the common shape (one send in flight: a call per send): no loop,
        # and done once the written end is reached (``reput_one``; anything else: the loop)
        if len(pending) == 1 and budget > 0 and reput_one(self, pending):
            files = mfq.files
            if self.reput_from_offset == files[-1].file_from_offset + files[-1].wrote_position:
                self.dispatched_total += 1
                return 1
            n = 1
        # a slice of single sends of the common shape (128 in flight: ~32 a read) at once
        elif RUN_MIN <= len(pending) <= budget and (n := reput_run(self, pending)):
            files = mfq.files
            if self.reput_from_offset == files[-1].file_from_offset + files[-1].wrote_position:
                self.dispatched_total += n
                return n
        else:
            n = 0
        decoded = False
        try:
            while n < budget:
                off = self.reput_from_offset
                if pending and pending[0][0] <= off:
                    got = reput_appended(self, budget - n)
                    if got:
                        n += got
                        continue
                files = mfq.files  # (inline of ``mfq.max_offset()``: its call was per send)
                if not files or off >= files[-1].file_from_offset + files[-1].wrote_position:
                    break
                # the decoding path (the fast path writes index headers with its backlog)
                decoded = True
                delay_levels = self.delay_levels
                dispatch = self.dispatch
                if self.index_backlog is not None:
                    # the decoding path indexes each record as it goes: earlier records first
                    self.write_index_backlog()
                mf = mfq.find_by_offset(off)
                if mf is None:
                    if off < mfq.min_offset():
                        self.reput_from_offset = mfq.min_offset()
                        continue
                    break
                base = mf.file_from_offset
                pos = off - base
                limit = mf.wrote_position
                mm = mf.mm
                while pos < limit and n < budget:
                    if pending and pending[0][0] == base + pos:
                        break  # back on the fast path
                    size, req = check_message(
                        mm, pos, limit, base + pos, check_crc=False, delay_levels=delay_levels
                    )
                    if req is not None:
                        dispatch(req)
                        pos += size
                        n += 1
                        self.reput_from_offset = base + pos
                    elif size > 0:
                        pos += size
                        self.reput_from_offset = base + pos
                    else:
                        # fewer than 8 written bytes that read as zeros are the start of a record
                        # an HA transfer cut inside its TOTALSIZE (a 1 KiB record's first bytes
                        # are 0): the rest is coming, as for INCOMPLETE
                        if size != INCOMPLETE and not (size == END and pos < limit):
                            logger.error("reput stopped at %d: invalid record (code %d)", base + pos, size)
                        return n
                else:
                    if pos < mf.file_size:
                        break
        finally:
            self.dispatched_total += n
            if decoded:
                self.index.write_headers()
        return n
