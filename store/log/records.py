"""``validate_record``: is there a valid CommitLog record at this position? (scan core)

Recovery, reput (for records it did not append itself) and the HA slave all scan the
CommitLog with this one routine. It returns ``(size, fields)``:

* ``size > 0`` and ``fields``   - a valid record of that size;
* ``size > 0`` and ``None``     - a BLANK: the rest of the segment is unused;
* ``END`` (0)                   - zeros: end of written data;
* ``INCOMPLETE``                - a record cut at ``limit`` (HA data still arriving);
* ``CORRUPT``                   - anything else (bad magic, sizes, CRC, offset, UTF-8).

``fields`` is ``(topic, queue_id, queue_offset, sys_flag, store_timestamp,
prepared_transaction_offset, properties)``. Scans are the hot path of recovery (a 1 GiB
CommitLog is ~900,000 records), so an IPv4 record is decoded with one ``unpack_from`` of a
struct that skips the fields a scan does not need (docs/development.md, hot paths), and the body CRC is computed
on a memoryview slice (no copy) when the caller passes one.

Record layout: ``pocketmq.remoting.protocol.message``; the skipping struct
(``log.layout.RECORD_SCAN_V4``, derived from the field table there)::

     0 i TOTALSIZE   4 i MAGICCODE   8 i BODYCRC   12 i QUEUEID   16 4x FLAG
    20 q QUEUEOFFSET   28 q PHYSICALOFFSET   36 i SYSFLAG   40 8x BORNTIMESTAMP
    48 8x BORNHOST   56 q STORETIMESTAMP   64 8x STOREHOST   72 4x RECONSUMETIMES
    76 q PREPARED_TRANSACTION_OFFSET   84 i BODYLENGTH   (88 bytes, as RECORD_PREFIX_V4)
"""

from __future__ import annotations

import mmap

from pocketmq.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    HOST_FLAGS_MASK,
    MESSAGE_MAGIC_CODE,
    PROPS_LEN,
    RECORD_MIN_SIZE,
    RECORD_PREFIX_STRUCTS,
    RECORD_PREFIX_V4,
    SIZE_MAGIC,
)
from pocketmq.store.log.crc import FAST_CRC_MIN, crc32_long, crc32_short
from pocketmq.store.log.layout import RECORD_FIELD_INDEX, RECORD_SCAN_V4

__all__ = ["CORRUPT", "END", "INCOMPLETE", "RecordFields", "validate_record"]

END = 0
CORRUPT = -1
INCOMPLETE = -2

Buf = mmap.mmap | bytes
#: (topic, queue_id, queue_offset, sys_flag, store_timestamp, prepared_offset, properties)
RecordFields = tuple[str, int, int, int, int, int, str]

_SCAN_V4 = RECORD_SCAN_V4
assert _SCAN_V4.size == RECORD_PREFIX_V4.size
#: fields of a full (IPv6 hosts) prefix tuple
_QO, _PHY, _TS, _PREP, _BL = (
    RECORD_FIELD_INDEX[name]
    for name in (
        "QUEUEOFFSET",
        "PHYSICALOFFSET",
        "STORETIMESTAMP",
        "PREPARED_TRANSACTION_OFFSET",
        "BODYLENGTH",
    )
)
_V4_SIZE = _SCAN_V4.size
_unpack_v4 = _SCAN_V4.unpack_from
_unpack_props_len = PROPS_LEN.unpack_from
_crc32 = crc32_short
_crc32_long = crc32_long
_TOPICS: dict[bytes, str] = {}


def _topic_of(raw: bytes) -> str:
    t = _TOPICS.get(raw)
    if t is None:
        t = raw.decode()
        if len(_TOPICS) > 100_000:
            _TOPICS.clear()
        _TOPICS[raw] = t
    return t


def _not_a_message(buf: Buf, pos: int, limit: int) -> int:
    """Classify bytes that are not a message record: BLANK size, END, INCOMPLETE or CORRUPT."""
    if limit - pos < 8:
        return END if limit - pos <= 0 or not any(buf[pos:limit]) else INCOMPLETE
    total, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic == MESSAGE_MAGIC_CODE:
        return INCOMPLETE if total > limit - pos and total >= RECORD_MIN_SIZE else CORRUPT
    if magic == BLANK_MAGIC_CODE and total >= 8:
        # a BLANK always covers exactly the rest of its segment
        if total == limit - pos:
            return int(total)
        return INCOMPLETE if total > limit - pos else CORRUPT
    return END if total == 0 and magic == 0 else CORRUPT


def validate_record(
    buf: Buf, pos: int, limit: int, phy: int, check_crc: bool, view: memoryview | None = None
) -> tuple[int, RecordFields | None]:
    """Check the record at ``buf[pos]`` (CommitLog offset ``phy``); see the module docstring.

    ``view``, if given, is ``memoryview(buf)``: the CRC then reads the body without a copy.
    """
    if limit - pos < _V4_SIZE + 3:
        size = _not_a_message(buf, pos, limit)
        return size, None
    total, magic, crc, queue_id, queue_offset, phy_field, sys_flag, store_ts, prepared, body_len = _unpack_v4(
        buf, pos
    )
    if magic != MESSAGE_MAGIC_CODE or total > limit - pos:
        return _not_a_message(buf, pos, limit), None
    if total < RECORD_MIN_SIZE:
        return CORRUPT, None
    p = pos + _V4_SIZE
    if sys_flag & HOST_FLAGS_MASK:
        prefix = RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK]
        if total < prefix.size + 3:
            return CORRUPT, None
        f = prefix.unpack_from(buf, pos)
        queue_offset, phy_field, store_ts, prepared, body_len = f[_QO], f[_PHY], f[_TS], f[_PREP], f[_BL]
        p = pos + prefix.size
    if phy_field != phy or body_len < 0:
        return CORRUPT, None
    end = pos + total
    if p + body_len + 3 > end:
        return CORRUPT, None
    if check_crc:
        body = view[p : p + body_len] if view is not None else buf[p : p + body_len]
        if (_crc32_long if body_len >= FAST_CRC_MIN else _crc32)(body) & 0x7FFFFFFF != crc:
            return CORRUPT, None
    p += body_len
    topic_len = buf[p]
    if topic_len == 0 or topic_len > 127 or p + 1 + topic_len + 2 > end:
        return CORRUPT, None
    props_at = p + 1 + topic_len
    (props_len,) = _unpack_props_len(buf, props_at)
    if props_len < 0 or props_at + 2 + props_len != end:
        return CORRUPT, None
    if (not buf[p + 1] or (props_len and not buf[end - 1])) and _zeros_after(buf, end, limit):
        # A torn write (power loss): the record's length words reached the disk but its tail did
        # not, so the topic or the properties end in zeros (the body has its CRC) and nothing
        # follows. A real record never ends so: puts refuse properties ending in NUL (13).
        return CORRUPT, None
    try:
        topic = _topic_of(buf[p + 1 : props_at])
        props = buf[props_at + 2 : end].decode() if props_len else ""
    except UnicodeDecodeError:
        return CORRUPT, None
    return total, (topic, queue_id, queue_offset, sys_flag, store_ts, prepared, props)


def _zeros_after(buf: Buf, pos: int, limit: int) -> bool:
    """Nothing was written after ``pos`` (the next 8 bytes are zeros, or the data ends)."""
    return not any(buf[pos : min(limit, pos + 8)])
