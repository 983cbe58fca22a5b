"""Half- and op-queue records read in place: the prefix fields, the properties string, the
transaction; an op record's queue offset and body (:func:`op_records`).

END_TRANSACTION's read back (:meth:`~.service.TransactionalMessageService.find_half`), the
check scan (:mod:`.check`) and the restart's search for open transactions
(:meth:`~.service.TransactionalMessageService.read_open`) read a few fields of a stored half,
then copy its body and properties into a new record: no decoded message, no property dict.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from pocketmq.broker.transaction.bookkeeping import transaction_offset
from pocketmq.remoting.protocol.message import (
    HOST_FLAGS_MASK,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    PROPS_LEN,
    RECORD_MIN_SIZE,
    RECORD_PREFIX_STRUCTS,
    HostAddress,
    MessageConst,
    MessageDecodeError,
    encode_tail,
    get_property,
    properties_to_string,
)
from pocketmq.remoting.protocol.route import RMQ_SYS_TRANS_OP_HALF_TOPIC

__all__ = ["HalfMessage", "op_records", "read_half", "record_properties"]

_PREPARED = MessageConst.TRAN_PREPARED_QUEUE_OFFSET

# indexes of a record prefix's fields (RECORD_PREFIX_STRUCTS: the CommitLog layout in order)
(F_TOTAL, F_MAGIC, F_CRC, F_QUEUE_ID, F_FLAG, F_QUEUE_OFFSET, F_PHYSICAL_OFFSET, F_SYS_FLAG, F_BORN_TS, F_BORN_IP,
 F_BORN_PORT, F_STORE_TS, F_STORE_IP, F_STORE_PORT, F_RECONSUME, F_PREPARED_TX, F_BODY_LEN) = range(17)  # fmt: skip
_V4 = RECORD_PREFIX_STRUCTS[0]


def record_properties(buf: bytes, pos: int, body_at: int, fields: tuple[Any, ...]) -> str | None:
    """The properties string of the record at ``pos`` whose prefix unpacked to ``fields`` (the
    body starts at ``body_at``); None when the record is not a well-formed message record (bad
    magic, sizes that do not fit, properties that are not UTF-8), checked as ``decode_message``."""
    total, end = fields[F_TOTAL], pos + fields[F_TOTAL]
    body_len = fields[F_BODY_LEN]
    if (
        fields[F_MAGIC] != MESSAGE_MAGIC_CODE
        or end > len(buf)
        or body_len < 0
        or body_at + body_len + 3 > end
    ):
        return None
    p = body_at + body_len
    p += 1 + buf[p]  # TOPICLENGTH + TOPIC
    if total <= 0 or p + 2 > end or PROPS_LEN.unpack_from(buf, p)[0] != end - p - 2:
        return None
    try:
        return buf[p + 2 : end].decode()
    except UnicodeDecodeError:
        return None


class HalfMessage(NamedTuple):
    """A stored half message read in place (no decoded message: END_TRANSACTION and the check
    scan read a few fields of it, then copy its body and properties into a new record)."""

    buf: bytes
    #: where its body starts in ``buf``
    body_at: int
    #: its record prefix's fields (``RECORD_PREFIX_STRUCTS`` order)
    fields: tuple[Any, ...]
    props_str: str
    #: the transaction it belongs to (:func:`~.bookkeeping.transaction_offset`)
    tx_offset: int

    @property
    def queue_offset(self) -> int:
        return int(self.fields[F_QUEUE_OFFSET])

    @property
    def commit_log_offset(self) -> int:
        return int(self.fields[F_PHYSICAL_OFFSET])

    @property
    def body(self) -> bytes:
        return self.buf[self.body_at : self.body_at + self.fields[F_BODY_LEN]]

    @property
    def topic(self) -> str:
        p = self.body_at + self.fields[F_BODY_LEN]
        return self.buf[p + 1 : p + 1 + self.buf[p]].decode("utf-8", "replace")

    @property
    def born_host(self) -> HostAddress:
        return self.fields[F_BORN_IP], self.fields[F_BORN_PORT]

    @property
    def store_host(self) -> HostAddress:
        return self.fields[F_STORE_IP], self.fields[F_STORE_PORT]


def read_half(raw: bytes, pos: int = 0) -> HalfMessage:
    """Read the record at ``pos`` in place; raises :class:`MessageDecodeError` on garbage."""
    try:
        prefix = _V4
        fields = _V4.unpack_from(raw, pos)
        if fields[F_SYS_FLAG] & HOST_FLAGS_MASK:
            prefix = RECORD_PREFIX_STRUCTS[fields[F_SYS_FLAG] & HOST_FLAGS_MASK]
            fields = prefix.unpack_from(raw, pos)
    except struct.error:
        raise MessageDecodeError(f"bad message record at {pos}: truncated") from None
    body_at = pos + prefix.size
    props = record_properties(raw, pos, body_at, fields)
    if props is None:
        raise MessageDecodeError(f"bad message record at {pos}")
    return HalfMessage(
        raw,
        body_at,
        fields,
        props,
        transaction_offset(fields[F_QUEUE_OFFSET], get_property(props, _PREPARED)),
    )


# --------------------------------------------------------------------------- op records
#: per host-flags value: (TOTALSIZE, MAGICCODE, QUEUEOFFSET, SYSFLAG, BODYLENGTH) of a record
#: prefix, the other fields skipped (the first 40 bytes are the same in every layout)
_OP_HEADS = {
    flags: struct.Struct(f">ii12xq8xi{prefix.size - 44}xi") for flags, prefix in RECORD_PREFIX_STRUCTS.items()
}
_OP_HEAD_V4 = _OP_HEADS[0]
_OP_TOPIC_BYTES = RMQ_SYS_TRANS_OP_HALF_TOPIC.encode()
#: the properties of every op record this broker writes: TAGS=d (``bookkeeping.OP_TAG``)
_OP_PROPS_BYTES = properties_to_string({MessageConst.TAGS: "d"}).encode()
#: what follows the body of such a record (topic and properties with their lengths)
_OP_TAIL = encode_tail(_OP_TOPIC_BYTES, _OP_PROPS_BYTES)
_OP_TAIL_LEN = len(_OP_TAIL)
_TAGS = MessageConst.TAGS


def op_records(buf: bytes) -> list[tuple[int, bytes | None]]:
    """The records of a read of the op queue, in place: (queue offset, body when its tag is
    ``d``, else None) for each, as ``decode_messages`` would decode them (``.queue_offset``,
    ``.body`` when ``.tags == "d"``), and raises :class:`MessageDecodeError` where it raises.

    A check run reads every op record the broker wrote since the last one (a minute of
    END_TRANSACTIONs): one prefix unpack of five fields and, for a record as this broker writes
    them, one compare of the bytes after the body; no decoded message, no property string.
    """
    out: list[tuple[int, bytes | None]] = []
    append = out.append
    pos, n = 0, len(buf)
    while pos < n:
        if n - pos < 8:
            raise MessageDecodeError(f"bad message record at {pos}: fewer than 8 bytes")
        head = _OP_HEAD_V4
        try:
            total, magic, queue_offset, sys_flag, body_len = head.unpack_from(buf, pos)
            if sys_flag & HOST_FLAGS_MASK:
                head = _OP_HEADS[sys_flag & HOST_FLAGS_MASK]
                total, magic, queue_offset, sys_flag, body_len = head.unpack_from(buf, pos)
        except struct.error:
            raise MessageDecodeError(f"bad message record at {pos}: truncated") from None
        end = pos + total
        p = pos + head.size
        if (
            magic != MESSAGE_MAGIC_CODE
            or total < RECORD_MIN_SIZE
            or end > n
            or total < head.size + 3
            or body_len < 0
            or p + body_len + 3 > end
        ):
            raise MessageDecodeError(f"bad message record at {pos}")
        body_end = p + body_len
        if end - body_end == _OP_TAIL_LEN and buf.startswith(_OP_TAIL, body_end):
            append((queue_offset, buf[p:body_end]))  # (the broker's own: its tag is d)
        else:
            append((queue_offset, buf[p:body_end] if _tail_tag(buf, body_end, end, pos) == "d" else None))
        pos = end
    return out


def _tail_tag(buf: bytes, body_end: int, end: int, pos: int) -> str | None:
    """The TAGS of the record at ``pos`` from its tail (after the body, up to ``end``), checked
    as ``decode_message`` checks it."""
    topic_len = buf[body_end]
    props_at = body_end + 3 + topic_len
    if topic_len > MAX_TOPIC_LENGTH or props_at > end:
        raise MessageDecodeError(f"bad message record at {pos}: topic length {topic_len}")
    if PROPS_LEN.unpack_from(buf, props_at - 2)[0] != end - props_at:
        raise MessageDecodeError(f"bad message record at {pos}: properties length")
    try:
        buf[body_end + 1 : body_end + 1 + topic_len].decode()
        return get_property(buf[props_at:end].decode(), _TAGS)
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"bad message record at {pos}: not UTF-8") from exc
