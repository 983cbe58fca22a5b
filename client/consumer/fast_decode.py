"""Fast decoding of pull bodies (the consumer's hot path).

Same records and result type as :func:`pocketmq.remoting.protocol.message.decode_messages`
(``MessageExt``), specialised for what pull bodies nearly always hold: IPv4 born/store hosts.
Per record: one ``unpack_from`` of the fixed prefix and one body copy; the values that repeat
from record to record (born host, store host and its msgId prefix, topic) are compared with the
previous record's rather than looked up, and the msgId's offset half is the hex of the record's
own PHYSICALOFFSET bytes (the digits formatting the number would give, at two thirds of the
cost). Any record that is not the plain IPv4 shape, or looks inconsistent, goes through the
shared decoder, which validates it fully and raises :class:`MessageDecodeError` for garbage.
"""

from __future__ import annotations

import dataclasses
import zlib

from pocketmq.remoting.protocol.message import (
    COMPRESSED_FLAG,
    HOST_FLAGS_MASK,
    MESSAGE_MAGIC_CODE,
    RECORD_PREFIX_V4,
    MessageExt,
    decode_message,
)

_PREFIX = RECORD_PREFIX_V4
_PREFIX_SIZE = RECORD_PREFIX_V4.size
_COMPRESSED = COMPRESSED_FLAG
#: Where PHYSICALOFFSET sits in a record: TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG (4 each),
#: QUEUEOFFSET (8).
_PHY_AT = 4 * 5 + 8
_PHY_END = _PHY_AT + 8
_OFFSET_MASK = (1 << 64) - 1


class PulledMessageExt(MessageExt):
    """A :class:`MessageExt` of the fast path whose ``msg_id`` (the offset message id: store
    host, port, PHYSICALOFFSET in 32 hex digits) is made on first read rather than per record:
    most listeners never read it, and making it was ~200 ns of a record's ~1.6 µs decode."""

    __slots__ = ("_id_prefix", "_msg_id")
    _id_prefix: str
    _msg_id: str

    @property
    def msg_id(self) -> str:
        try:
            return self._msg_id
        except AttributeError:
            mid = self._msg_id = f"{self._id_prefix}{self.commit_log_offset & _OFFSET_MASK:016X}"
            return mid

    @msg_id.setter
    def msg_id(self, value: str) -> None:
        self._msg_id = value

    def __eq__(self, other: object) -> bool:
        # equal to a MessageExt of the same fields, as the shared decoder's (the dataclass's
        # __eq__ compares only objects of one class)
        if isinstance(other, MessageExt):
            return _field_values(self) == _field_values(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as MessageExt's (a mutable dataclass)


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(MessageExt))


def _field_values(msg: MessageExt) -> tuple[object, ...]:
    return tuple(getattr(msg, name) for name in _FIELD_NAMES)


_new = PulledMessageExt.__new__
_topics: dict[bytes, str] = {}
_hosts: dict[tuple[bytes, int], tuple[str, int]] = {}
_id_prefix: dict[tuple[bytes, int], str] = {}


def _host(ip: bytes, port: int) -> tuple[str, int]:
    key = (ip, port)
    h = _hosts.get(key)
    if h is None:
        if len(_hosts) > 4096:
            _hosts.clear()
        h = _hosts[key] = (f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}", port)
    return h


def _id_of(ip: bytes, port: int) -> str:
    key = (ip, port)
    idp = _id_prefix.get(key)
    if idp is None:
        if len(_id_prefix) > 4096:
            _id_prefix.clear()
        idp = _id_prefix[key] = f"{ip.hex().upper()}{port & 0xFFFFFFFF:08X}"
    return idp


def _slow(buf: bytes, pos: int, inflate: bool) -> MessageExt:
    """A record the fast path does not take: the shared decoder (validates, raises)."""
    msg = decode_message(buf, pos)
    if inflate and msg.sys_flag & _COMPRESSED:
        msg.body = zlib.decompress(msg.body)
    return msg


# inline of pocketmq.remoting.protocol.message.decode_messages
def decode_pull_body(buf: bytes, *, inflate: bool = False) -> list[MessageExt]:
    """Decode back-to-back records; raises MessageDecodeError on anything invalid.

    ``inflate``: zlib-decompress the bodies flagged compressed (sysFlag bit 0), as consumers
    do before handing messages out (``zlib.error`` for a corrupt one).
    """
    out: list[MessageExt] = []
    append = out.append
    new = _new
    unpack = _PREFIX.unpack_from
    n = len(buf)
    pos = 0
    # Values that repeat from record to record (one producer host, one broker, one topic):
    # compared with the previous record's instead of looked up.
    last_bip = last_sip = b""
    last_bport = last_sport = -1
    born_host = store_host = ("", 0)
    idp = ""
    last_tb = b""
    last_tlen = 0
    topic = ""
    while pos < n:
        if n - pos < _PREFIX_SIZE + 3:
            append(_slow(buf, pos, inflate))
            pos += out[-1].store_size
            continue
        (total, magic, crc, qid, flag, qoff, phy, sys_flag, born_ts, born_ip, born_port,
         store_ts, store_ip, store_port, reconsume, prepared, body_len) = unpack(buf, pos)  # fmt: skip
        end = pos + total
        p = pos + _PREFIX_SIZE
        if (
            magic != MESSAGE_MAGIC_CODE
            or sys_flag & HOST_FLAGS_MASK
            or end > n
            or body_len < 0
            or p + body_len + 3 > end
        ):
            msg = _slow(buf, pos, inflate)
            append(msg)
            pos += msg.store_size
            continue
        body = buf[p : p + body_len]
        p += body_len
        tlen = buf[p]
        q = p + 1 + tlen
        if tlen != last_tlen or not buf.startswith(last_tb, p + 1):
            last_tb = buf[p + 1 : q]
            last_tlen = tlen
            cached = _topics.get(last_tb)
            if cached is None or q + 2 > end:
                last_tb = b""
                last_tlen = 0
                msg = _slow(buf, pos, inflate)
                if len(_topics) < 4096:
                    _topics[buf[p + 1 : q]] = msg.topic
                append(msg)
                pos += msg.store_size
                continue
            topic = cached
        elif q + 2 > end:
            msg = _slow(buf, pos, inflate)
            append(msg)
            pos += msg.store_size
            continue
        # PROPERTIES length, a big-endian short, read as two bytes (no Struct call and tuple
        # per record); above 0x7FFF it is negative as a short: the shared decoder rejects it.
        plen = buf[q] << 8 | buf[q + 1]
        q += 2
        if q + plen != end or plen > 0x7FFF:
            msg = _slow(buf, pos, inflate)
            append(msg)
            pos += msg.store_size
            continue
        try:
            props = buf[q:end].decode()
        except UnicodeDecodeError:
            msg = _slow(buf, pos, inflate)
            append(msg)
            pos = end
            continue
        if born_port != last_bport or born_ip != last_bip:
            last_bip, last_bport = born_ip, born_port
            born_host = _host(born_ip, born_port)
        if store_port != last_sport or store_ip != last_sip:
            last_sip, last_sport = store_ip, store_port
            store_host = _host(store_ip, store_port)
            idp = _id_of(store_ip, store_port)
        if sys_flag & _COMPRESSED and inflate:
            body = zlib.decompress(body)
        # Built field by field, not through a class call: that goes through
        # type.__call__ and slot_tp_init into a fresh frame with 18 arguments (~150 ns a record
        # more); stores into the slots specialize. Every field is set but msg_id, made from
        # _id_prefix on first read (the tests compare whole objects with the shared decoder's).
        m = new(PulledMessageExt)
        m.store_size = total
        m.magic = magic
        m.body_crc = crc
        m.queue_id = qid
        m.flag = flag
        m.queue_offset = qoff
        m.commit_log_offset = phy
        m.sys_flag = sys_flag
        m.born_timestamp = born_ts
        m.born_host = born_host
        m.store_timestamp = store_ts
        m.store_host = store_host
        m.reconsume_times = reconsume
        m.prepared_transaction_offset = prepared
        m.body = body
        m.topic = topic
        m.properties_str = props
        m._id_prefix = idp
        m._properties = None
        append(m)
        pos = end
    return out
