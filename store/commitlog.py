"""``CommitLog``: appends records (remoting.protocol.message layout) to 20-digit-named segments.

Single writer (the event loop thread), so there is no put lock. A record that does not fit in
the rest of a segment (record + 8 bytes) leaves a BLANK (remaining size + BLANK_MAGIC_CODE) and
goes to the start of the next segment; a batch always lands in one segment. Queue offsets are
assigned here from ``topic_queue_table`` (rebuilt from the ConsumeQueues on recovery); prepared
and rolled-back transaction records get queue offset 0 and do not advance the counter.
"""

from __future__ import annotations

import logging
import zlib
from collections import deque
from collections.abc import Callable, Sequence

from pocketmq.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    HOST_FLAGS_MASK,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PROPS_LEN,
    RECORD_PREFIX_STRUCTS,
    SIZE_MAGIC,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    host_flags,
    properties_to_string,
)
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.mapped_file_queue import Allocator, MappedFileQueue
from pocketmq.store.message_inner import MessageInner
from pocketmq.store.results import AppendMessageStatus, AppendResult, PutMessageStatus, PutResult

logger = logging.getLogger(__name__)

_TX_MASK = TRANSACTION_ROLLBACK_TYPE  # 0xC

#: (phy offset, size, topic, queue id, queue offset, store time, sys flag, prepared offset, properties)
AppendedRecord = tuple[int, int, str, int, int, int, int, int, str]
_APPENDED_MAX = 200_000

# One shared result per failure status: they carry no per-message data.
_FAIL = {s: PutResult(s) for s in PutMessageStatus}


class CommitLog:
    def __init__(
        self,
        config: MessageStoreConfig,
        clock: Callable[[], int],
        *,
        allocator: Allocator | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.file_size = config.mapped_file_size_commit_log
        self.mfq = MappedFileQueue(config.commit_log_dir, self.file_size, allocator=allocator)
        #: (topic, queue_id) -> next queue offset
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self._topic_heads: dict[str, bytes] = {}
        self.max_body = config.max_message_size
        #: set after a failed segment creation (ENOSPC ...), cleared by the next success
        self.create_failed = False
        self.put_times_total = 0
        self.put_size_total = 0
        #: dispatch fields of records appended by this process, consumed by reput (saves
        #: decoding them again); bounded: when reput falls far behind it decodes instead
        self.appended: deque[AppendedRecord] = deque()

    # ---------------------------------------------------------------- append

    def _topic_head(self, topic: str) -> bytes | None:
        head = self._topic_heads.get(topic)
        if head is None:
            raw = topic.encode()
            if not raw or len(raw) > MAX_TOPIC_LENGTH:
                return None
            head = bytes((len(raw),)) + raw
            if len(self._topic_heads) > 100_000:
                self._topic_heads.clear()
            self._topic_heads[topic] = head
        return head

    def _segment_for(self, size: int) -> MappedFile | None:
        """The segment with room for ``size`` bytes + a blank, rolling (BLANK) if needed."""
        mf = self.mfq.last
        if mf is not None and mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH <= mf.file_size:
            return mf
        if mf is not None and not mf.is_full:
            remaining = mf.file_size - mf.wrote_position
            SIZE_MAGIC.pack_into(mf.mm, mf.wrote_position, remaining, BLANK_MAGIC_CODE)
            mf.wrote_position = mf.file_size
        try:
            mf = self.mfq.last_for_append()
        except OSError as exc:
            if not self.create_failed:
                logger.error("cannot create CommitLog segment in %s: %s", self.mfq.dir, exc)
            self.create_failed = True
            return None
        self.create_failed = False
        return mf

    def put_message(self, msg: MessageInner) -> PutResult:
        """Append one message (synchronous; the flush policy wait is the caller's business)."""
        head = self._topic_head(msg.topic)
        if head is None:
            return _FAIL[PutMessageStatus.MESSAGE_ILLEGAL]
        props = msg.properties
        if not isinstance(props, str):
            props = properties_to_string(props)
        props_b = props.encode()
        plen = len(props_b)
        if plen > MAX_PROPERTIES_LENGTH:
            return _FAIL[PutMessageStatus.PROPERTIES_SIZE_EXCEEDED]
        body = msg.body
        blen = len(body)
        if blen > self.max_body:
            return _FAIL[PutMessageStatus.MESSAGE_ILLEGAL]
        born_ip, born_port = msg.born_host
        store_ip, store_port = msg.store_host
        sys_flag = msg.sys_flag
        if len(born_ip) == 4 and len(store_ip) == 4:
            sys_flag &= ~HOST_FLAGS_MASK
        else:
            sys_flag = (sys_flag & ~HOST_FLAGS_MASK) | host_flags(born_ip, store_ip)
        prefix = RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK]
        size = prefix.size + blen + len(head) + 2 + plen
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return _FAIL[PutMessageStatus.MESSAGE_ILLEGAL]
        mf = self._segment_for(size)
        if mf is None:
            return _FAIL[PutMessageStatus.CREATE_MAPEDFILE_FAILED]

        key = (msg.topic, msg.queue_id)
        tx = sys_flag & _TX_MASK
        counted = tx not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
        qoff = self.topic_queue_table.get(key, 0) if counted else 0
        pos = mf.wrote_position
        phy = mf.file_from_offset + pos
        now = self.clock()
        mm = mf.mm
        prefix.pack_into(
            mm, pos, size, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, msg.queue_id, msg.flag,
            qoff, phy, sys_flag, msg.born_timestamp, born_ip, born_port, now, store_ip, store_port,
            msg.reconsume_times, msg.prepared_transaction_offset, blen,
        )  # fmt: skip
        p = pos + prefix.size
        mm[p : p + blen] = body
        p += blen
        mm[p : p + len(head)] = head
        p += len(head)
        PROPS_LEN.pack_into(mm, p, plen)
        mm[p + 2 : p + 2 + plen] = props_b
        mf.wrote_position = pos + size
        mf.last_store_timestamp = now
        if counted:
            self.topic_queue_table[key] = qoff + 1
        appended = self.appended
        if len(appended) >= _APPENDED_MAX:
            appended.clear()
        appended.append(
            (phy, size, msg.topic, msg.queue_id, qoff, now, sys_flag, msg.prepared_transaction_offset, props)
        )
        self.put_times_total += 1
        self.put_size_total += size
        return PutResult(
            PutMessageStatus.PUT_OK,
            AppendResult(AppendMessageStatus.PUT_OK, phy, size, now, qoff, 1, msg.store_host),
        )

    def put_messages(self, msgs: Sequence[MessageInner]) -> PutResult:
        """Append a batch that shares topic and queue; all records land in one segment."""
        if not msgs:
            return _FAIL[PutMessageStatus.MESSAGE_ILLEGAL]
        first = msgs[0]
        head = self._topic_head(first.topic)
        if head is None:
            return _FAIL[PutMessageStatus.MESSAGE_ILLEGAL]
        encoded: list[tuple[MessageInner, str, bytes, int, int]] = []
        total = 0
        for m in msgs:
            if m.topic != first.topic or m.queue_id != first.queue_id:
                return _FAIL[PutMessageStatus.MESSAGE_ILLEGAL]
            props = m.properties
            if not isinstance(props, str):
                props = properties_to_string(props)
            props_b = props.encode()
            if len(props_b) > MAX_PROPERTIES_LENGTH:
                return _FAIL[PutMessageStatus.PROPERTIES_SIZE_EXCEEDED]
            if len(m.body) > self.max_body:
                return _FAIL[PutMessageStatus.MESSAGE_ILLEGAL]
            sys_flag = (m.sys_flag & ~HOST_FLAGS_MASK) | host_flags(m.born_host[0], m.store_host[0])
            size = RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK].size + len(m.body) + len(head) + 2
            size += len(props_b)
            encoded.append((m, props, props_b, sys_flag, size))
            total += size
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return _FAIL[PutMessageStatus.MESSAGE_ILLEGAL]
        mf = self._segment_for(total)
        if mf is None:
            return _FAIL[PutMessageStatus.CREATE_MAPEDFILE_FAILED]
        key = (first.topic, first.queue_id)
        base_qoff = self.topic_queue_table.get(key, 0)
        qoff = base_qoff
        mm = mf.mm
        now = self.clock()
        start_pos = pos = mf.wrote_position
        offsets: list[int] = []
        appended = self.appended
        if len(appended) + len(encoded) >= _APPENDED_MAX:
            appended.clear()
        for m, props, props_b, sys_flag, size in encoded:
            phy = mf.file_from_offset + pos
            offsets.append(phy)
            prefix = RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK]
            body = m.body
            blen = len(body)
            prefix.pack_into(
                mm, pos, size, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, m.queue_id, m.flag,
                qoff, phy, sys_flag, m.born_timestamp, m.born_host[0], m.born_host[1], now,
                m.store_host[0], m.store_host[1], m.reconsume_times, m.prepared_transaction_offset, blen,
            )  # fmt: skip
            p = pos + prefix.size
            mm[p : p + blen] = body
            p += blen
            mm[p : p + len(head)] = head
            p += len(head)
            PROPS_LEN.pack_into(mm, p, len(props_b))
            mm[p + 2 : p + 2 + len(props_b)] = props_b
            appended.append(
                (
                    phy,
                    size,
                    first.topic,
                    first.queue_id,
                    qoff,
                    now,
                    sys_flag,
                    m.prepared_transaction_offset,
                    props,
                )
            )
            pos += size
            qoff += 1
        mf.wrote_position = pos
        mf.last_store_timestamp = now
        self.topic_queue_table[key] = qoff
        self.put_times_total += len(msgs)
        self.put_size_total += total
        result = AppendResult(
            AppendMessageStatus.PUT_OK,
            mf.file_from_offset + start_pos,
            total,
            now,
            base_qoff,
            len(msgs),
            first.store_host,
            offsets,
        )
        return PutResult(PutMessageStatus.PUT_OK, result)

    def append_data(self, start_offset: int, data: bytes | memoryview) -> bool:
        """HA seam: write replicated bytes at ``start_offset`` (must equal ``max_offset``).

        The bytes are a verbatim copy of the master's CommitLog, BLANKs included, so file
        boundaries line up; records may be cut anywhere (reput waits for the rest).

        Raises:
            OSError: a segment could not be created.
        """
        if start_offset != self.max_offset:
            return False
        view = memoryview(data)
        off = start_offset
        while view:
            mf = self.mfq.last
            if mf is None or mf.is_full:
                mf = self.mfq.last_for_append(off)
            pos = off - mf.file_from_offset
            n = min(len(view), mf.file_size - pos)
            mf.mm[pos : pos + n] = view[:n]
            mf.wrote_position = pos + n
            view = view[n:]
            off += n
        return True

    # ---------------------------------------------------------------- read

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset()

    @property
    def min_offset(self) -> int:
        return self.mfq.min_offset()

    def get_message(self, offset: int, size: int) -> bytes | None:
        """Copy of ``size`` bytes at ``offset``; None if deleted or not written."""
        mf = self.mfq.find_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position or size <= 0:
            return None
        return mf.mm[pos : pos + size]

    def get_data(self, offset: int, max_size: int) -> bytes | None:
        """Raw bytes from ``offset`` to the end of written data in its segment (HA, tools)."""
        mf = self.mfq.find_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        end = min(mf.wrote_position, pos + max_size)
        if pos >= end:
            return None
        return mf.mm[pos:end]

    def pickup_store_timestamp(self, offset: int) -> int:
        """STORETIMESTAMP of the record at ``offset``; -1 if unavailable."""
        mf = self.mfq.find_by_offset(offset)
        if mf is None:
            return -1
        pos = offset - mf.file_from_offset
        if pos + 72 > mf.wrote_position:
            return -1
        sys_flag = int.from_bytes(mf.mm[pos + 36 : pos + 40], "big")
        ts_pos = pos + (68 if sys_flag & 0x10 else 56)
        return int.from_bytes(mf.mm[ts_pos : ts_pos + 8], "big", signed=True)

    def rebuild_topic_queue_table(self, table: dict[tuple[str, int], int]) -> None:
        self.topic_queue_table = dict(table)
