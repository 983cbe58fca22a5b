"""``ScheduleMessageService``: delivery of delayed messages (RocketMQ 4.x ``ScheduleMessageService``).

Write side (send path, CONSUMER_SEND_MSG_BACK): a message whose ``DELAY`` level is > 0 (clamped
to the highest level) is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` with
``REAL_TOPIC``/``REAL_QID`` (:func:`~pocketmq.broker.processor.message_props.apply_delay_level`);
the store gives its ConsumeQueue unit tagsCode = store time + the level's delay.

Delivery (this module):

* one :class:`Service` task on the event loop drives every level (no thread or timer per level);
  an idle level costs one max-offset comparison every 100 ms (``DELAY_FOR_A_WHILE``), a level
  whose next message is not due sleeps until exactly that message's time;
* per level, records are read in queue order from the level's offset in ``offset_table``; a
  record is due when ``now >= store time + delay(level)`` (a time more than one delay ahead -- the
  clock went back -- counts as now, as Java's ``correctDeliverTimestamp``). The delay is taken
  from the current ``messageDelayLevel``, so a restart with other delays applies them;
* a due record is re-put as a new message to ``REAL_TOPIC``/``REAL_QID``: body, flag, sysFlag,
  born timestamp and host, store host and reconsume times kept, and the properties string Java's
  ``messageTimeup`` stores (:func:`~pocketmq.broker.processor.message_props.java_reput_properties`:
  the record's properties in ``HashMap`` order, ``DELAY=<level>``, ``REAL_TOPIC`` and ``REAL_QID``
  still in it, so a consumer's ``getDelayTimeLevel()`` returns the level it was sent with; no
  ``WAIT``, the re-put never waits for a flush). The first record that is not due stops the level;
* a put the store refuses (disk full, shutting down, ...) is retried from the same record after
  10 s (``DELAY_FOR_A_PERIOD``); a record that can never be stored (illegal, no REAL_TOPIC, a
  transaction half topic) is skipped with an error log instead of blocking its level forever;
* at most ``level_budget`` messages per level per turn, then the loop yields, so a backlog of
  due messages never starves the broker's other work (or the other levels).

Progress (``config/delayOffset.json``, fastjson form with bare integer keys)::

    {"offsetTable":{1:17,3:0}}

is written every ``flushDelayOffsetInterval`` (10 s) when changed and when the service stops. A
restart resumes from the file: nothing is lost, and after a crash only the messages re-put since
the last write are put again (at-least-once); after a clean stop nothing is put twice.

The schedule queue is read through ``MessageStore.get_message`` (group ``SCHEDULE_CONSUMER``),
so the store's get counters include these reads, as a Java broker's
``enableScheduleMessageStats`` counts them as gets of that group.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pocketmq.broker.config_file import ConfigFileManager
from pocketmq.broker.processor.message_props import java_reput_properties
from pocketmq.remoting.common.service import Service
from pocketmq.remoting.protocol.bodies import DelayOffsetTable
from pocketmq.remoting.protocol.message import (
    HOST_FLAGS_MASK,
    PROPS_LEN,
    RECORD_PREFIX_STRUCTS,
    MessageConst,
    get_property,
)
from pocketmq.remoting.protocol.route import (
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    SCHEDULE_CONSUMER_GROUP,
)
from pocketmq.store import GetMessageStatus, MessageInner, PutMessageStatus, parse_delay_levels

logger = logging.getLogger(__name__)

__all__ = [
    "DELAY_FOR_A_PERIOD_MS",
    "DELAY_FOR_A_WHILE_MS",
    "FIRST_DELAY_MS",
    "DelayOffsetManager",
    "ScheduleMessageService",
]

#: Java ``FIRST_DELAY_TIME``: the first run after start.
FIRST_DELAY_MS = 1000
#: Java ``DELAY_FOR_A_WHILE``: idle poll of a level.
DELAY_FOR_A_WHILE_MS = 100
#: Java ``DELAY_FOR_A_PERIOD``: retry after the store refused a put.
DELAY_FOR_A_PERIOD_MS = 10_000
#: Records per store read (the store's in-memory transfer limit).
READ_BATCH = 32

_PUT_OK = PutMessageStatus.PUT_OK
_RECORD_V4 = RECORD_PREFIX_STRUCTS[0]
_UNPACK_V4 = _RECORD_V4.unpack_from
_PREFIX_V4 = _RECORD_V4.size
_UNPACK_PROPS_LEN = PROPS_LEN.unpack_from
# Statuses that can never succeed for this record: skip it rather than block the level.
_NEVER_OK = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})
_S = GetMessageStatus
_SKIP_STATUSES = frozenset(
    {_S.OFFSET_TOO_SMALL, _S.MESSAGE_WAS_REMOVING, _S.NO_MATCHED_MESSAGE, _S.OFFSET_FOUND_NULL}
)


class DelayOffsetManager(ConfigFileManager):
    """``config/delayOffset.json``: delay level → next offset to deliver in its schedule queue."""

    file_name = "delayOffset.json"

    def __init__(self, config_dir: str | None, *, fsync: bool = True) -> None:
        super().__init__(config_dir, fsync=fsync)
        self.offset_table: dict[int, int] = {}

    def encode(self) -> bytes:
        return DelayOffsetTable(dict(sorted(self.offset_table.items()))).encode()

    def decode(self, data: bytes) -> None:
        table = DelayOffsetTable.decode(data).offset_table
        self.offset_table = {int(k): max(0, int(v)) for k, v in table.items()}

    def replace_all(self, data: bytes) -> None:
        """Adopt a master's table (slave sync); raises ``BodyFormatError`` on a bad body."""
        self.decode(data)
        self.dirty = True


class ScheduleMessageService(Service):
    """Delivers due messages of ``SCHEDULE_TOPIC_XXXX`` to their real topics (module docstring).

    Args:
        store: the broker's :class:`~pocketmq.store.MessageStore` (public API only).
        config_dir: directory of ``delayOffset.json`` (None: in memory only).
        message_delay_level: RocketMQ's ``messageDelayLevel`` (``"1s 5s 10s ... 2h"``).
        now_ms: the store's wall clock.
        flush_interval_ms: ``flushDelayOffsetInterval``.
        stats: ``() -> BrokerStatsManager | None``; re-puts are counted as puts of the real topic.
    """

    def __init__(
        self,
        store: Any,
        config_dir: str | None,
        *,
        message_delay_level: str,
        now_ms: Callable[[], int],
        flush_interval_ms: int = 10_000,
        fsync: bool = True,
        stats: Callable[[], Any] | None = None,
        first_delay_ms: int = FIRST_DELAY_MS,
        level_budget: int = 1024,
    ) -> None:
        super().__init__(interval=0.0, initial_delay=first_delay_ms / 1000, name="schedule-message")
        self.store = store
        self.now_ms = now_ms
        #: delay in ms of level ``i + 1`` at index ``i``
        self.delay_levels_ms: list[int] = parse_delay_levels(message_delay_level)
        self.max_delay_level = len(self.delay_levels_ms)
        self.offsets = DelayOffsetManager(config_dir, fsync=fsync)
        self.flush_interval_ms = flush_interval_ms
        self.level_budget = max(1, level_budget)
        #: wait before retrying a put the store refused (Java ``DELAY_FOR_A_PERIOD``)
        self.retry_interval_ms = DELAY_FOR_A_PERIOD_MS
        self._stats = stats
        #: wall-clock ms at which each level runs next (index = level - 1)
        self._next_run = [0] * self.max_delay_level
        self._next_persist = 0
        #: messages re-put since start (bench and tests)
        self.delivered = 0

    # ------------------------------------------------------------------------------ table
    @property
    def offset_table(self) -> dict[int, int]:
        """Level → next schedule-queue offset to deliver (read by the admin processors)."""
        return self.offsets.offset_table

    def encode(self) -> bytes:
        """delayOffset.json content (GET_ALL_DELAY_OFFSET body)."""
        return self.offsets.encode()

    def load(self) -> bool:
        """Read delayOffset.json (or its .bak) and fit it to the loaded store; False on a first start.

        Call after the store's recovery and before sends are accepted: a level whose offset lies
        outside its schedule queue (the store was truncated by recovery, cleaned, or replaced) is
        moved to the queue's end (or start), so messages sent from now on are not skipped.

        Raises:
            PersistCorruptError: file and backup both unreadable.
        """
        found = self.offsets.load()
        store = self.store
        for level, offset in list(self.offsets.offset_table.items()):
            if not 1 <= level <= self.max_delay_level:
                continue
            low = store.get_min_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1)
            high = store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1)
            fitted = min(max(offset, low), high)
            if fitted != offset:
                logger.warning(
                    "delay level %d: offset %d outside the schedule queue [%d, %d]; using %d",
                    level, offset, low, high, fitted,
                )  # fmt: skip
                self._set_offset(level, fitted)
        return found

    def persist(self) -> None:
        self.offsets.persist()

    def delay_ms(self, level: int) -> int:
        return self.delay_levels_ms[min(max(level, 1), self.max_delay_level) - 1]

    # ------------------------------------------------------------------------------- loop
    def start(self) -> None:
        self._next_persist = self.now_ms() + self.flush_interval_ms
        super().start()

    async def run_once(self) -> None:
        now = self.now_ms()
        soonest = now + DELAY_FOR_A_WHILE_MS
        next_run = self._next_run
        delays = self.delay_levels_ms
        slack = max(self.retry_interval_ms, DELAY_FOR_A_WHILE_MS)
        for qid in range(self.max_delay_level):
            due = next_run[qid]
            # further ahead than anything we schedule: the wall clock went back, look again now
            if due <= now or due > now + max(delays[qid], slack):
                before = self.delivered
                due = next_run[qid] = self.deliver_level(qid + 1, self.now_ms())
                if self.delivered != before:
                    # bounded work done: let requests and the store's dispatch run in between
                    await asyncio.sleep(0)
                    if self.is_stopping:
                        return
            soonest = min(soonest, due)
        now = self.now_ms()
        if now >= self._next_persist:
            self._next_persist = now + self.flush_interval_ms
            if self.offsets.dirty:
                await self.offsets.persist_async()
        self.interval = max(0, soonest - self.now_ms()) / 1000

    async def on_shutdown(self) -> None:
        if self.offsets.dirty:
            loop = asyncio.get_running_loop()
            try:
                await loop.run_in_executor(None, self.offsets.persist)
            except OSError:
                logger.exception("could not write %s at shutdown", self.offsets.path)

    # --------------------------------------------------------------------------- delivery
    def _set_offset(self, level: int, offset: int) -> None:
        table = self.offsets.offset_table
        if table.get(level) != offset:
            table[level] = offset
            self.offsets.dirty = True

    def deliver_level(self, level: int, now: int) -> int:
        """Re-put the due messages of one level (at most ``level_budget``); the next run time."""
        qid = level - 1
        store = self.store
        offset = self.offsets.offset_table.get(level, 0)
        max_offset = store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, qid)
        if offset >= max_offset:
            if offset > max_offset:
                # the queue is shorter than our progress (store truncated by recovery, or
                # replaced): new delayed messages land from max_offset on
                logger.warning(
                    "delay level %d: offset %d beyond the schedule queue's max %d; corrected",
                    level, offset, max_offset,
                )  # fmt: skip
                self._set_offset(level, max_offset)
            return now + DELAY_FOR_A_WHILE_MS
        delay = self.delay_levels_ms[qid]
        budget = self.level_budget
        while budget > 0 and offset < max_offset:
            result = store.get_message(
                SCHEDULE_CONSUMER_GROUP, RMQ_SYS_SCHEDULE_TOPIC, qid, offset, READ_BATCH
            )
            status = result.status
            if status is _S.FOUND:
                buf = result.body
                pos, end = 0, len(buf)
                while pos < end:
                    fields = _UNPACK_V4(buf, pos)
                    body_at = pos + _PREFIX_V4
                    hosts = fields[7] & HOST_FLAGS_MASK
                    if hosts:  # an IPv6 born or store host: another prefix layout
                        prefix = RECORD_PREFIX_STRUCTS[hosts]
                        fields = prefix.unpack_from(buf, pos)
                        body_at = pos + prefix.size
                    total: int = fields[0]
                    queue_offset: int = fields[5]
                    deliver: int = fields[11] + delay
                    if deliver > now and deliver <= now + delay:
                        self._set_offset(level, queue_offset)
                        return deliver
                    outcome = self._reput(buf, pos, total, fields, body_at)
                    if outcome is None:
                        # refused by the store: retry this record later
                        self._set_offset(level, queue_offset)
                        return now + self.retry_interval_ms
                    offset = queue_offset + 1
                    budget -= 1
                    pos += total
                offset = max(offset, result.next_begin_offset)
            elif status in _SKIP_STATUSES and result.next_begin_offset > offset:
                offset = result.next_begin_offset
            else:
                break
            now = self.now_ms()
        self._set_offset(level, offset)
        return now if offset < max_offset else now + DELAY_FOR_A_WHILE_MS

    def _reput(self, buf: bytes, pos: int, total: int, f: tuple[Any, ...], body_at: int) -> bool | None:
        """Put the copy of one schedule record to its real queue.

        Returns True when stored, False when skipped for good, None when the store refused it
        (try again later).
        """
        body_len = f[16]
        p = body_at + body_len
        topic_len = buf[p]
        p += 1 + topic_len
        (props_len,) = _UNPACK_PROPS_LEN(buf, p)
        p += 2
        try:
            props = buf[p : p + props_len].decode()
        except UnicodeDecodeError:
            props = ""
        # Java messageTimeup: the record's map written back (DELAY, REAL_TOPIC, REAL_QID kept);
        # WAIT=false and the cleared DELAY live only in Java's map. The store treats the copy
        # as a normal message: its topic is not SCHEDULE_TOPIC_XXXX, so tagsCode is the TAGS
        # hash, and put_message never waits for a flush.
        props = java_reput_properties(props)  # each name once, with the value Java's map holds
        real_topic = get_property(props, MessageConst.REAL_TOPIC)
        real_qid = get_property(props, MessageConst.REAL_QID)
        queue_id = int(real_qid) if real_qid is not None and real_qid.isdigit() else -1
        if not real_topic or queue_id < 0 or real_topic == RMQ_SYS_TRANS_HALF_TOPIC:
            logger.error(
                "schedule record at %d (level %d, offset %d) has REAL_TOPIC=%r REAL_QID=%r; discarded",
                f[6], f[3] + 1, f[5], real_topic, real_qid,
            )  # fmt: skip
            return False
        inner = MessageInner(
            real_topic,
            buf[body_at : body_at + body_len],
            queue_id,
            f[4],  # flag
            props,
            f[7],  # sysFlag
            f[8],  # born timestamp
            (f[9], f[10]),  # born host
            (f[12], f[13]),  # store host
            f[14],  # reconsume times
        )
        result = self.store.put_message(inner)
        status = result.status
        if status is _PUT_OK or status.is_ok:
            self.delivered += 1
            if self._stats is not None:
                stats = self._stats()
                append = result.append
                if stats is not None and append is not None:
                    stats.on_put(real_topic, 1, append.wrote_bytes)
            return True
        if status in _NEVER_OK:
            logger.error(
                "delayed message at %d for %s:%d cannot be stored (%s); discarded",
                f[6], real_topic, queue_id, status.name,
            )  # fmt: skip
            return False
        logger.warning(
            "re-put of delayed message at %d to %s refused (%s); retrying in %d ms",
            f[6], real_topic, status.name, self.retry_interval_ms,
        )  # fmt: skip
        return None
