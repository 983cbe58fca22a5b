"""Encoding of a batch put given as shared fields + ``(flag, body, properties)`` items.

The broker's SEND_BATCH_MESSAGE path hands the store the request header's fields once (a
template :class:`MessageInner`, its body/flag/properties unused) and one small tuple per
message instead of a ``MessageInner`` each (~0.7 µs saved per message). Each item's body may
be a ``memoryview`` into the request body: it is then copied only by the join that forms the
batch's bytes, not sliced first. Each record is the CommitLog message layout
(``remoting.protocol.message``), identical to what ``CommitLog.put_messages`` writes for the
same messages:

======  ========================  =============================================
part    bytes                     from
======  ========================  =============================================
prefix  ``RECORD_PREFIX_STRUCTS``  size, magic, body CRC, queue id, item flag, queue
                                  offset, phy offset, then sysFlag, template's born
                                  time/host, store time/host, reconsume times,
                                  prepared offset 0 (bytes packed once a batch),
                                  body length
body    n                         item body
topic   1 + t                     length byte + topic (UTF-8)
props   2 + m                     length + item properties (UTF-8)
======  ========================  =============================================

:func:`encode_copies` encodes END_TRANSACTION's committed copies (``CommitLog.put_run``'s
``copies``) from the halves they copy: the same layout, the half's magic code and body CRC
bytes taken from its record when it is in the current segment.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from mmap import mmap
from operator import and_, itemgetter
from typing import TYPE_CHECKING

from pocketmq.remoting.protocol.message import (
    HOST_FLAGS_MASK,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    PROPS_LEN,
    RECORD_PREFIX_STRUCTS,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    host_flags,
)
from pocketmq.store.log.crc import FAST_CRC_MIN, crc32_long, crc32_short
from pocketmq.store.log.layout import record_fields, record_offset
from pocketmq.store.message_inner import MessageInner

if TYPE_CHECKING:
    from pocketmq.store.log.mapped_file import MappedFile

__all__ = [
    "PROPS_LENS",
    "BatchBody",
    "BatchItem",
    "BatchPut",
    "BodyStrings",
    "Encoded",
    "HalfCopy",
    "encode_bodies",
    "encode_copies",
    "encode_items",
]

#: one message of a batch put: (flag, body, properties string ``k\x01v\x02...``)
BatchItem = tuple[int, "bytes | memoryview", str]

_body = itemgetter(1)
#: a batch body item's BODYLENGTH (``BatchBody.heads``)
_blen = itemgetter(2)

#: refusals (mapped to the CommitLog's shared PutResults by the caller)
TOO_LONG_PROPS = 1
ILLEGAL = 2


def _split_prefix(flags: int) -> tuple[struct.Struct, struct.Struct]:
    """The record prefix of host family ``flags`` as (item part, shared part): the shared
    part, SYSFLAG to PREPARED_TRANSACTION_OFFSET (the same in every record of a batch), packed
    once; the item part packs TOTALSIZE to PHYSICALOFFSET, those bytes (one ``s`` field) and
    BODYLENGTH: 9 values a record instead of 17 (~40 % of the pack's time)."""
    codes = [code for _, code in record_fields(flags)]
    shared = struct.Struct(">" + "".join(codes[7:16]))
    return struct.Struct(">" + "".join(codes[:7]) + f"{shared.size}s" + codes[16]), shared


#: ``_split_prefix`` of each host family (the prefix's HOST_FLAGS_MASK bits)
_SPLIT_PREFIXES = {flags: _split_prefix(flags) for flags in RECORD_PREFIX_STRUCTS}


def _body_prefixes(flags: int) -> tuple[struct.Struct, struct.Struct]:
    """``_split_prefix``'s item part of host family ``flags`` for ``encode_body``, as (general,
    low): QUEUEOFFSET and PHYSICALOFFSET as ``q``, an empty ``0s`` and ``q`` in the general
    one; in the low one, for a batch whose queue offsets are below 2^32 and whose CommitLog
    offsets share their high 4 bytes, a zero pad and the queue offset's low 4 bytes as ``I``,
    the CommitLog offset's high 4 bytes as ``s`` and its low 4 bytes as ``I`` (a big-endian
    ``q`` costs ``pack`` a generic int conversion, ~100 instructions more than an ``I``). The
    same arguments either way."""
    item_part, shared = _SPLIT_PREFIXES[flags]
    codes = [code for _, code in record_fields(flags)]
    fmt = ">" + "".join(codes[:5]) + "{}" + f"{shared.size}s" + codes[16]
    general = struct.Struct(fmt.format(codes[5] + "0s" + codes[6]))
    low = struct.Struct(fmt.format("4xI4sI"))
    assert general.size == low.size == item_part.size  # (the same layout, checked once at import)
    return general, low


#: ``_body_prefixes`` of each host family
_BODY_PREFIXES = {flags: _body_prefixes(flags) for flags in RECORD_PREFIX_STRUCTS}


@dataclass(slots=True)
class Encoded:
    """An encoded batch: record parts, sizes, properties, total size and the sysFlag of every
    record (one int when they share it, which makes the batch one reput entry). ``packed``:
    for ``encode_body``'s batch of equal items, its Struct and arguments instead of parts
    (``parts`` empty), packed where it is written (:meth:`write`)."""

    parts: list[bytes | memoryview]
    sizes: list[int]
    props: list[str]
    total: int
    flags: int | list[int]
    packed: tuple[struct.Struct, list[object]] | None = None

    def joined(self) -> bytes:
        """The batch's bytes."""
        packed = self.packed
        return b"".join(self.parts) if packed is None else packed[0].pack(*packed[1])

    def write(self, mf: MappedFile, pos: int, through_fd: bool) -> None:
        """Write the batch into ``mf`` at ``pos`` (``MappedFile.write``); a packed one through
        the mapping is packed into it, not into a bytes object copied in after."""
        packed = self.packed
        if packed is None or through_fd:
            mf.write(pos, self.joined(), through_fd)
        else:
            packed[0].pack_into(mf.mm, pos, *packed[1])


@dataclass(slots=True)
class BatchBody:
    """A SEND_BATCH_MESSAGE body (``MessageDecoder.encodeMessages``' items back to back) that
    the broker checked (``batch_body.checked_body``), stored without an item per message: each
    record's properties are the item's bytes followed by ``tail`` (the broker's properties,
    after a separator when the items' do not end with one), as RocketMQ's
    ``MessageExtBatchEncoder`` copies them (no decode and encode again).

    ``heads``: each item's (TOTALSIZE, FLAG, BODYLENGTH), empty when ``equal`` holds them
    (:meth:`item_heads`); ``props``: each item's properties bytes; ``strings``: each
    record's stored properties (for reput); ``equal``: for a body of equal-sized items, their
    TOTALSIZE, their BODYLENGTH, each one's flag and each one's body as bytes (``encode_body``
    packs such a batch in one call), else None. Every item has a body of at least 0 bytes,
    properties of at least one byte and a stored properties length of at most
    ``MAX_PROPERTIES_LENGTH``."""

    data: bytes
    heads: list[tuple[int, int, int]]
    props: list[bytes]
    strings: list[str]
    tail: bytes
    equal: tuple[int, int, tuple[int, ...], tuple[bytes, ...]] | None = None

    def item_heads(self) -> list[tuple[int, int, int]]:
        """Each item's (TOTALSIZE, FLAG, BODYLENGTH)."""
        equal = self.equal
        if equal is None:
            return self.heads
        total, blen, flags, _ = equal
        return list(zip(repeat(total), flags, repeat(blen)))


class BodyStrings(list[str]):
    """A :class:`BatchBody`'s stored properties strings as its encode hands them to reput
    (``Encoded.props``), with ``tail``, the part every string ends with (``BatchBody.tail``
    decoded): reput's dispatch reads each record's own part and parses the shared tail once
    a batch (``dispatch.appended``)."""

    __slots__ = ("tail",)
    tail: str


#: what a batch put takes: its messages as items, or a checked batch body
BatchPut = Sequence[BatchItem] | BatchBody

#: an item's head in a batch body: TOTALSIZE, MAGICCODE and BODYCRC (skipped), FLAG, BODYLENGTH
_ITEM_HEAD = 20


def encode_body(
    template: MessageInner, batch: BatchBody, head: bytes, phy: int, qoff: int, now: int, max_body: int
) -> Encoded | int:
    """:func:`encode_items` of a checked batch body, or :data:`ILLEGAL` for a body over
    ``max_body``: the same records, one pass over the items, each record's properties the
    item's bytes then ``batch.tail`` (none decoded, joined or encoded again)."""
    born_ip, born_port = template.born_host
    store_ip, store_port = template.store_host
    sys_flag = (template.sys_flag & ~HOST_FLAGS_MASK) | host_flags(born_ip, store_ip)
    general, low = _BODY_PREFIXES[sys_flag & HOST_FLAGS_MASK]
    shared = _SPLIT_PREFIXES[sys_flag & HOST_FLAGS_MASK][1]
    tail = batch.tail
    tail_len = len(tail)
    # a record's size from its item's TOTALSIZE (head, body, 2-byte length, properties)
    grow = general.size + len(head) + tail_len - _ITEM_HEAD
    # (the batch's size is exact: every item's TOTALSIZE grown by ``grow``)
    count = len(batch.props)
    pack, high, p = _offsets_pack(general, low, phy, qoff, count, len(batch.data) + count * grow)
    queue_id = template.queue_id
    mid = shared.pack(
        sys_flag, template.born_timestamp, born_ip, born_port, now, store_ip, store_port,
        template.reconsume_times, 0,
    )  # fmt: skip
    equal = batch.equal
    if equal is not None and high:
        # (equal items, offsets as their low 4 bytes: the whole batch in one pack)
        if equal[1] > max_body:
            return ILLEGAL
        packed = _pack_equal(batch, equal, mid, queue_id, head, tail, high, p, qoff, grow)
        size = packed[0].size
        return Encoded([], [size // count] * count, _strings(batch), size, sys_flag, packed)
    heads = batch.item_heads()
    if max(map(_blen, heads)) > max_body:
        return ILLEGAL
    crc32 = crc32_long if min(map(_blen, heads)) >= FAST_CRC_MIN else crc32_short
    lens = PROPS_LENS
    view = memoryview(batch.data)
    parts: list[bytes | memoryview] = []
    add = parts.extend
    sizes: list[int] = []
    add_size = sizes.append
    start = p
    pos = _ITEM_HEAD  # (the body of the item at ``pos - _ITEM_HEAD``)
    # the topic and the properties length as one part, made again only when the length
    # changes (a batch's records mostly share it): one compare a record, and the join that
    # copies the parts into the mapping takes one part fewer each
    last_plen = -1
    head_len = head
    for (total, flag, blen), props in zip(heads, batch.props, strict=True):
        body = view[pos : pos + blen]
        size = grow + total
        plen = total - blen - 22 + tail_len
        if plen != last_plen:
            last_plen = plen
            head_len = head + (lens[plen] if plen < 1024 else PROPS_LEN.pack(plen))
        add(
            (
                pack(size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, flag, qoff, high, p, mid, blen),
                body,
                head_len,
                props,
                tail,
            )
        )  # fmt: skip
        add_size(size)
        pos += total
        p += size
        qoff += 1
    return Encoded(parts, sizes, _strings(batch), p - start, sys_flag)


def _strings(batch: BatchBody) -> BodyStrings:
    """``batch``'s stored properties strings for reput, with their shared tail."""
    # (list's own constructor, no __init__ frame: a copy of the strings, their tail set after)
    strings = BodyStrings(batch.strings)
    strings.tail = batch.tail.decode()
    return strings


#: one record of a batch of equal items in ``_pack_equal``'s Struct (after its first 8 bytes,
#: TOTALSIZE and MAGICCODE): BODYCRC, QUEUEID, FLAG, QUEUEOFFSET (zero pad, low 4 bytes),
#: PHYSICALOFFSET (high 4 bytes, low 4 bytes), the shared part with BODYLENGTH, body, topic
#: with the properties length, properties, then the tail with the next record's TOTALSIZE and
#: MAGICCODE (the last record: the tail alone). The constant fields are ``s`` (a memcpy each)
_EQUAL_RECORD = "I4si4xI4sI{}s{}s{}s{}s"
#: args a record of it takes, and the place of each in them (after the first one)
_EQUAL_ARGS = 11
_CRC, _QUEUE, _FLAG, _QOFF, _HIGH, _PHY, _MID, _BODY, _HEAD, _PROPS, _TAIL = range(1, 12)
#: (count, shared part's size, body length, topic head's size, item properties length, tail
#: length) -> the Struct of a whole batch of equal records; kept few (a Struct of n records
#: holds ~12 n codes)
_EQUAL: dict[tuple[int, int, int, int, int, int], struct.Struct] = {}
_EQUAL_MAX = 16
_pack_size_magic = struct.Struct(">ii").pack
_pack_int = struct.Struct(">i").pack


def _pack_equal(
    batch: BatchBody,
    equal: tuple[int, int, tuple[int, ...], tuple[bytes, ...]],
    mid: bytes,
    queue_id: int,
    head: bytes,
    tail: bytes,
    high: bytes,
    p: int,
    qoff: int,
    grow: int,
) -> tuple[struct.Struct, list[object]]:
    """``encode_body``'s records of a batch of equal items as one ``pack`` (``Encoded.packed``):
    a Struct made per batch shape and cached and its arguments, placed by one slice assignment
    per field (C-level) instead of a pack, a memoryview slice and a tuple per record. ``high``,
    ``p`` and ``qoff``: the CommitLog offsets' high 4 bytes, the first record's PHYSICALOFFSET
    and QUEUEOFFSET low 4 bytes (``_offsets_pack``'s low form)."""
    total, blen, flags, bodies = equal
    count = len(bodies)
    size = grow + total
    plen = total - blen - 22
    tail_len = len(tail)
    key = (count, len(mid), blen, len(head), plen, tail_len)
    packer = _EQUAL.get(key)
    if packer is None:
        if len(_EQUAL) >= _EQUAL_MAX:
            _EQUAL.clear()
        record = _EQUAL_RECORD.format(len(mid) + 4, blen, len(head) + 2, plen)
        packer = _EQUAL[key] = struct.Struct(
            ">8s" + f"{record}{tail_len + 8}s" * (count - 1) + f"{record}{tail_len}s"
        )
    crc32 = crc32_long if blen >= FAST_CRC_MIN else crc32_short
    size_magic = _pack_size_magic(size, MESSAGE_MAGIC_CODE)
    stored = plen + tail_len
    args: list[object] = [size_magic] * (count * _EQUAL_ARGS + 1)
    args[_CRC::_EQUAL_ARGS] = map(and_, map(crc32, bodies), repeat(0x7FFFFFFF, count))
    args[_QUEUE::_EQUAL_ARGS] = [_pack_int(queue_id)] * count
    args[_FLAG::_EQUAL_ARGS] = flags
    args[_QOFF::_EQUAL_ARGS] = range(qoff, qoff + count)
    args[_HIGH::_EQUAL_ARGS] = [high] * count
    args[_PHY::_EQUAL_ARGS] = range(p, p + count * size, size)
    args[_MID::_EQUAL_ARGS] = [mid + _pack_int(blen)] * count
    args[_BODY::_EQUAL_ARGS] = bodies
    head_len = head + (PROPS_LENS[stored] if stored < 1024 else PROPS_LEN.pack(stored))
    args[_HEAD::_EQUAL_ARGS] = [head_len] * count
    args[_PROPS::_EQUAL_ARGS] = batch.props
    args[_TAIL::_EQUAL_ARGS] = [tail + size_magic] * count
    args[-1] = tail
    return packer, args


def encode_items(
    template: MessageInner,
    items: Sequence[BatchItem] | BatchBody,
    head: bytes,
    phy: int,
    qoff: int,
    now: int,
    max_body: int,
    prepared: int = 0,
) -> Encoded | int:
    """Records of ``items`` starting at CommitLog offset ``phy`` and queue offset ``qoff``,
    or a refusal code (:data:`TOO_LONG_PROPS`, :data:`ILLEGAL`). ``prepared``: the records'
    PREPARED_TRANSACTION_OFFSET (0 for a broker batch, which holds no transaction records).
    A :class:`BatchBody` goes to :func:`encode_body`."""
    if isinstance(items, BatchBody):
        return encode_body(template, items, head, phy, qoff, now, max_body)
    born_ip, born_port = template.born_host
    store_ip, store_port = template.store_host
    sys_flag = (template.sys_flag & ~HOST_FLAGS_MASK) | host_flags(born_ip, store_ip)
    item_part, shared = _SPLIT_PREFIXES[sys_flag & HOST_FLAGS_MASK]
    pack = item_part.pack
    fixed = item_part.size + len(head) + 2
    queue_id = template.queue_id
    mid = shared.pack(
        sys_flag, template.born_timestamp, born_ip, born_port, now, store_ip, store_port,
        template.reconsume_times, prepared,
    )  # fmt: skip
    # (the shortest body, C-level: no generator frame resumed per item)
    crc32 = crc32_long if min(map(len, map(_body, items))) >= FAST_CRC_MIN else crc32_short
    pack_len = PROPS_LEN.pack
    magic = MESSAGE_MAGIC_CODE
    parts: list[bytes | memoryview] = []
    add = parts.extend
    sizes: list[int] = []
    add_size = sizes.append
    props_list: list[str] = []
    add_props = props_list.append
    start = phy
    # the item before's properties: the same string object is encoded and checked once (the
    # op records of an END_TRANSACTION run share one)
    last: str | None = None
    props_b = plen_b = b""
    plen = 0
    for flag, body, props in items:
        if props is not last:
            last = props
            props_b = props.encode()
            plen = len(props_b)
            if plen > MAX_PROPERTIES_LENGTH or (plen and not props_b[-1]):  # see records.validate_record
                return TOO_LONG_PROPS
            plen_b = pack_len(plen)
        blen = len(body)
        if blen > max_body:
            return ILLEGAL
        size = fixed + blen + plen
        add(
            (
                # inline of remoting.protocol.message.encode_message
                pack(size, magic, crc32(body) & 0x7FFFFFFF, queue_id, flag, qoff, phy, mid, blen),
                body,
                head,
                plen_b,
                props_b,
            )
        )  # fmt: skip
        add_size(size)
        add_props(props)
        phy += size
        qoff += 1
    return Encoded(parts, sizes, props_list, phy - start, sys_flag)


def _shared_parts(flags: int) -> tuple[struct.Struct, struct.Struct, struct.Struct]:
    """``_split_prefix`` of host family ``flags`` for records that also share their magic code,
    queue id and flag: those three (8 bytes, then 4 after the CRC) as ``s`` fields, packed once
    a run (a bytes field costs ``pack`` a memcpy, an int field a conversion). As (general,
    low, shared): QUEUEOFFSET and PHYSICALOFFSET (``q``, then an empty ``0s`` and ``q``) in
    the general one; in the low one, for a run whose queue offsets are below 2^32 and whose
    CommitLog offsets share their high 4 bytes, their low 4 bytes as ``I`` after the high
    bytes (zero pad, then the CommitLog offset's as a 4-byte ``s``): a big-endian ``q`` costs
    ``pack`` a generic int conversion, ~100 instructions more than an ``I``. The same
    arguments either way."""
    shared = _SPLIT_PREFIXES[flags][1]
    codes = [code for _, code in record_fields(flags)]
    # (codes 1 to 4: magic, body CRC, queue id, flag, each 4 bytes; 5 and 6: the two offsets)
    fmt = ">" + codes[0] + "4s" + codes[2] + "8s{}" + f"{shared.size}s" + codes[16]
    low = struct.Struct(fmt.format("4xI4sI"))
    general = struct.Struct(fmt.format(codes[5] + "0s" + codes[6]))
    assert low.size == general.size  # (the same layout, checked once at import)
    return general, low, shared


#: ``_shared_parts`` of each host family
_SHARED_PARTS = {flags: _shared_parts(flags) for flags in RECORD_PREFIX_STRUCTS}
_MAGIC = struct.pack(">i", MESSAGE_MAGIC_CODE)
#: an 8-byte field packed once a run (a time, an offset's high bytes)
_pack_time = struct.Struct(">q").pack
_pack_queue_flag = struct.Struct(">ii").pack


def _offsets_pack(
    general: struct.Struct, low: struct.Struct, phy: int, qoff: int, count: int, size: int
) -> tuple[Callable[..., bytes], bytes, int]:
    """How ``count`` records from CommitLog offset ``phy`` (``size`` bytes at most) and queue
    offset ``qoff`` pack their offsets: ``low``'s pack with the CommitLog offsets' high 4 bytes
    and the low 4 bytes of ``phy`` when every offset stays below the next multiple of 2^32,
    else ``general``'s with no high bytes and ``phy`` itself (``_body_prefixes``)."""
    p = phy & 0xFFFFFFFF
    if qoff >= 0 and qoff + count <= 0xFFFFFFFF and p + size <= 0xFFFFFFFF:
        return low.pack, _pack_time(phy)[:4], p
    return general.pack, b"", phy


def encode_bodies(
    template: MessageInner,
    bodies: Sequence[bytes],
    head: bytes,
    phy: int,
    qoff: int,
    now: int,
    max_body: int,
) -> Encoded | int:
    """:func:`encode_items` of ``(template.flag, body, template.properties)`` for each of
    ``bodies``, the same bytes (END_TRANSACTION's op records of a loop turn: one properties
    string, flag 0): the properties are encoded and checked once, every record's topic,
    properties length and properties are one part, and magic code, queue id and flag are
    packed once (~1k instructions fewer a record)."""
    props = template.properties
    if props.__class__ is not str or not bodies:
        return ILLEGAL
    props_b = props.encode()
    plen = len(props_b)
    if plen > MAX_PROPERTIES_LENGTH or (plen and not props_b[-1]):  # see records.validate_record
        return TOO_LONG_PROPS
    born_ip, born_port = template.born_host
    store_ip, store_port = template.store_host
    sys_flag = (template.sys_flag & ~HOST_FLAGS_MASK) | host_flags(born_ip, store_ip)
    item_part, low, shared = _SHARED_PARTS[sys_flag & HOST_FLAGS_MASK]
    tail = head + PROPS_LEN.pack(plen) + props_b
    fixed = item_part.size + len(tail)
    # (a bound of the run's size: every body at max_body); ``p`` / ``q`` are what is packed
    q = qoff
    pack, high, p = _offsets_pack(item_part, low, phy, qoff, len(bodies), len(bodies) * (fixed + max_body))
    start = p
    mid = shared.pack(
        sys_flag, template.born_timestamp, born_ip, born_port, now, store_ip, store_port,
        template.reconsume_times, 0,
    )  # fmt: skip
    magic = _MAGIC
    queue_flag = _pack_queue_flag(template.queue_id, template.flag)
    crc32 = crc32_long if min(map(len, bodies)) >= FAST_CRC_MIN else crc32_short
    parts: list[bytes | memoryview] = []
    add = parts.extend
    sizes: list[int] = []
    add_size = sizes.append
    for body in bodies:
        blen = len(body)
        if blen > max_body:
            return ILLEGAL
        size = fixed + blen
        add((pack(size, magic, crc32(body) & 0x7FFFFFFF, queue_flag, q, high, p, mid, blen), body, tail))
        add_size(size)
        p += size
        q += 1
    return Encoded(parts, sizes, [props] * len(sizes), p - start, sys_flag)


#: the properties length field of the usual lengths, made once (an index, not a pack, a record)
PROPS_LENS = [PROPS_LEN.pack(n) for n in range(1024)]

#: the committed copy of a half this process stored with ``put_message`` (END_TRANSACTION's
#: loop-turn run): (the half as stored, its properties string as stored, the real topic, the
#: real queue id, the half's CommitLog offset). The copy is the half with that topic and queue,
#: sysFlag transaction type COMMIT and PREPARED_TRANSACTION_OFFSET the half's offset; its body,
#: body CRC, flag, properties, born and store hosts, born time and reconsume times are the half's
HalfCopy = tuple[MessageInner, str, str, int, int]

_V4_CODES = [code for _, code in record_fields(0)]
#: the IPv4 record prefix with MAGICCODE and BODYCRC as one 8-byte field: a copy takes both from
#: its half's record (the same body, so the same CRC) instead of computing the CRC again; and
#: STORETIMESTAMP, the run's one store time, as 8 bytes packed once a run (a big-endian ``q``
#: costs ``pack`` a generic int conversion, ~200 instructions a field more than an ``8s``)
_COPY_PREFIX = struct.Struct(
    ">" + _V4_CODES[0] + "8s" + "".join(_V4_CODES[3:11]) + "8s" + "".join(_V4_CODES[12:])
)
_COPY_PREFIX_SIZE = _COPY_PREFIX.size
#: a copy's prefix from its half's record in the current segment: besides MAGICCODE and BODYCRC,
#: BORNTIMESTAMP with BORNHOST (16 bytes) and STOREHOST with RECONSUMETIMES (12 bytes) are the
#: half's bytes, read from its record instead of from the half's attributes and packed again
#: (two host tuples unpacked, a big-endian ``q`` and three ints converted)
_COPY_FROM_HALF = struct.Struct(
    ">" + _V4_CODES[0] + "8s" + "".join(_V4_CODES[3:8]) + "16s8s12s" + "".join(_V4_CODES[15:])
)
assert _COPY_FROM_HALF.size == _COPY_PREFIX_SIZE  # (the same layout, checked once at import)
#: those three fields of a half's record, as bytes (one ``unpack_from``; three slices of the
#: mapping cost more: a slice object and two int additions each)
_HALF_PARTS = struct.Struct(
    ">{}x8s{}x16s8x12s".format(
        record_offset("MAGICCODE"), record_offset("BORNTIMESTAMP") - record_offset("QUEUEID")
    )
)
assert _HALF_PARTS.size == record_offset("PREPARED_TRANSACTION_OFFSET")  # (STOREHOST, RECONSUMETIMES last)
#: a half's sysFlag bits a copy keeps (not the host bits, which ``host_flags`` sets, nor the
#: transaction type, which becomes COMMIT)
_COPY_KEEP = ~(HOST_FLAGS_MASK | TRANSACTION_ROLLBACK_TYPE)
_pack_crc = struct.Struct(">i").pack


def encode_copies(
    copies: Sequence[HalfCopy],
    heads: dict[str, bytes],
    head_of: Callable[[str], bytes | None],
    table: dict[tuple[str, int], int],
    queued: dict[tuple[str, int], int],
    mm: mmap,
    mm_from: int,
    phy: int,
    now: int,
    max_body: int,
    parts: list[bytes | memoryview],
    entries: list[tuple[int, int, str, int, int, int, int, int, str, tuple[list[int], list[str]] | None]],
) -> int:
    """Append the records of ``copies`` from CommitLog offset ``phy`` to ``parts`` (prefix,
    body, topic, properties length, properties each) and their ``AppendedRecord`` to
    ``entries``, the bytes ``CommitLog.put_message`` of each copy would write at store time
    ``now``; their total size, or -1 when one cannot go so (IPv6 hosts, a topic refused
    (``head_of`` None), a body over ``max_body``: the caller puts them one by one).

    ``heads``: the topic heads known, ``head_of`` makes one; a (topic, queue id)'s next queue
    offset is ``queued``'s (those the run took, updated here) or else ``table``'s.
    ``mm`` / ``mm_from``: the current segment's mapping and first offset: a half in it gives
    its copy its magic code and body CRC, born time and host, store host and reconsume times
    as its record's bytes (one ``unpack_from``, where the CRC is a pass over the body); one in
    an older segment has them computed and packed from the half's attributes. The properties are not checked again:
    ``put_message`` stored the half with the same string.
    """
    pack = _COPY_PREFIX.pack
    pack_from_half = _COPY_FROM_HALF.pack
    half_parts = _HALF_PARTS.unpack_from
    add = parts.extend
    entry = entries.append
    start = phy
    now_b = _pack_time(now)
    for half, props, topic, queue_id, prepared in copies:
        head = heads.get(topic) or head_of(topic)
        body = half.body
        blen = len(body)
        if head is None or blen > max_body or len(half.born_host[0]) != 4 or len(half.store_host[0]) != 4:
            return -1
        props_b = props.encode()
        plen = len(props_b)
        size = _COPY_PREFIX_SIZE + blen + len(head) + 2 + plen
        key = (topic, queue_id)
        qoff = queued.get(key)
        if qoff is None:
            qoff = table.get(key, 0)
        queued[key] = qoff + 1
        sys_flag = (half.sys_flag & _COPY_KEEP) | TRANSACTION_COMMIT_TYPE
        at = prepared - mm_from
        if at >= 0:  # (the half's record is in the current segment: its bytes, _COPY_FROM_HALF)
            magic_crc, born, store = half_parts(mm, at)
            prefix = pack_from_half(
                size, magic_crc, queue_id, half.flag, qoff, phy, sys_flag, born, now_b, store, prepared, blen
            )
        else:
            born_ip, born_port = half.born_host
            store_ip, store_port = half.store_host
            prefix = pack(
                size, _MAGIC + _pack_crc((crc32_long if blen >= FAST_CRC_MIN else crc32_short)(body) & 0x7FFFFFFF),
                queue_id, half.flag, qoff, phy, sys_flag, half.born_timestamp, born_ip, born_port, now_b,
                store_ip, store_port, half.reconsume_times, prepared, blen,
            )  # fmt: skip
        # (one extend of the record's five parts: four append calls fewer)
        add((prefix, body, head, PROPS_LENS[plen] if plen < 1024 else PROPS_LEN.pack(plen), props_b))
        entry((phy, size, topic, queue_id, qoff, now, sys_flag, prepared, props, None))
        phy += size
    return phy - start
