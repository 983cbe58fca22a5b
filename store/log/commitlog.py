"""``CommitLog``: appends records (remoting.protocol.message layout) to 20-digit-named segments.

Single writer (the event loop thread), so there is no put lock. A record that does not fit in
the rest of a segment (record + 8 bytes) leaves a BLANK (remaining size + BLANK_MAGIC_CODE) and
goes to the start of the next segment; a batch always lands in one segment. Queue offsets are
assigned here from ``topic_queue_table`` (rebuilt from the ConsumeQueues on recovery); prepared
and rolled-back transaction records get queue offset 0 and do not advance the counter.

Every put also queues its dispatch fields in ``appended`` (one entry per single put, one per
batch put), so reput (``dispatch.appended``) dispatches this process's records without decoding them.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from itertools import accumulate
from os import pwritev as _pwritev
from struct import Struct
from time import time_ns as _time_ns

from pocketmq.remoting.common.clock import SystemClock
from pocketmq.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
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
    HostAddress,
    host_flags,
    properties_to_string,
)
from pocketmq.store.clock import now_ms
from pocketmq.store.config import FlushDiskType, MessageStoreConfig
from pocketmq.store.log import put_hooks
from pocketmq.store.log.batch_encode import (
    ILLEGAL,
    PROPS_LENS,
    BatchItem,
    BatchPut,
    Encoded,
    HalfCopy,
    encode_bodies,
    encode_copies,
    encode_items,
)
from pocketmq.store.log.crc import FAST_CRC_MIN as _LONG
from pocketmq.store.log.crc import crc32_long, crc32_short
from pocketmq.store.log.layout import (
    PUT_PREFIX_STRUCTS,
    STORE_STAMP,
    STORE_TAIL_STRUCTS,
    STORE_TIMESTAMP_AT,
    SYSFLAG_AT,
    PutShape,
)
from pocketmq.store.log.layout import PUT_SHAPES as _SHAPES
from pocketmq.store.log.layout import put_shape as _put_shape
from pocketmq.store.log.mapped_file import MappedFile
from pocketmq.store.log.mapped_file_queue import Allocator, MappedFileQueue
from pocketmq.store.log.message_batch import encode_messages
from pocketmq.store.log.put_hooks import EVERY_PUT, NO_SERVICES, Gate, LatencySink, WakeGate, no_wakeup
from pocketmq.store.log.replica import append_replicated
from pocketmq.store.log.syscalls import disk_usage_ratio, short_write
from pocketmq.store.message_inner import MessageInner
from pocketmq.store.results import AppendResult, PutMessageStatus, PutResult

logger = logging.getLogger(__name__)

# (the put hooks re-exported: the store's facade imports them from here)
__all__ = [
    "EVERY_PUT",
    "NO_SERVICES",
    "AppendedRecord",
    "BatchFields",
    "CommitLog",
    "Gate",
    "LatencySink",
    "WakeGate",
    "no_wakeup",
]

_TX_MASK = TRANSACTION_ROLLBACK_TYPE  # 0xC
#: transaction types that get queue offset 0 and no ConsumeQueue unit
_UNCOUNTED = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)

#: sizes and properties of the records of a batch put (in order)
BatchFields = tuple[list[int], list[str]]
#: (phy offset, size, topic, queue id, queue offset, store time, sys flag, prepared offset,
#: properties, None) for one record; for a batch put, size is the batch's total size, queue
#: offset the first record's, properties "" and the last field the records' ``BatchFields``
AppendedRecord = tuple[int, int, str, int, int, int, int, int, str, BatchFields | None]
_APPENDED_MAX = 200_000
#: nor entries further than this behind the newest (batch entries, see ``put_messages``)
_APPENDED_MAX_BYTES = 256 << 20

# One shared result per failure status: they carry no per-message data.
_FAIL = {s: PutResult(s) for s in PutMessageStatus}
_FAIL_ILLEGAL = _FAIL[PutMessageStatus.MESSAGE_ILLEGAL]
_FAIL_PROPS = _FAIL[PutMessageStatus.PROPERTIES_SIZE_EXCEEDED]
_FAIL_CREATE = _FAIL[PutMessageStatus.CREATE_MAPEDFILE_FAILED]
_FAIL_DISK_FULL = _FAIL[PutMessageStatus.SERVICE_NOT_AVAILABLE]
_PUT_OK = PutMessageStatus.PUT_OK
_PREFIX_V4 = RECORD_PREFIX_STRUCTS[0]
_PUT_PREFIX_V4 = PUT_PREFIX_STRUCTS[0]  # (put_message's: the store tail as one part)
_NOT_HOST_FLAGS = ~HOST_FLAGS_MASK  # (a constant: the put's ``~`` made a new int each time)


def _v4_flags(sys_flag: int) -> tuple[int, bool]:
    """``sys_flag`` without the host bits, and whether its record gets a queue offset."""
    tx = sys_flag & _TX_MASK
    return sys_flag & _NOT_HOST_FLAGS, not tx or tx not in _UNCOUNTED


#: ``_v4_flags`` of 0-255 (put_message: a tuple subscript, not two ``&``: 3.11 specializes no ``&``)
_V4_FLAGS = tuple(_v4_flags(f) for f in range(256))
_PREFIX_SIZE = _PREFIX_V4.size
_crc32 = crc32_short
_crc32_long = crc32_long
_pack_props_len = PROPS_LEN.pack
_pack_stamp = STORE_STAMP.pack
_pack_stamped_v4 = Struct(f">{STORE_STAMP.format[1:]}{STORE_TAIL_STRUCTS[4].size}s").pack
#: ``CommitLog._stamp`` of no millisecond (no ``time_ns`` reading is within it)
_NO_STAMP = (-(1 << 62), 0, b"")
_shape_of = _SHAPES.get


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
        #: the default clock is inlined on the put path (a Python call per message saved); the
        #: broker's (its SystemClock's now_ms, the same reading) is recognised too
        self._system_clock = clock is now_ms or getattr(clock, "__func__", None) is SystemClock.now_ms
        self.file_size = config.mapped_file_size_commit_log
        self.mfq = MappedFileQueue(config.commit_log_dir, self.file_size, allocator=allocator)
        # warmMapedFileEnable: whole segments get their blocks at creation; else sparse
        self.mfq.preallocate = config.warm_maped_file_enable
        #: SYNC_FLUSH: records go in with ``pwrite`` to the segment's fd, not through the
        #: mapping (read through it still: one page cache). A mapped write faults once per page
        #: and again after every fsync (writeback write-protects the page), and each fsync
        #: must write-protect the mapped dirty pages (TLB shootdowns): measured at 128 sends in
        #: flight, 0.31 -> 0.006 page faults per message, broker 30-35 -> 28-31 us and fsync
        #: helper 5.7-8.1 -> 3.9-4.8 us CPU per message. ASYNC_FLUSH keeps the mapping: its
        #: faults are rare (large folios, a flush every 500 ms) and a syscall per put is not.
        self.write_through = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        #: called when the disk is full (ENOSPC reserving blocks, or past
        #: ``diskSpaceWarningLevelRatio`` at an allocation step): the store refuses puts (14)
        #: until its cleaner sees space again
        self.on_disk_full: Callable[[str], None] | None = None
        #: (topic, queue_id) -> next queue offset
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self._topic_heads: dict[str, bytes] = {}
        #: topic -> its IPv4 record's size less body and properties (put_message: no len, 2 adds)
        self._topic_fixed: dict[str, int] = {}
        #: the last IPv4 store host a put saw and its store tail (``_store_tail``)
        self._tail_host: HostAddress | None = None
        self._tail = b""
        #: the millisecond (system clock only) whose STORETIMESTAMP + ``_tail`` bytes a put
        #: packs: (its first ``time_ns`` reading, its ms, those bytes). One attribute: from its
        #: 30th an instance's attributes are no longer shared keys and every ``self.`` read of
        #: put_message slows (+680 instructions a put, callgrind)
        self._stamp = _NO_STAMP
        #: the last put's record shape (body and properties lengths, topic head, prefix Struct),
        #: its record packer (``layout.put_shape``; None: none made yet, or a shape past
        #: ``layout.PUT_SHAPES_MAX``) and
        #: whether that was looked for: the next put of the shape packs by it without a lookup
        self._shape_blen = self._shape_plen = -1
        self._shape_head = b""
        self._shape_prefix: Struct | None = None
        self._shape_rec: PutShape | None = None
        self._shape_tried = True
        #: topic -> queue id -> its ``topic_queue_table`` key, the tuple the table holds: a put's
        #: lookups match it by identity, not by building and comparing a tuple (any equal key
        #: stays valid: a rebuilt table or a deleted entry only costs the compares again)
        self._queue_keys: dict[str, dict[int, tuple[str, int]]] = {}
        self.max_body = config.max_message_size
        #: set after a failed segment creation (ENOSPC ...), cleared by the next success
        self.create_failed = False
        self.put_times_total = 0
        self.put_size_total = 0
        #: dispatch fields of records appended by this process, consumed by reput (saves
        #: decoding them again); bounded: when reput falls far behind it decodes instead
        self.appended: deque[AppendedRecord] = deque(maxlen=_APPENDED_MAX)
        #: None, or where ``put_message`` adds the time each call took (the broker's put-latency
        #: histogram, ``broker.metrics.PutLatency``): timed here, from the clock read the put
        #: makes for its store time, instead of by a wrapper around the store's method (a call
        #: level and a clock read fewer: ~3k instructions per send, callgrind)
        self.latency: LatencySink | None = None
        #: the store's hooks (``MessageStore``): ``after_put`` after each stored put (its reput
        #: wake-up) unless ``wake_gate.scheduled``, ``on_failed`` after each failed put
        #: (``putMessageFailedTimes``)
        self.after_put: Callable[[], None] = no_wakeup
        self.wake_gate: WakeGate = NO_SERVICES
        self.on_failed: Callable[[], None] = no_wakeup

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
                self._topic_fixed.clear()
            self._topic_heads[topic] = head
        self._topic_fixed[topic] = _PREFIX_SIZE + len(head) + 2
        return head

    def _segment_for(self, size: int) -> MappedFile | PutResult:
        """The segment with room for ``size`` bytes + a blank, rolling (BLANK) if needed, with
        disk blocks reserved for them (``MappedFile.ensure``); a failed put if no segment can
        hold that much, the next one cannot be created, or the disk is full (14)."""
        need = size + END_FILE_MIN_BLANK_LENGTH
        if need > self.file_size:
            return _FAIL_ILLEGAL
        mf = self.mfq.last
        if mf is not None and mf.wrote_position + need > mf.file_size and not mf.is_full:
            pos = mf.wrote_position
            if not self._reserve(mf, pos + END_FILE_MIN_BLANK_LENGTH):
                return _FAIL_DISK_FULL
            SIZE_MAGIC.pack_into(mf.mm, pos, mf.file_size - pos, BLANK_MAGIC_CODE)
            mf.wrote_position = mf.file_size
        if mf is None or mf.wrote_position + need > mf.file_size:
            try:
                mf = self.mfq.last_for_append()
            except OSError as exc:
                if not self.create_failed:
                    logger.error("cannot create CommitLog segment in %s: %s", self.mfq.dir, exc)
                self.create_failed = True
                return _FAIL_CREATE
            self.create_failed = False
        if not self._reserve(mf, mf.wrote_position + need):
            return _FAIL_DISK_FULL
        return mf

    def _reserve(self, mf: MappedFile, end: int) -> bool:
        """Disk blocks for ``mf[:end]`` before the mapping is written there (once per
        ``ALLOCATION_STEP``); False on ENOSPC. Past ``diskSpaceWarningLevelRatio`` the store is
        told the disk is full (later puts refused, 14) while this one still goes in."""
        if end <= mf.allocated:
            return True
        try:
            mf.ensure(end)
        except OSError as exc:
            if self.on_disk_full is not None:
                self.on_disk_full(f"cannot reserve CommitLog blocks in {self.mfq.dir}: {exc}")
            return False
        self.check_disk_ratio()
        return True

    def check_disk_ratio(self) -> None:
        """Past ``diskSpaceWarningLevelRatio``, tell the store the disk is full. Run after each
        reservation of blocks: by ``_reserve`` on the loop, or (``services.allocate``, which
        reserves a window ahead in its thread) scheduled back onto the loop."""
        try:
            ratio = disk_usage_ratio(self.mfq.dir)
        except OSError:
            return
        if ratio > self.config.disk_space_warning_level_ratio and self.on_disk_full is not None:
            self.on_disk_full(
                f"disk {self.mfq.dir} is {ratio * 100:.1f}% used, over diskSpaceWarningLevelRatio "
                f"{self.config.disk_space_warning_level_ratio}"
            )

    def put_message(self, msg: MessageInner) -> PutResult:
        """Append one message (synchronous; the flush policy wait is the caller's business).

        The per-message cost of every put (store_bench ``put_*``): one ``pack_into`` of the
        whole record by its shape's Struct (writing through: the prefix packed, one ``pwritev``
        of the parts), and the dispatch fields queued for reput. Timed into ``latency`` (the wall clock: the store time's
        read, as RocketMQ times its puts; a step back counts as 0), failed puts too; then
        ``after_put`` (if the gate is open) or ``on_failed``.
        """
        t0 = _time_ns()
        topic = msg.topic
        try:  # (a subscript, no method call: a topic's head is cached after its first put)
            head = self._topic_heads[topic]
            fixed = self._topic_fixed[topic]
        except KeyError:
            made = self._topic_head(topic)
            if made is None:
                return self._failed(t0, _FAIL_ILLEGAL)
            head, fixed = made, self._topic_fixed[topic]
        # inline of message_inner.MessageInner.properties_string
        props = msg.properties
        if props.__class__ is not str:
            props = properties_to_string(props)  # type: ignore[arg-type]
        props_b = props.encode()
        plen = len(props_b)
        body = msg.body
        blen = len(body)
        if plen > MAX_PROPERTIES_LENGTH or (plen and not props_b[-1]):  # see records.validate_record
            return self._failed(t0, _FAIL_PROPS)
        if blen > self.max_body:
            return self._failed(t0, _FAIL_ILLEGAL)
        born_ip, born_port = msg.born_host
        store_host = msg.store_host
        sys_flag = msg.sys_flag
        prepared = msg.prepared_transaction_offset
        # STOREHOST to PREPARED_TRANSACTION_OFFSET packed as one part, the broker's IPv4 host's
        # with 0 and 0 made once (layout.PUT_PREFIX_STRUCTS: 3 values fewer to convert a put)
        if store_host is self._tail_host and not prepared and not msg.reconsume_times and len(born_ip) == 4:
            sys_flag, counted = _V4_FLAGS[sys_flag] if 0 <= sys_flag < 256 else _v4_flags(sys_flag)
            prefix, psize = _PUT_PREFIX_V4, _PREFIX_SIZE  # (Struct.size: a read 3.11 does not specialize)
            size = fixed + blen + plen
            # STORETIMESTAMP packed with the tail once a millisecond (the clock's ns within the
            # stamped one: no division, no 8-byte conversion); a step back restamps
            # (the difference a small int: compares 3.11 specializes, unlike the clock's ns)
            stamp_from, now, tail = self._stamp
            if not 0 <= t0 - stamp_from < 1_000_000:  # inline of clock.now_ms (the put's first clock read)
                now = t0 // 1_000_000 if self._system_clock else self.clock()
                tail = _pack_stamped_v4(now, self._tail)  # (one pack, no concatenation)
                if self._system_clock:  # (another clock is read every put)
                    self._stamp = now * 1_000_000, now, tail
        else:
            now = t0 // 1_000_000 if self._system_clock else self.clock()
            tail = _pack_stamp(now) + self._store_tail(store_host, msg.reconsume_times, prepared)
            sys_flag = (sys_flag & ~HOST_FLAGS_MASK) | host_flags(born_ip, store_host[0])
            counted = _v4_flags(sys_flag)[1]
            prefix = PUT_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK]
            psize = prefix.size
            size = psize + blen + len(head) + 2 + plen
        files = self.mfq.files
        mf = files[-1] if files else None
        if mf is None or (end := mf.wrote_position + size) + END_FILE_MIN_BLANK_LENGTH > mf.allocated:
            got = self._segment_for(size)
            if isinstance(got, PutResult):
                return self._failed(t0, got)
            mf, end = got, got.wrote_position + size  # (end: the record's, computed once)

        queue_id = msg.queue_id
        try:  # (the queue's own key object, see _queue_keys)
            key = self._queue_keys[topic][queue_id]
        except KeyError:
            key = put_hooks.queue_key(self._queue_keys, self.topic_queue_table, topic, queue_id)
        qoff = 0
        if counted:
            try:  # (a subscript, no method call)
                qoff = self.topic_queue_table[key]
            except KeyError:
                pass  # the queue's first message
        pos = mf.wrote_position
        phy = mf.file_from_offset + pos
        # inline of remoting.protocol.message.encode_message
        crc = (_crc32_long if blen >= _LONG else _crc32)(body) & 0x7FFFFFFF
        if self.write_through:  # (the parts gathered by one pwritev: a whole-record pack measured worse)
            wrote = _pwritev(mf.fd, (prefix.pack(
                size, MESSAGE_MAGIC_CODE, crc, queue_id, msg.flag, qoff, phy, sys_flag, msg.born_timestamp, born_ip,
                born_port, tail, blen), body, head, PROPS_LENS[plen] if plen < 1024 else _pack_props_len(plen), props_b), pos)  # fmt: skip
            if wrote != size:
                raise short_write(mf.fd, wrote, size)
        else:  # the whole record by one Struct per shape (layout.put_shape): no 1 KiB+ bytes joined
            # (the last put's shape first: compares of attributes, no key tuple hashed and compared)
            if blen == self._shape_blen and plen == self._shape_plen and head is self._shape_head and prefix is self._shape_prefix:  # fmt: skip
                rec = self._shape_rec
                if rec is None and not self._shape_tried:  # its second put in a row: its Struct
                    rec = self._shape_rec = _shape_of((prefix, head, blen, plen)) or _put_shape(prefix, head, blen, plen)  # fmt: skip
                    self._shape_tried = True  # (None past PUT_SHAPES_MAX: joined from now on)
            else:
                # another shape than the last put's: joined. Its Struct is looked up or made only
                # when the shape is put twice in a row: bodies of ever new sizes (or two shapes
                # taking turns) pay no lookup (a key tuple hashed, ~1k instructions) and make no
                # Struct (~3.5k each) that the next put would not use. (These stores cost such a
                # put ~0.7k: 4,000 puts of ever new sizes 20,025 -> 20,710 instructions a put,
                # against 19,336 -> 17,723 for puts of one size.)
                rec = self._shape_rec = None
                self._shape_blen = blen
                self._shape_plen = plen
                self._shape_head = head
                self._shape_prefix = prefix
                self._shape_tried = False
            if rec is not None:  # (the shape's TOTALSIZE + MAGICCODE and topic + PROPERTIESLENGTH as bytes)
                pack, lead, mid = rec
                pack(
                    mf.mm, pos, lead, crc, queue_id, msg.flag, qoff, phy, sys_flag, msg.born_timestamp, born_ip, born_port,
                    tail, blen, body, mid, props_b,
                )  # fmt: skip
            else:  # a shape other than the last put's, or past layout.PUT_SHAPES_MAX: no Struct
                mm = mf.mm
                prefix.pack_into(
                    mm, pos, size, MESSAGE_MAGIC_CODE, crc, queue_id, msg.flag, qoff, phy, sys_flag, msg.born_timestamp,
                    born_ip, born_port, tail, blen,
                )  # fmt: skip
                mm[pos + psize : end] = b"".join((body, head, PROPS_LENS[plen] if plen < 1024 else _pack_props_len(plen), props_b))  # fmt: skip
        mf.wrote_position = end
        mf.last_store_timestamp = now
        if counted:
            self.topic_queue_table[key] = qoff + 1
        # (bounded: the oldest entries fall off and reput decodes those records instead)
        self.appended.append((phy, size, topic, queue_id, qoff, now, sys_flag, prepared, props, None))
        self.put_times_total += 1
        self.put_size_total += size
        lat = self.latency
        if lat is not None:  # inline of log.commitlog.CommitLog.record_latency
            dt = _time_ns() - t0
            if dt < 0:  # noqa: PLR1730 - a compare, not a max() call: runs on every put
                dt = 0
            lat.bits[dt.bit_length()] += 1
            lat.sum_ns += dt
            if dt > lat.max_ns:  # noqa: PLR1730 - a compare, not a max() call: runs on every put
                lat.max_ns = dt
        if not self.wake_gate.scheduled:
            # (read, then called: an instance attribute's method call is not specialized)
            after_put = self.after_put
            after_put()
        # the AppendResult (also the put's PutResult: one object), every slot filled directly
        # (at most three a statement: the compiler swaps those, a longer one builds a tuple):
        # no Python __init__ runs (results.AppendResult); tests/store/test_store_commitlog.py
        # checks every field
        append = AppendResult()
        append.status = _PUT_OK
        append.wrote_offset = phy
        append.wrote_bytes = size
        append.store_timestamp = now
        append.logics_offset = qoff
        append.msg_num = 1
        append.store_host = store_host
        append.batch_offsets = None
        return append

    def _store_tail(self, store_host: HostAddress, reconsume_times: int, prepared: int) -> bytes:
        """STOREHOST to PREPARED_TRANSACTION_OFFSET as bytes (16 address bytes for an IPv6
        host, as ``host_flags`` decides); an IPv4 host's with 0 and 0 is kept for the next puts."""
        ip, port = store_host
        tail = STORE_TAIL_STRUCTS[16 if len(ip) == 16 else 4].pack(ip, port, reconsume_times, prepared)
        if len(ip) == 4 and not reconsume_times and not prepared:
            self._tail_host, self._tail = store_host, tail
            self._stamp = _NO_STAMP  # (the stamped tail is the last host's)
        return tail

    def _failed(self, t0: int, result: PutResult) -> PutResult:
        """``result`` (a failed put begun at ``t0``, ``time_ns``) once timed into ``latency``
        and counted (``on_failed``)."""
        self.record_latency(_time_ns() - t0)
        self.on_failed()
        return result

    def record_latency(self, dt: int) -> None:
        """Count a put that took ``dt`` ns in ``latency`` (if set)."""
        lat = self.latency
        if lat is not None:
            dt = max(dt, 0)
            lat.bits[dt.bit_length()] += 1
            lat.sum_ns += dt
            lat.max_ns = max(lat.max_ns, dt)

    def put_run(
        self,
        msgs: Sequence[MessageInner],
        template: MessageInner | None = None,
        items: Sequence[BatchItem] = (),
        bodies: Sequence[bytes] = (),
        copies: Sequence[HalfCopy] = (),
    ) -> list[AppendedRecord] | None:
        """Append single records of any topics and queues (END_TRANSACTION's committed copies
        and op records of one loop turn, the check service's half copies) with one slice
        assignment: the bytes ``put_message`` of each in order would write (one store time),
        one clock read and one segment check for all. The appended records, in order (one per
        message, then one for all ``items``): where each landed. None, nothing written, when
        one would be refused, has IPv6 hosts, or the run does not fit in the current segment:
        the caller then puts them one by one.

        ``items`` (with their ``template``, as ``put_batch``): records after ``msgs`` that share
        a topic, queue and the other fields (op records), encoded as ``put_batch`` encodes
        them, no ``MessageInner`` each; reput gets them as one batch entry (one ConsumeQueue
        write for all). ``bodies`` (instead of ``items``): items of the template's flag and
        properties (``batch_encode.encode_bodies``). ``copies``: committed copies of halves
        ``put_message`` stored, after ``msgs`` (``batch_encode.encode_copies``).
        """
        files = self.mfq.files
        mf = files[-1] if files else None
        if mf is None or not (msgs or items or bodies or copies):
            return None
        heads = self._topic_heads
        max_body = self.max_body
        pos = start = mf.wrote_position
        phy = mf.file_from_offset + pos
        now = _time_ns() // 1_000_000 if self._system_clock else self.clock()
        table = self.topic_queue_table
        parts: list[bytes | memoryview] = []
        add = parts.append
        entries: list[AppendedRecord] = []
        entry = entries.append
        queued: dict[tuple[str, int], int] = {}  # queue offsets taken by this run
        for msg in msgs:  # inline of log.commitlog.CommitLog.put_message (IPv4 hosts)
            topic = msg.topic
            head = heads.get(topic) or self._topic_head(topic)
            props = msg.properties
            if props.__class__ is not str:
                props = properties_to_string(props)  # type: ignore[arg-type]
            props_b = props.encode()
            plen = len(props_b)
            body = msg.body
            blen = len(body)
            born_ip, born_port = msg.born_host
            store_ip, store_port = msg.store_host
            if (
                head is None
                or plen > MAX_PROPERTIES_LENGTH
                or (plen and not props_b[-1])
                or blen > max_body
                or len(born_ip) != 4
                or len(store_ip) != 4
            ):
                return None  # (refused, or IPv6 hosts: put_message's general path)
            sys_flag = msg.sys_flag & ~HOST_FLAGS_MASK
            size = _PREFIX_SIZE + blen + len(head) + 2 + plen
            queue_id = msg.queue_id
            key = (topic, queue_id)
            counted = sys_flag & _TX_MASK not in _UNCOUNTED
            qoff = queued.get(key)
            if qoff is None:
                qoff = table.get(key, 0)
            if counted:
                queued[key] = qoff + 1
            else:
                qoff = 0
            prepared = msg.prepared_transaction_offset
            add(
                _PREFIX_V4.pack(
                    size, MESSAGE_MAGIC_CODE, (_crc32_long if blen >= _LONG else _crc32)(body) & 0x7FFFFFFF, queue_id,
                    msg.flag, qoff, phy, sys_flag, msg.born_timestamp, born_ip, born_port, now, store_ip,
                    store_port, msg.reconsume_times, prepared, blen,
                )
            )  # fmt: skip
            add(body)
            add(head)
            add(PROPS_LENS[plen] if plen < 1024 else _pack_props_len(plen))
            add(props_b)
            entry((phy, size, topic, queue_id, qoff, now, sys_flag, prepared, props, None))
            phy += size
            pos += size
        if copies:
            added = encode_copies(
                copies, heads, self._topic_head, table, queued, mf.mm, mf.file_from_offset, phy, now, max_body,
                parts, entries,
            )  # fmt: skip
            if added < 0:
                return None
            phy += added
            pos += added
        if (items or bodies) and template is not None:
            topic, queue_id = template.topic, template.queue_id
            head = heads.get(topic) or self._topic_head(topic)
            key = (topic, queue_id)
            qoff = queued.get(key)
            if qoff is None:
                qoff = table.get(key, 0)
            if head is None:
                return None
            if items:
                encoded = encode_items(template, items, head, phy, qoff, now, max_body)
            else:
                encoded = encode_bodies(template, bodies, head, phy, qoff, now, max_body)
            if not isinstance(encoded, Encoded) or not isinstance(encoded.flags, int):
                return None
            if encoded.flags & _TX_MASK in _UNCOUNTED:
                return None  # (queue offsets 0: not a batch entry)
            parts += encoded.parts
            total, sizes = encoded.total, encoded.sizes
            entry((phy, total, topic, queue_id, qoff, now, encoded.flags, 0, "", (sizes, encoded.props)))
            queued[key] = qoff + len(sizes)
            pos += total
        end = pos + END_FILE_MIN_BLANK_LENGTH
        if end > mf.allocated and (end > mf.file_size or not self._reserve(mf, end)):
            return None  # (a segment roll: put_message's path does those)
        mf.write(start, b"".join(parts), self.write_through)
        mf.wrote_position = pos
        mf.last_store_timestamp = now
        table.update(queued)
        self.appended.extend(entries)
        self.put_times_total += len(msgs) + len(items) + len(bodies) + len(copies)
        self.put_size_total += pos - start
        return entries

    def put_messages(self, msgs: Sequence[MessageInner]) -> PutResult:
        """Append a batch that shares topic and queue; all records land in one segment.

        The records are encoded into one list of parts and copied into the mapping with one
        slice assignment; nothing is written unless the whole batch is valid. Reput gets the
        whole batch as one ``appended`` entry (``BatchFields``) when its records share their
        sysFlag (a broker batch always does), else one entry per record.
        """
        if not msgs:
            return _FAIL_ILLEGAL
        first = msgs[0]
        topic = first.topic
        head = self._topic_heads.get(topic) or self._topic_head(topic)
        if head is None:
            return _FAIL_ILLEGAL
        files = self.mfq.files
        mf = files[-1] if files else None
        # inline of clock.now_ms
        now = _time_ns() // 1_000_000 if self._system_clock else self.clock()
        qoff = self.topic_queue_table.get((topic, first.queue_id), 0)
        phy = mf.file_from_offset + mf.wrote_position if mf else 0
        encoded = encode_messages(msgs, head, phy, qoff, now, self.max_body)
        if encoded.__class__ is int:
            return _FAIL_ILLEGAL if encoded == ILLEGAL else _FAIL_PROPS
        assert isinstance(encoded, Encoded)
        total = encoded.total
        if mf is None or mf.wrote_position + total + END_FILE_MIN_BLANK_LENGTH > mf.allocated:
            got = self._segment_for(total)
            if isinstance(got, PutResult):
                return got
            mf = got
            # a new segment: PHYSICALOFFSETs change, encode again (once per segment roll)
            again = encode_messages(
                msgs, head, mf.file_from_offset + mf.wrote_position, qoff, now, self.max_body
            )
            assert isinstance(again, Encoded)
            encoded = again
        return self._write(mf, encoded, topic, first.queue_id, now, first.store_host, msgs)

    def put_batch(self, template: MessageInner, items: BatchPut) -> PutResult:
        """``put_messages`` for a ``BatchPut`` (items or a checked ``BatchBody``) sharing ``template``'s
        topic, queue, sysFlag, born time/host, store host, reconsume times; put_messages's bytes."""
        if not items:
            return _FAIL_ILLEGAL
        topic = template.topic
        head = self._topic_heads.get(topic) or self._topic_head(topic)
        if head is None:
            return _FAIL_ILLEGAL
        files = self.mfq.files
        mf = files[-1] if files else None
        # inline of clock.now_ms
        now = _time_ns() // 1_000_000 if self._system_clock else self.clock()
        qoff = self.topic_queue_table.get((topic, template.queue_id), 0)
        phy = mf.file_from_offset + mf.wrote_position if mf else 0
        encoded = encode_items(template, items, head, phy, qoff, now, self.max_body)
        if encoded.__class__ is int:
            return _FAIL_ILLEGAL if encoded == ILLEGAL else _FAIL_PROPS
        assert isinstance(encoded, Encoded)
        total = encoded.total
        if mf is None or mf.wrote_position + total + END_FILE_MIN_BLANK_LENGTH > mf.allocated:
            got = self._segment_for(total)
            if isinstance(got, PutResult):
                return got
            mf = got
            # a new segment: PHYSICALOFFSETs change, encode again (once per segment roll)
            phy = mf.file_from_offset + mf.wrote_position
            again = encode_items(template, items, head, phy, qoff, now, self.max_body)
            assert isinstance(again, Encoded)
            encoded = again
        return self._write(mf, encoded, topic, template.queue_id, now, template.store_host, None)

    def _write(
        self,
        mf: MappedFile,
        encoded: Encoded,
        topic: str,
        queue_id: int,
        now: int,
        store_host: HostAddress,
        msgs: Sequence[MessageInner] | None,
    ) -> PutResult:
        """Copy an encoded batch into ``mf`` with one slice assignment and queue it for reput."""
        total = encoded.total
        pos = mf.wrote_position
        encoded.write(mf, pos, self.write_through)
        mf.wrote_position = pos + total
        mf.last_store_timestamp = now
        key = (topic, queue_id)
        sizes = encoded.sizes
        n = len(sizes)
        base_qoff = self.topic_queue_table.get(key, 0)
        self.topic_queue_table[key] = base_qoff + n
        phy = mf.file_from_offset + pos
        offsets = list(accumulate(sizes, initial=phy))
        offsets.pop()
        flags = encoded.flags
        appended = self.appended
        if isinstance(flags, int):
            appended.append(
                (phy, total, topic, queue_id, base_qoff, now, flags, 0, "", (sizes, encoded.props))
            )
            # a batch entry holds many records: bound what reput may lag behind by bytes too
            while phy - appended[0][0] > _APPENDED_MAX_BYTES:
                appended.popleft()
        else:
            assert msgs is not None  # mixed flags only come from put_messages
            q = base_qoff
            for off, size, flag, m, props in zip(offsets, sizes, flags, msgs, encoded.props, strict=True):
                self.appended.append(
                    (off, size, topic, queue_id, q, now, flag, m.prepared_transaction_offset, props, None)
                )
                q += 1
        self.put_times_total += n
        self.put_size_total += total
        return AppendResult.of(phy, total, now, base_qoff, n, store_host, offsets)

    def append_data(self, start_offset: int, data: bytes | memoryview) -> bool:
        """HA seam: write replicated bytes at ``start_offset`` (``replica.append_replicated``)."""
        return append_replicated(self, start_offset, data)

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
        if pos + SYSFLAG_AT + 4 > mf.wrote_position:
            return -1
        sys_flag = int.from_bytes(mf.mm[pos + SYSFLAG_AT : pos + SYSFLAG_AT + 4], "big")
        ts_pos = pos + STORE_TIMESTAMP_AT[sys_flag & BORNHOST_V6_FLAG]
        if ts_pos + 8 > mf.wrote_position:
            return -1
        return int.from_bytes(mf.mm[ts_pos : ts_pos + 8], "big", signed=True)

    def rebuild_topic_queue_table(self, table: dict[tuple[str, int], int]) -> None:
        self.topic_queue_table = dict(table)
        self._queue_keys.clear()  # (their tuples are not this table's keys)
