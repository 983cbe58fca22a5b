"""The message codec shared by store, broker and client (sans-IO, stdlib only).

A pull response body is raw CommitLog bytes, so one codec serves disk and wire.

CommitLog record (all integers big-endian, signed; IPv4 hosts shown)::

    offset size field                        notes
    ------ ---- ---------------------------- ---------------------------------------------
         0    4 TOTALSIZE                    whole record length, this field included
         4    4 MAGICCODE                    0xDAA320A7 (MESSAGE_MAGIC_CODE, -626843481)
         8    4 BODYCRC                      zlib.crc32(body) & 0x7FFFFFFF (Java CRC32, masked)
        12    4 QUEUEID
        16    4 FLAG                         user flag from the producer
        20    8 QUEUEOFFSET                  logical offset in (topic, queueId)
        28    8 PHYSICALOFFSET               CommitLog offset of this record
        36    4 SYSFLAG                      COMPRESSED 0x1, MULTI_TAGS 0x2, tx type 0xC,
                                             BORNHOST_V6 0x10, STOREHOSTADDRESS_V6 0x20
        40    8 BORNTIMESTAMP                ms
        48    8 BORNHOST                     4-byte IP + int32 port (16-byte IP + port if v6)
        56    8 STORETIMESTAMP               ms, set by the store
        64    8 STOREHOST                    4-byte IP + int32 port (16-byte IP + port if v6)
        72    4 RECONSUMETIMES
        76    8 PREPARED_TRANSACTION_OFFSET
        84    4 BODYLENGTH                   B
        88    B BODY                         possibly compressed (SYSFLAG bit 0)
      88+B    1 TOPICLENGTH                  T, signed byte: topic <= 127 bytes
      89+B    T TOPIC                        UTF-8
    89+B+T    2 PROPERTIESLENGTH             P, int16 (<= 32767)
    91+B+T    P PROPERTIES                   key \\x01 value \\x02 key \\x01 value ... (UTF-8)

    total = 91 + B + T + P; each IPv6 host adds 12 bytes.

End-of-file blank (a record that did not fit in the rest of a CommitLog segment)::

    0  4 remaining bytes of the file     4  4 BLANK_MAGIC_CODE 0xCBD43194 (-875286124)

Batch body (SEND_BATCH_MESSAGE, or SEND_MESSAGE_V2 with ``m=true``), one
item after another::

    offset size field
         0    4 TOTALSIZE           20 + bodyLen + 2 + propsLen
         4    4 MAGICCODE           0 (ignored)
         8    4 BODYCRC             0 (ignored)
        12    4 FLAG
        16    4 BODYLENGTH
        20    n BODY
      20+n    2 PROPERTIESLENGTH
      22+n    p PROPERTIES

Offset msgId = hex(store IP (4|16) + port int32 + CommitLog offset int64), uppercase.
Every decoding error raises :class:`MessageDecodeError` (a ``ValueError``); nothing is
allocated from a size field before it has been checked against the bytes at hand.
"""

from __future__ import annotations

import itertools
import os
import random
import struct
import sys
import threading
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import mul

from pocketmq.remoting.protocol.errors import LocalProtocolError

# --------------------------------------------------------------------------------------------
# constants

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7 as a signed int32
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194 as a signed int32
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, 5.x only (2-byte topic length); never written

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700  # 0x100 LZ4, 0x200 ZSTD, 0x300 ZLIB (0 = zlib from old clients)


def transaction_value(sys_flag: int) -> int:
    """The transaction type bits (``sys_flag & 0xC``)."""
    return sys_flag & TRANSACTION_ROLLBACK_TYPE


NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
#: the decimal text of queue ids 0..1023 (a topic's queues are numbered from 0, 16 by default):
#: a subscript costs ~0.45k instructions less than formatting the int (callgrind). The broker
#: writes a send's queue id into its reply and a half's ``REAL_QID``; the SDK compares a
#: reply's ``queueId`` with it. Other ids miss (KeyError / None).
QUEUE_ID_TEXT: dict[int, str] = {i: str(i) for i in range(1024)}
KEY_SEPARATOR = " "
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767


class MessageConst:
    """Property keys (Java ``MessageConst``)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT = "WAIT"
    DELAY = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QID = "REAL_QID"
    TRAN_MSG = "TRAN_MSG"
    PGROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_ON = "TRACE_ON"
    UNIQ_KEY = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIME = "CONSUME_START_TIME"
    TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    INSTANCE_ID = "INSTANCE_ID"
    CORRELATION_ID = "CORRELATION_ID"
    REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    TTL = "TTL"
    ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    CLUSTER = "CLUSTER"
    MSG_TYPE = "MSG_TYPE"
    INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
    INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
    START_DELIVER_TIME = "__STARTDELIVERTIME"
    SHARDING_KEY = "__SHARDINGKEY"

    KEY_SEPARATOR = KEY_SEPARATOR


class MessageDecodeError(LocalProtocolError, ValueError):
    """Bytes that are not a valid record, batch, property string or msgId."""


# --------------------------------------------------------------------------------------------
# Java String.hashCode and tags codes

_INT32_MASK = 0xFFFFFFFF
_POW31_LEN = 1024
# 31**k mod 2**32 for k = 0.._POW31_LEN-1: the hash is sum(unit_i * 31**(n-1-i)), so we zip
# the reversed code units with this table and let C do the multiply-add (~10x a Python loop).
_POW31 = tuple(pow(31, k, 1 << 32) for k in range(_POW31_LEN))
_LITTLE = sys.byteorder == "little"


def _hash_units(units: Iterable[int], n: int) -> int:
    if n <= _POW31_LEN:
        h: int = sum(map(mul, units, _POW31[n - 1 :: -1] if n else ())) & _INT32_MASK
    else:
        h = 0
        for u in units:
            h = (h * 31 + u) & _INT32_MASK
    return h - 0x100000000 if h & 0x80000000 else h


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode`` (UTF-16 code units, int32 wrap-around)."""
    if s.isascii():
        data = s.encode("ascii")
        return _hash_units(data, len(data))
    raw = s.encode("utf-16-le" if _LITTLE else "utf-16-be")
    units = memoryview(raw).cast("H")
    return _hash_units(units, len(units))


_TAGS_CACHE: dict[str, int] = {}


def tags_hash(tags: str | None) -> int:
    """ConsumeQueue tagsCode for a TAGS value: Java hashCode, 0 when there is no tag."""
    if not tags:
        return 0
    code = _TAGS_CACHE.get(tags)
    if code is None:
        code = java_string_hash(tags)
        if len(_TAGS_CACHE) > 65536:  # tags repeat a lot, but keep hostile input bounded
            _TAGS_CACHE.clear()
        _TAGS_CACHE[tags] = code
    return code


# --------------------------------------------------------------------------------------------
# properties


def properties_to_string(props: Mapping[str, str | None]) -> str:
    """Java ``messageProperties2String``: no trailing separator; ``None`` values skipped."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None)


def string_to_properties(s: str) -> dict[str, str]:
    """Parse a properties string; tolerates a trailing separator, skips malformed entries."""
    out: dict[str, str] = {}
    if not s:
        return out
    for item in s.split(PROPERTY_SEPARATOR):
        k, sep, v = item.partition(NAME_VALUE_SEPARATOR)
        if sep and k:
            out[k] = v
    return out


def get_property(s: str, key: str) -> str | None:
    """One property straight from the encoded string, without building the dict."""
    needle = key + NAME_VALUE_SEPARATOR
    if s.startswith(needle):
        start = len(needle)
    else:
        i = s.find(PROPERTY_SEPARATOR + needle)
        if i < 0:
            return None
        start = i + 1 + len(needle)
    end = s.find(PROPERTY_SEPARATOR, start)
    return s[start:] if end < 0 else s[start:end]


# --------------------------------------------------------------------------------------------
# hosts and message ids

HostAddress = tuple[bytes, int]
"""(packed IP: 4 or 16 bytes, port) as written to BORNHOST / STOREHOST."""


def pack_host_ip(ip: str) -> bytes:
    """Dotted IPv4 or IPv6 text to its packed form (4 or 16 bytes)."""
    parts = ip.split(".")
    if len(parts) == 4 and ":" not in ip:
        try:
            vals = [int(p) for p in parts]
        except ValueError:
            raise MessageDecodeError(f"bad IPv4 address {ip!r}") from None
        if all(0 <= v <= 255 for v in vals):
            return bytes(vals)
        raise MessageDecodeError(f"bad IPv4 address {ip!r}")
    import ipaddress  # only for the rare IPv6 case

    try:
        return ipaddress.IPv6Address(ip.split("%", 1)[0]).packed
    except ValueError as exc:
        raise MessageDecodeError(f"bad IP address {ip!r}") from exc


def format_host_ip(raw: bytes) -> str:
    if len(raw) == 4:
        return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"
    import ipaddress

    return ipaddress.IPv6Address(raw).compressed


_MSGID_TAIL = struct.Struct(">iq")  # port, commit-log offset


def create_offset_msg_id(host: bytes, port: int, commit_log_offset: int) -> str:
    """Offset msgId: store IP + port + CommitLog offset as uppercase hex (32 or 56 chars)."""
    if len(host) not in (4, 16):
        raise ValueError(f"host must be 4 or 16 bytes, got {len(host)}")
    return (host + _MSGID_TAIL.pack(port, commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """``(ip, port, commit_log_offset)`` from an offset msgId; ``ValueError`` on garbage."""
    if len(msg_id) == 32:
        ip_len = 4
    elif len(msg_id) == 56:
        ip_len = 16
    else:
        raise MessageDecodeError(f"msgId must be 32 or 56 hex chars, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MessageDecodeError(f"msgId is not hex: {msg_id!r}") from exc
    port, offset = _MSGID_TAIL.unpack_from(raw, ip_len)
    return format_host_ip(raw[:ip_len]), port, offset


_HEX2 = [f"{i:02X}" for i in range(256)]
#: the counter's low byte at which its high byte advances (compared by identity: a cycle over
#: _HEX2 yields this very object)
_HEX2_ZERO = _HEX2[0]


class UniqIdGenerator:
    """Java ``MessageClientIDSetter`` layout: ip(4|16) pid16 hash32 | ms-since-month32 counter16.

    The sans-IO codec cannot look up the local address, so the caller passes it (the client
    knows its IP); an unknown address defaults to 4 random bytes, as Java's fake IP does.

    Not thread-safe: the counter's high byte and the head it is rendered into are updated in
    steps, and two threads making ids at once could each take a low byte against the same
    high byte, one of them an id made 256 earlier. One generator per thread (a producer's is
    used on its event loop only); each has its own random prefix, so no two can collide.
    """

    def __init__(self, ip: bytes | None = None, pid: int | None = None) -> None:
        ip = ip if ip is not None else random.randbytes(4)
        pid = os.getpid() if pid is None else pid
        self._prefix = (ip + struct.pack(">HI", pid & 0xFFFF, random.getrandbits(32))).hex().upper()
        self._start_ms = 0
        self._next_start_ms = 0
        #: the id up to the counter (prefix + ms since the month's start) for millisecond last_ms
        self._head = ""
        #: the high 16 bits of the ms since the month's start that ``_hi_head`` (the prefix and
        #: their 4 hex digits) was rendered for: they change every ~65 s, the low half each ms
        self._hi = -1
        self._hi_head = ""
        #: the wall-clock millisecond of the last id made (a producer's born timestamp of that
        #: message's first attempt: no second clock read per send)
        self.last_ms = -1
        self._count_from(random.getrandbits(16))

    def _count_from(self, count: int) -> None:
        """Make the next id's counter ``count`` (mod 2**16). The counter is kept as its high
        byte (``_hi8``) and a cycle over the low byte's hex texts (``_lo``): an id is the head
        with the high byte (``_head_hi``, remade when either changes) plus the next low text."""
        low = count & 0xFF
        self._lo = itertools.cycle(_HEX2[low:] + _HEX2[:low])
        # a low byte starting at 00 advances the high byte on the first id: start one below
        self._hi8 = ((count >> 8) - (low == 0)) & 0xFF
        self._head_hi = self._head + _HEX2[self._hi8]

    def _new_ms(self, now: int) -> None:
        if now >= self._next_start_ms or now < self._start_ms:
            self._roll_month(now)
        self.last_ms = now
        diff = (now - self._start_ms) & _INT32_MASK
        if diff >> 16 != self._hi:
            self._hi = diff >> 16
            self._hi_head = f"{self._prefix}{diff >> 16:04X}"
        # the head's ms field: its high half formatted when it changes (~65 s), its low half
        # from the table (a '%08X' format each ms cost ~0.5k instructions more)
        head = self._head = self._hi_head + _HEX2[(diff >> 8) & 0xFF] + _HEX2[diff & 0xFF]
        self._head_hi = head + _HEX2[self._hi8]

    def _roll_month(self, now_ms: int) -> None:
        t = time.localtime(now_ms / 1000)
        start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
        nxt = time.mktime((t.tm_year + t.tm_mon // 12, t.tm_mon % 12 + 1, 1, 0, 0, 0, 0, 0, -1))
        self._start_ms = int(start * 1000)
        self._next_start_ms = int(nxt * 1000)

    def create(self) -> str:
        # One id per message sent: the head (prefix, ms since the month's start and the
        # counter's high byte) made once per millisecond or 256 ids, the counter's low byte from
        # a cycle over its hex texts: one concatenation an id (the same text as packing ">iH"
        # and hex().upper(); ~1.1k instructions less an id than masking both bytes of a count
        # into a table and concatenating twice).
        now = time.time_ns() // 1_000_000
        if now != self.last_ms:
            self._new_ms(now)
        lo = next(self._lo)
        if lo is _HEX2_ZERO:
            self._hi8 = hi8 = (self._hi8 + 1) & 0xFF
            self._head_hi = self._head + _HEX2[hi8]
        return self._head_hi + lo

    def create_many(self, n: int) -> list[str]:
        """``n`` ids (a batch's), the texts ``n`` calls of :meth:`create` make, with the clock
        read once and again each 256 ids (as the head is remade), not once an id (a ms read is
        ~0.9k instructions: most of an id's cost)."""
        return self.create_text(n).split(",") if n else []

    def create_text(self, n: int) -> str:
        """:meth:`create_many`'s ids as one text, joined by commas (a batch's ``msgId``): the
        n low texts taken at once and each run of them between two wraps of the low byte
        (text 00) joined to its head in C, with no string made per id (64 ids: ~18k
        instructions against ~72k for 64 strings, callgrind); at a wrap, what :meth:`create`
        does."""
        now = time.time_ns() // 1_000_000
        if now != self.last_ms:
            self._new_ms(now)
        lows = list(itertools.islice(self._lo, n))
        runs: list[str] = []
        start = search = 0
        while True:
            try:
                wrap = lows.index(_HEX2_ZERO, search)
            except ValueError:
                wrap = n
            if wrap > start:
                head = self._head_hi
                runs.append(head + ("," + head).join(lows[start:wrap]))
            if wrap == n:
                return ",".join(runs)
            now = time.time_ns() // 1_000_000
            if now != self.last_ms:
                self._new_ms(now)
            self._hi8 = hi8 = (self._hi8 + 1) & 0xFF
            self._head_hi = self._head + _HEX2[hi8]
            start, search = wrap, wrap + 1


#: ``create_uniq_id``'s generators, one per thread (see ``UniqIdGenerator``)
_per_thread = threading.local()


def create_uniq_id() -> str:
    """A new UNIQ_KEY value (32 uppercase hex chars for an IPv4 prefix), from this thread's
    generator: callers on several threads (clients on their own loops) get unique ids."""
    try:
        gen: UniqIdGenerator = _per_thread.gen
    except AttributeError:
        gen = _per_thread.gen = UniqIdGenerator()
    return gen.create()


# --------------------------------------------------------------------------------------------
# CommitLog record encoder

# Fixed part of a record up to and including BODYLENGTH, one Struct per host-family combination
# (hot-path rule, docs/development.md: one pack_into for the whole prefix, then body and a cached topic/properties tail).
_PREFIX_FMT = (
    ">"
    "i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # QUEUEID
    "i"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "i"  # SYSFLAG
    "q"  # BORNTIMESTAMP
    "{born}s"  # BORNHOST ip
    "i"  # BORNHOST port
    "q"  # STORETIMESTAMP
    "{store}s"  # STOREHOST ip
    "i"  # STOREHOST port
    "i"  # RECONSUMETIMES
    "q"  # PREPARED_TRANSACTION_OFFSET
    "i"  # BODYLENGTH
)
RECORD_PREFIX_STRUCTS: dict[int, struct.Struct] = {
    0: struct.Struct(_PREFIX_FMT.format(born=4, store=4)),
    BORNHOST_V6_FLAG: struct.Struct(_PREFIX_FMT.format(born=16, store=4)),
    STOREHOSTADDRESS_V6_FLAG: struct.Struct(_PREFIX_FMT.format(born=4, store=16)),
    BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG: struct.Struct(_PREFIX_FMT.format(born=16, store=16)),
}
RECORD_PREFIX_V4 = RECORD_PREFIX_STRUCTS[0]
HOST_FLAGS_MASK = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
RECORD_MIN_SIZE = RECORD_PREFIX_V4.size + 1 + 2  # 91: empty body, topic and properties
SIZE_MAGIC = struct.Struct(">ii")  # TOTALSIZE + MAGICCODE, for scans
PROPS_LEN = struct.Struct(">h")
BLANK_RECORD = SIZE_MAGIC  # remaining bytes + BLANK_MAGIC_CODE
END_FILE_MIN_BLANK_LENGTH = 8


def body_crc(body: bytes) -> int:
    """Java ``UtilAll.crc32`` masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


def record_size(body_len: int, topic_len: int, props_len: int, sys_flag: int = 0) -> int:
    extra = (12 if sys_flag & BORNHOST_V6_FLAG else 0) + (12 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 0)
    return RECORD_MIN_SIZE + body_len + topic_len + props_len + extra


def encode_tail(topic: bytes, properties: bytes) -> bytes:
    """TOPICLENGTH + TOPIC + PROPERTIESLENGTH + PROPERTIES (the record's last part)."""
    if len(topic) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic longer than {MAX_TOPIC_LENGTH} bytes")
    if len(properties) > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties longer than {MAX_PROPERTIES_LENGTH} bytes")
    return b"".join((bytes((len(topic),)), topic, PROPS_LEN.pack(len(properties)), properties))


def host_flags(born_ip: bytes, store_ip: bytes) -> int:
    return (BORNHOST_V6_FLAG if len(born_ip) == 16 else 0) | (
        STOREHOSTADDRESS_V6_FLAG if len(store_ip) == 16 else 0
    )


def encode_message(
    *,
    topic: str,
    body: bytes,
    properties: Mapping[str, str] | str = "",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    commit_log_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: HostAddress = (b"\x7f\x00\x00\x01", 0),
    store_timestamp: int = 0,
    store_host: HostAddress = (b"\x7f\x00\x00\x01", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    body_crc_value: int | None = None,
) -> bytes:
    """One complete CommitLog record (the host-v6 SYSFLAG bits follow the host lengths)."""
    props = properties if isinstance(properties, str) else properties_to_string(properties)
    tail = encode_tail(topic.encode(), props.encode())
    sys_flag = (sys_flag & ~HOST_FLAGS_MASK) | host_flags(born_host[0], store_host[0])
    prefix = RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK]
    total = prefix.size + len(body) + len(tail)
    crc = body_crc(body) if body_crc_value is None else body_crc_value
    head = prefix.pack(
        total, MESSAGE_MAGIC_CODE, crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
        born_timestamp, born_host[0], born_host[1], store_timestamp, store_host[0], store_host[1],
        reconsume_times, prepared_transaction_offset, len(body),
    )  # fmt: skip
    return b"".join((head, body, tail))


# --------------------------------------------------------------------------------------------
# decoder


@dataclass(slots=True)
class MessageExt:
    """A decoded CommitLog record. ``properties`` is parsed on first access."""

    store_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_str: str
    msg_id: str
    _properties: dict[str, str] | None = field(default=None, repr=False)

    @property
    def properties(self) -> dict[str, str]:
        if self._properties is None:
            self._properties = string_to_properties(self.properties_str)
        return self._properties

    def get_property(self, key: str) -> str | None:
        if self._properties is not None:
            return self._properties.get(key)
        return get_property(self.properties_str, key)

    @property
    def tags(self) -> str | None:
        return self.get_property(MessageConst.TAGS)

    @property
    def keys(self) -> str | None:
        return self.get_property(MessageConst.KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.get_property(MessageConst.UNIQ_KEY)

    @property
    def body_compressed(self) -> bool:
        return bool(self.sys_flag & COMPRESSED_FLAG)


def _fail(pos: int, reason: str) -> MessageDecodeError:
    return MessageDecodeError(f"bad message record at {pos}: {reason}")


def decode_message(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, read_body: bool = True
) -> MessageExt:
    """Decode the record starting at ``pos``; raises :class:`MessageDecodeError` on garbage."""
    n = len(buf)
    if pos < 0 or n - pos < 8:
        raise _fail(pos, "fewer than 8 bytes")
    total, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE:
        raise _fail(pos, f"magic {magic & _INT32_MASK:#x}")
    if total < RECORD_MIN_SIZE or total > n - pos:
        raise _fail(pos, f"total size {total} outside [{RECORD_MIN_SIZE}, {n - pos}]")
    sys_flag = int.from_bytes(buf[pos + 36 : pos + 40], "big", signed=True)
    prefix = RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK]
    if total < prefix.size + 3:
        raise _fail(pos, f"total size {total} too small for its hosts")
    (_, _, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_ip, born_port,
     store_ts, store_ip, store_port, reconsume, prepared, body_len) = prefix.unpack_from(buf, pos)  # fmt: skip
    end = pos + total
    p = pos + prefix.size
    if body_len < 0 or p + body_len + 3 > end:
        raise _fail(pos, f"body length {body_len} does not fit in {total}")
    body = bytes(buf[p : p + body_len]) if read_body else b""
    p += body_len
    topic_len = buf[p]
    if topic_len > MAX_TOPIC_LENGTH or p + 1 + topic_len + 2 > end:
        raise _fail(pos, f"topic length {topic_len} does not fit")
    try:
        topic = bytes(buf[p + 1 : p + 1 + topic_len]).decode()
    except UnicodeDecodeError as exc:
        raise _fail(pos, "topic is not UTF-8") from exc
    p += 1 + topic_len
    (props_len,) = PROPS_LEN.unpack_from(buf, p)
    p += 2
    if props_len < 0 or p + props_len != end:
        raise _fail(pos, f"properties length {props_len} inconsistent with total size {total}")
    try:
        props = bytes(buf[p:end]).decode()
    except UnicodeDecodeError as exc:
        raise _fail(pos, "properties are not UTF-8") from exc
    return MessageExt(
        total, magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts,
        (format_host_ip(born_ip), born_port), store_ts, (format_host_ip(store_ip), store_port),
        reconsume, prepared, body, topic, props,
        (store_ip + _MSGID_TAIL.pack(store_port, phy)).hex().upper(),
    )  # fmt: skip


def decode_messages(buf: bytes | bytearray | memoryview, *, read_body: bool = True) -> list[MessageExt]:
    """Decode a pull/query body: complete records back to back, nothing else."""
    out: list[MessageExt] = []
    pos, n = 0, len(buf)
    while pos < n:
        msg = decode_message(buf, pos, read_body=read_body)
        out.append(msg)
        pos += msg.store_size
    return out


# --------------------------------------------------------------------------------------------
# batch


@dataclass(slots=True, frozen=True)
class BatchItem:
    flag: int
    body: bytes
    properties_str: str


_BATCH_HEAD = struct.Struct(
    ">"
    "i"  # TOTALSIZE
    "i"  # MAGICCODE (0)
    "i"  # BODYCRC (0)
    "i"  # FLAG
    "i"  # BODYLENGTH
)


def encode_batch(items: Iterable[tuple[int, bytes, Mapping[str, str] | str]]) -> bytes:
    """Java ``MessageDecoder.encodeMessages`` for ``(flag, body, properties)`` items."""
    parts: list[bytes] = []
    for flag, body, props in items:
        pb = (props if isinstance(props, str) else properties_to_string(props)).encode()
        if len(pb) > MAX_PROPERTIES_LENGTH:
            raise ValueError(f"properties longer than {MAX_PROPERTIES_LENGTH} bytes")
        total = _BATCH_HEAD.size + len(body) + 2 + len(pb)
        parts += (_BATCH_HEAD.pack(total, 0, 0, flag, len(body)), body, PROPS_LEN.pack(len(pb)), pb)
    return b"".join(parts)


def decode_batch(body: bytes | bytearray | memoryview) -> list[BatchItem]:
    """Split a batch body; raises :class:`MessageDecodeError` if any item is inconsistent."""
    out: list[BatchItem] = []
    pos, n = 0, len(body)
    if n == 0:
        raise MessageDecodeError("empty batch body")
    head = _BATCH_HEAD.size
    while pos < n:
        if n - pos < head + 2:
            raise MessageDecodeError(f"truncated batch item at {pos}")
        total, _, _, flag, body_len = _BATCH_HEAD.unpack_from(body, pos)
        if total < head + 2 or total > n - pos:
            raise MessageDecodeError(f"batch item at {pos}: total size {total} out of range")
        if body_len < 0 or head + body_len + 2 > total:
            raise MessageDecodeError(f"batch item at {pos}: body length {body_len} out of range")
        p = pos + head + body_len
        (props_len,) = PROPS_LEN.unpack_from(body, p)
        if props_len < 0 or head + body_len + 2 + props_len != total:
            raise MessageDecodeError(f"batch item at {pos}: properties length {props_len} inconsistent")
        try:
            props = bytes(body[p + 2 : pos + total]).decode()
        except UnicodeDecodeError as exc:
            raise MessageDecodeError(f"batch item at {pos}: properties are not UTF-8") from exc
        out.append(BatchItem(flag, bytes(body[pos + head : p]), props))
        pos += total
    return out
