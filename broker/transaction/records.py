"""Half-queue records read in place: the prefix fields, the properties string, the transaction.

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
    MESSAGE_MAGIC_CODE,
    PROPS_LEN,
    RECORD_PREFIX_STRUCTS,
    HostAddress,
    MessageConst,
    MessageDecodeError,
    get_property,
)

__all__ = ["HalfMessage", "read_half", "record_properties"]

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
