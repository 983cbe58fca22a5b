"""Record checking (``check_message``) and the reput dispatcher core (``Dispatcher``).

``check_message`` is the one routine that decides whether bytes at a CommitLog position are a
valid record; recovery, reput and the HA slave all use it. It returns ``(size, request)``:

* ``size > 0`` and a ``DispatchRequest`` - a valid record of that size;
* ``size > 0`` and ``None``               - a BLANK: the rest of the segment is unused;
* ``END`` (0)                             - zeros: end of written data;
* ``INCOMPLETE``                          - a record cut at ``limit`` (HA data still arriving);
* ``CORRUPT``                             - anything else (bad magic, sizes, CRC, offset, UTF-8).

``Dispatcher.do_reput`` runs synchronously on the loop: it decodes from ``reput_from_offset``
up to the CommitLog's written end, appends ConsumeQueue units, index entries, and notifies the
arriving listener. ``store/services/reput.py`` drives it when a put sets the wake-up event.
"""

from __future__ import annotations

import logging
import mmap
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pocketmq.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    HOST_FLAGS_MASK,
    MESSAGE_MAGIC_CODE,
    PROPS_LEN,
    RECORD_PREFIX_STRUCTS,
    SIZE_MAGIC,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
    get_property,
    string_to_properties,
    tags_hash,
)
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.cq_table import ConsumeQueueTable
from pocketmq.store.index_file import IndexService
from pocketmq.store.layout import SCHEDULE_TOPIC
from pocketmq.store.listener import MessageArrivingListener

logger = logging.getLogger(__name__)

END = 0
CORRUPT = -1
INCOMPLETE = -2

_TX_MASK = TRANSACTION_ROLLBACK_TYPE
Buf = mmap.mmap | bytes
_PREFIX_V4 = RECORD_PREFIX_STRUCTS[0]
_TOPICS: dict[bytes, str] = {}
_KEYS = MessageConst.KEYS
_UNIQ = MessageConst.UNIQ_KEY
_TAGS = MessageConst.TAGS
_DELAY = MessageConst.DELAY


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


class LazyProperties(Mapping[str, str]):
    """Properties of a dispatched record, parsed only if the listener looks at them."""

    __slots__ = ("_d", "_s")

    def __init__(self, s: str) -> None:
        self._s = s
        self._d: dict[str, str] | None = None

    def _dict(self) -> dict[str, str]:
        if self._d is None:
            self._d = string_to_properties(self._s)
        return self._d

    def __getitem__(self, key: str) -> str:
        return self._dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())


def _topic_of(raw: bytes) -> str:
    t = _TOPICS.get(raw)
    if t is None:
        t = raw.decode()
        if len(_TOPICS) > 100_000:
            _TOPICS.clear()
        _TOPICS[raw] = t
    return t


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
    if limit - pos < 8:
        return (END if limit - pos <= 0 or not any(buf[pos:limit]) else INCOMPLETE), None
    total, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE:
        if magic == BLANK_MAGIC_CODE and total >= 8:
            # a BLANK always covers exactly the rest of its segment
            if total == limit - pos:
                return total, None
            return (INCOMPLETE if total > limit - pos else CORRUPT), None
        return (END if total == 0 and magic == 0 else CORRUPT), None
    if total < 91:
        return CORRUPT, None
    if total > limit - pos:
        return INCOMPLETE, None
    fields = _PREFIX_V4.unpack_from(buf, pos)
    prefix = _PREFIX_V4
    if fields[7] & HOST_FLAGS_MASK:
        prefix = RECORD_PREFIX_STRUCTS[fields[7] & HOST_FLAGS_MASK]
        fields = prefix.unpack_from(buf, pos)
    (_, _, crc, queue_id, _flag, queue_offset, phy_field, sys_flag, _born_ts, _bip, _bport,
     store_ts, _sip, _sport, _reconsume, prepared, body_len) = fields  # fmt: skip
    if phy_field != phy or body_len < 0:
        return CORRUPT, None
    p = pos + prefix.size
    end = pos + total
    if p + body_len + 3 > end:
        return CORRUPT, None
    if check_crc and zlib.crc32(buf[p : p + body_len]) & 0x7FFFFFFF != crc:
        return CORRUPT, None
    p += body_len
    topic_len = buf[p]
    if topic_len == 0 or topic_len > 127 or p + 1 + topic_len + 2 > end:
        return CORRUPT, None
    props_at = p + 1 + topic_len
    (props_len,) = PROPS_LEN.unpack_from(buf, props_at)
    if props_len < 0 or props_at + 2 + props_len != end:
        return CORRUPT, None
    try:
        topic = _topic_of(buf[p + 1 : props_at])
        props = buf[props_at + 2 : end].decode() if props_len else ""
    except UnicodeDecodeError:
        return CORRUPT, None
    return total, make_request(
        topic, queue_id, phy, total, store_ts, queue_offset, sys_flag, prepared, props, delay_levels
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
        keys = get_property(props, _KEYS)
        uniq = get_property(props, _UNIQ)
        tags = get_property(props, _TAGS)
        if tags:
            tags_code = tags_hash(tags)
        if topic == SCHEDULE_TOPIC:
            tags_code = _deliver_time(props, store_ts, delay_levels, tags_code)
    return DispatchRequest(
        topic, queue_id, phy, size, tags_code, store_ts, queue_offset, keys, uniq, sys_flag, prepared, props
    )


def _deliver_time(props: str, store_ts: int, delay_levels: list[int], default: int) -> int:
    """tagsCode of a SCHEDULE_TOPIC_XXXX unit: store time + the level's delay (Java semantics)."""
    raw = get_property(props, _DELAY)
    if raw is None:
        return default
    try:
        level = int(raw)
    except ValueError:
        return default
    level = min(level, len(delay_levels))
    if level <= 0:
        return default
    return store_ts + delay_levels[level - 1]


def is_dispatched_to_queue(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction records get no ConsumeQueue unit."""
    tx = sys_flag & _TX_MASK
    return tx not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def is_indexed(sys_flag: int) -> bool:
    return sys_flag & _TX_MASK != TRANSACTION_ROLLBACK_TYPE


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
        self.listener = listener
        self.index_enable = config.message_index_enable
        self.delay_levels = config.delay_levels_ms
        self.reput_from_offset = 0
        #: store time of the last dispatched record (checkpoint logics/index timestamps)
        self.last_dispatched_timestamp = 0
        self.dispatched_total = 0

    @property
    def behind(self) -> int:
        return max(0, self.commitlog.max_offset - self.reput_from_offset)

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
        listener = self.listener
        if notify and queued and listener is not None:
            listener.arriving(
                req.topic, req.queue_id, req.consume_queue_offset + 1, req.tags_code, req.store_timestamp,
                None, LazyProperties(req.properties_str),
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
        cl = self.commitlog
        mfq = cl.mfq
        pending = cl.appended
        delay_levels = self.delay_levels
        dispatch = self.dispatch
        n = 0
        try:
            while n < budget:
                off = self.reput_from_offset
                if pending and pending[0][0] <= off:
                    got = self._reput_appended(budget - n)
                    if got:
                        n += got
                        continue
                if off >= cl.max_offset:
                    break
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
                        if size != INCOMPLETE:
                            logger.error("reput stopped at %d: invalid record (code %d)", base + pos, size)
                        return n
                else:
                    if pos < mf.file_size:
                        break
        finally:
            self.dispatched_total += n
            self.index.write_headers()
        return n

    def _reput_appended(self, budget: int) -> int:
        """Fast path over ``CommitLog.appended``: no decoding, same ``make_request``."""
        pending = self.commitlog.appended
        off = self.reput_from_offset
        popleft = pending.popleft
        while pending and pending[0][0] < off:  # dispatched by the decoding path already
            popleft()
        n = 0
        dispatch = self.dispatch
        delay_levels = self.delay_levels
        while pending and n < budget and pending[0][0] == off:
            phy, size, topic, qid, qoff, ts, sys_flag, prepared, props = popleft()
            dispatch(make_request(topic, qid, phy, size, ts, qoff, sys_flag, prepared, props, delay_levels))
            off = phy + size
            self.reput_from_offset = off
            n += 1
        return n
