"""Record checking (``check_message``) and the reput dispatcher core (``Dispatcher``).

``check_message`` wraps ``records.validate_record`` (the one routine that decides whether bytes
at a CommitLog position are a valid record) and returns ``(size, request)``:

* ``size > 0`` and a ``DispatchRequest`` - a valid record of that size;
* ``size > 0`` and ``None``               - a BLANK: the rest of the segment is unused;
* ``END`` (0)                             - zeros: end of written data;
* ``INCOMPLETE``                          - a record cut at ``limit`` (HA data still arriving);
* ``CORRUPT``                             - anything else (bad magic, sizes, CRC, offset, UTF-8).

Records appended by this process skip all of that: ``CommitLog.appended`` hands reput their
dispatch fields, and ``_reput_appended`` dispatches them without decoding anything.

``Dispatcher.do_reput`` runs synchronously on the loop: it decodes from ``reput_from_offset``
up to the CommitLog's written end, appends ConsumeQueue units, index entries, and notifies the
arriving listener. ``store/services/reput.py`` drives it when a put sets the wake-up event.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pocketmq.remoting.protocol.message import (
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
from pocketmq.store.records import CORRUPT, END, INCOMPLETE, Buf, validate_record

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
#: TAGS value -> tagsCode for the fast path (bounded; ``tags_hash`` has its own cache too)
_TAG_CODES: dict[str, int] = {}
_DELAY = MessageConst.DELAY
_TAGS_NEEDLE = "\x02TAGS\x01"
_KEYS_NEEDLE = "\x02KEYS\x01"
_UNIQ_NEEDLE = "\x02UNIQ_KEY\x01"
_ROLLBACK = TRANSACTION_ROLLBACK_TYPE
#: prepared and rolled-back transaction records get no ConsumeQueue unit
_UNQUEUED = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


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


def _tag_code(tags: str) -> int:
    if len(_TAG_CODES) > 4096:
        _TAG_CODES.clear()
    code = _TAG_CODES[tags] = tags_hash(tags)
    return code


def tags_code_of(props: str) -> int:
    """The hash of the TAGS property (first occurrence, as ``get_property``); 0 without tags."""
    if props.startswith("TAGS\x01"):
        a = 5
    else:
        a = props.find(_TAGS_NEEDLE)
        if a < 0:
            return 0
        a += 6
    e = props.find("\x02", a)
    tags = props[a:e] if e >= 0 else props[a:]
    if not tags:
        return 0
    code = _TAG_CODES.get(tags)
    return _tag_code(tags) if code is None else code


def dispatch_fields(props: str) -> tuple[str | None, str | None, str | None]:
    """``(TAGS, KEYS, UNIQ_KEY)`` of a properties string (first occurrence, as ``get_property``).

    One framing string and three ``find`` calls instead of three ``get_property`` calls: the
    separators around the string make every value end at a separator.
    """
    s = f"\x02{props}\x02"
    i = s.find(_TAGS_NEEDLE)
    tags = s[i + 6 : s.find("\x02", i + 6)] if i >= 0 else None
    i = s.find(_KEYS_NEEDLE)
    keys = s[i + 6 : s.find("\x02", i + 6)] if i >= 0 else None
    i = s.find(_UNIQ_NEEDLE)
    uniq = s[i + 10 : s.find("\x02", i + 10)] if i >= 0 else None
    return tags, keys, uniq


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
        """Fast path over ``CommitLog.appended``: no decoding, no ``DispatchRequest``.

        Does exactly what ``make_request`` + ``dispatch`` do, inlined: this loop is the
        per-message cost of dispatch (store_bench ``put_*``), so globals and attributes are
        bound to locals once per call. A record whose ConsumeQueue or index write raised is
        put back and retried by the next call.
        """
        pending = self.commitlog.appended
        off = self.reput_from_offset
        popleft = pending.popleft
        while pending and pending[0][0] < off:  # dispatched by the decoding path already
            popleft()
        if not pending or pending[0][0] != off:
            return 0
        queues = self.cq_table.flat
        find_or_create = self.cq_table.find_or_create
        build_index = self.index.build_index if self.index_enable else None
        listener = self.listener
        tag_codes = _TAG_CODES
        fields = dispatch_fields
        n = 0
        last_ts = 0
        try:
            while pending and n < budget:
                rec = popleft()
                phy, size, topic, qid, qoff, ts, sys_flag, _prepared, props = rec
                if phy != off:
                    pending.appendleft(rec)
                    break
                try:
                    keys = uniq = None
                    tags_code = 0
                    if props:
                        tags, keys, uniq = fields(props)
                        if tags:
                            code = tag_codes.get(tags)
                            tags_code = _tag_code(tags) if code is None else code
                        if topic == SCHEDULE_TOPIC:
                            tags_code = _deliver_time(props, ts, self.delay_levels, tags_code)
                    tx = sys_flag & 0xC
                    queued = tx not in _UNQUEUED
                    if queued:
                        cq = queues.get((topic, qid))
                        if cq is None:
                            cq = find_or_create(topic, qid)
                        cq.put(phy, size, tags_code, qoff, ts)
                    if build_index is not None and tx != _ROLLBACK and (uniq or keys):
                        build_index(topic, phy, ts, uniq, keys)
                    if queued and listener is not None:
                        self.reput_from_offset = phy + size
                        listener.arriving(topic, qid, qoff + 1, tags_code, ts, None, LazyProperties(props))
                except BaseException:
                    pending.appendleft(rec)
                    raise
                off = phy + size
                last_ts = ts
                n += 1
        finally:
            self.reput_from_offset = off
            if n:
                self.last_dispatched_timestamp = last_ts
        return n
