"""On-disk layouts of the store; all integers big-endian.

Directory (``storePathRootDir``)::

    commitlog/<20-digit start offset>          CommitLog segments (records: see remoting.protocol.message)
    consumequeue/<topic>/<queueId>/<20-digit>  ConsumeQueue files, named by byte offset of the first unit
    index/<yyyyMMddHHmmssSSS>                  index files, named by local creation time
    checkpoint                                 one 4 KiB page
    abort                                      exists while a store is open; gone after a clean close
    lock                                       flock()ed by the process that has the store open

Every mapped file has its full size before it is mapped (sparse, as RocketMQ's: ``ftruncate``;
whole CommitLog segments get their blocks at once only with ``warmMapedFileEnable``), so
untouched space reads as zeros and a zero TOTALSIZE / zero unit marks the end of written data.
The CommitLog reserves blocks (``posix_fallocate``) a step ahead of its writes, so a full disk
is a refused put (14), never a SIGBUS (``mapped_file.MappedFile.ensure``).

ConsumeQueue unit (20 bytes; logical offset n lives at byte n*20)::

    0  8 commitLogOffset   int64
    8  4 size              int32   (Integer.MAX_VALUE with offset 0 = blank padding unit)
   12  8 tagsCode          int64   tag hash, or the delivery time for SCHEDULE_TOPIC_XXXX

Index file = header (40) + hashSlotNum slots (4 each) + indexNum entries (20 each)::

    header  0 8 beginTimestamp   8 8 endTimestamp   16 8 beginPhyOffset   24 8 endPhyOffset
           32 4 hashSlotCount   36 4 indexCount (starts at 1; entry 0 unused)
    slot    int32 index number of the newest entry of that bucket (0 = empty)
    entry   0 4 keyHash  4 8 phyOffset  12 4 timeDiff (s since beginTimestamp)  16 4 prevIndex

CommitLog record: the layout is ``remoting.protocol.message``'s (``RECORD_PREFIX_STRUCTS``, one
Struct per host family, then BODY, TOPICLEN 1, TOPIC, PROPERTIESLENGTH 2, PROPERTIES). The store
describes the prefix once more, field by field (``record_fields``), only to derive what its
scans need: the skipping structs (``record_struct``: one ``unpack_from`` of just the fields a
scan reads, docs/development.md), field offsets (``record_offset``) and the index of a field in a full
prefix's unpacked tuple (``RECORD_FIELD_INDEX``). tests/store/test_store_layout.py checks the
table against ``RECORD_PREFIX_STRUCTS`` for every host family.

Checkpoint (4096 bytes, mapped)::

    0 8 physicMsgTimestamp   store time of the last flushed CommitLog record
    8 8 logicsMsgTimestamp   store time of the last flushed ConsumeQueue unit
   16 8 indexMsgTimestamp    store time of the last flushed index entry
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from pocketmq.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE,
    STOREHOSTADDRESS_V6_FLAG,
)

__all__ = [
    "BLANK_MAGIC_CODE",
    "CHECKPOINT_SIZE",
    "CHECKPOINT_STRUCT",
    "CQ_BLANK_SIZE",
    "CQ_UNIT",
    "CQ_UNIT_SIZE",
    "INDEX_ENTRY",
    "INDEX_ENTRY_SIZE",
    "INDEX_HEADER",
    "INDEX_HEADER_SIZE",
    "INDEX_SLOT",
    "INDEX_SLOT_SIZE",
    "MESSAGE_MAGIC_CODE",
    "OS_PAGE_SIZE",
    "PUT_PREFIX_STRUCTS",
    "RECORD_FIELD_INDEX",
    "RECORD_INDEX_WALK_V4",
    "RECORD_SCAN_V4",
    "SCHEDULE_TOPIC",
    "STORE_STAMP",
    "STORE_TAIL_STRUCTS",
    "STORE_TIMESTAMP_AT",
    "SYSFLAG_AT",
    "file_name_of",
    "offset_of_file_name",
    "record_fields",
    "record_offset",
    "record_struct",
]

OS_PAGE_SIZE = 4096
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

CQ_UNIT = struct.Struct(
    ">"
    "q"  # commitLogOffset
    "i"  # size
    "q"  # tagsCode
)
CQ_UNIT_SIZE = CQ_UNIT.size  # 20
CQ_BLANK_SIZE = 0x7FFFFFFF  # size of a padding unit (with offset 0, tags 0)

INDEX_HEADER = struct.Struct(
    ">"
    "q"  # beginTimestamp
    "q"  # endTimestamp
    "q"  # beginPhyOffset
    "q"  # endPhyOffset
    "i"  # hashSlotCount
    "i"  # indexCount
)
INDEX_HEADER_SIZE = INDEX_HEADER.size  # 40
INDEX_SLOT = struct.Struct(">i")
INDEX_SLOT_SIZE = INDEX_SLOT.size
INDEX_ENTRY = struct.Struct(
    ">"
    "i"  # keyHash
    "q"  # phyOffset
    "i"  # timeDiff (seconds)
    "i"  # prevIndex
)
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 20

CHECKPOINT_STRUCT = struct.Struct(
    ">"
    "q"  # physicMsgTimestamp
    "q"  # logicsMsgTimestamp
    "q"  # indexMsgTimestamp
)
CHECKPOINT_SIZE = OS_PAGE_SIZE


def record_fields(host_flags: int = 0) -> tuple[tuple[str, str], ...]:
    """The record prefix up to BODYLENGTH as ``(name, struct code)`` pairs, for the host family
    in ``host_flags`` (``sysFlag & HOST_FLAGS_MASK``: IPv6 hosts hold 16 address bytes)."""
    born = 16 if host_flags & BORNHOST_V6_FLAG else 4
    store = 16 if host_flags & STOREHOSTADDRESS_V6_FLAG else 4
    return (
        ("TOTALSIZE", "i"),
        ("MAGICCODE", "i"),
        ("BODYCRC", "i"),
        ("QUEUEID", "i"),
        ("FLAG", "i"),
        ("QUEUEOFFSET", "q"),
        ("PHYSICALOFFSET", "q"),
        ("SYSFLAG", "i"),
        ("BORNTIMESTAMP", "q"),
        ("BORNHOST", f"{born}s"),
        ("BORNHOST_PORT", "i"),
        ("STORETIMESTAMP", "q"),
        ("STOREHOST", f"{store}s"),
        ("STOREHOST_PORT", "i"),
        ("RECONSUMETIMES", "i"),
        ("PREPARED_TRANSACTION_OFFSET", "q"),
        ("BODYLENGTH", "i"),
    )


def record_offset(name: str, host_flags: int = 0) -> int:
    """Byte offset of field ``name`` in a record of that host family."""
    fmt = ">"
    for field, code in record_fields(host_flags):
        if field == name:
            return struct.calcsize(fmt)
        fmt += code
    raise KeyError(name)


def record_struct(*keep: str) -> struct.Struct:
    """A Struct over the IPv4 record prefix that unpacks only the fields in ``keep`` (in
    record order) and skips the others as pad bytes; its size is the whole prefix's."""
    fmt = ">"
    skip = 0
    for field, code in record_fields():
        if field in keep:
            fmt += (f"{skip}x" if skip else "") + code
            skip = 0
        else:
            skip += struct.calcsize(">" + code)
    return struct.Struct(fmt + (f"{skip}x" if skip else ""))


#: the fields a put packs as one bytes part, its "store tail" (the store host, RECONSUMETIMES and
#: PREPARED_TRANSACTION_OFFSET: the same bytes for every plain send to a broker, made once)
_STORE_TAIL = ("STOREHOST", "STOREHOST_PORT", "RECONSUMETIMES", "PREPARED_TRANSACTION_OFFSET")


def _put_structs(host_flags: int) -> tuple[struct.Struct, struct.Struct]:
    """The record prefix with STORETIMESTAMP and the store tail as one ``s`` field
    (``CommitLog.put_message``: 13 values to pack instead of 17; the stamped tail is made once a
    millisecond), and the tail's own Struct; the prefix's bytes are the same."""
    fields = record_fields(host_flags)
    names = [name for name, _code in fields]
    a, b = names.index(_STORE_TAIL[0]), names.index(_STORE_TAIL[-1]) + 1
    tail = ">" + "".join(code for _name, code in fields[a:b])
    head = "".join(code for _name, code in fields[: a - 1])
    rest = "".join(code for _name, code in fields[b:])
    assert names[a - 1] == "STORETIMESTAMP"
    return struct.Struct(f">{head}{STORE_STAMP.size + struct.calcsize(tail)}s{rest}"), struct.Struct(tail)


#: STORETIMESTAMP alone: packed before the store tail to make a put's stamped tail
STORE_STAMP = struct.Struct(">q")
#: by host family (``sysFlag & HOST_FLAGS_MASK``): the prefix Struct of a put that packs
#: STORETIMESTAMP and the store tail (``STORE_TAIL_STRUCTS``) as bytes; same size and bytes as
#: ``RECORD_PREFIX_STRUCTS``
PUT_PREFIX_STRUCTS = {
    f: _put_structs(f)[0]
    for f in (0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
}
#: the store tail's Struct by the store host's address length (4: IPv4, 16: IPv6)
STORE_TAIL_STRUCTS = {4: _put_structs(0)[1], 16: _put_structs(STOREHOSTADDRESS_V6_FLAG)[1]}


#: position of each field in the tuple a full prefix Struct (``RECORD_PREFIX_STRUCTS``) unpacks
RECORD_FIELD_INDEX = {field: i for i, (field, _code) in enumerate(record_fields())}
#: what a CommitLog scan (recovery, reput, ``records.validate_record``) reads of an IPv4 record
RECORD_SCAN_V4 = record_struct(
    "TOTALSIZE", "MAGICCODE", "BODYCRC", "QUEUEID", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
    "STORETIMESTAMP", "PREPARED_TRANSACTION_OFFSET", "BODYLENGTH",
)  # fmt: skip
#: what the index process's walk (``index.scan.scan_keys``) reads of an IPv4 record
RECORD_INDEX_WALK_V4 = record_struct("TOTALSIZE", "MAGICCODE", "SYSFLAG", "STORETIMESTAMP", "BODYLENGTH")
#: where SYSFLAG is (the same in every host family)
SYSFLAG_AT = record_offset("SYSFLAG")
#: where STORETIMESTAMP is, by the record's BORNHOST family (``sysFlag & BORNHOST_V6_FLAG``)
STORE_TIMESTAMP_AT = {
    0: record_offset("STORETIMESTAMP"),
    BORNHOST_V6_FLAG: record_offset("STORETIMESTAMP", BORNHOST_V6_FLAG),
}


def file_name_of(offset: int) -> str:
    """20-digit zero-padded file name for a start offset."""
    return f"{offset:020d}"


def offset_of_file_name(name: str) -> int | None:
    """Start offset of a 20-digit file name, ``None`` for anything else (tmp files, junk)."""
    if len(name) == 20 and name.isdigit():
        return int(name)
    return None


#: a shape's record packer (``PUT_SHAPES``): its Struct's bound ``pack_into``, then the shape's
#: constant fields as bytes: TOTALSIZE + MAGICCODE, and TOPICLEN + TOPIC + PROPERTIESLENGTH
PutShape = tuple[Callable[..., None], bytes, bytes]
#: whole-record packers of ``CommitLog.put_message`` by (prefix Struct, topic head, body length,
#: properties length): prefix, BODY, TOPICLEN + TOPIC, PROPERTIESLENGTH and PROPERTIES packed
#: in one ``pack_into`` (no joined copy of the record, no 1 KiB+ bytes made and freed a put)
PUT_SHAPES: dict[tuple[struct.Struct, bytes, int, int], PutShape] = {}
#: at most this many shapes get a Struct (~3.5k instructions to make one): a put of any other
#: shape packs its prefix and joins the rest, so bodies of ever new sizes make none
PUT_SHAPES_MAX = 1024
_MAGIC = struct.pack(">i", MESSAGE_MAGIC_CODE)


def put_shape(prefix: struct.Struct, head: bytes, blen: int, plen: int) -> PutShape | None:
    """The whole record's packer for this shape, now kept in ``PUT_SHAPES``, or None once that
    holds ``PUT_SHAPES_MAX``. The fields every record of the shape shares are one ``s`` each,
    made here (a put converts 3 ints fewer, ~0.3k instructions): TOTALSIZE with MAGICCODE, and
    TOPICLEN + TOPIC with PROPERTIESLENGTH (RocketMQ's short: properties are at most 32767
    bytes, MAX_PROPERTIES_LENGTH). Its arguments: TOTALSIZE + MAGICCODE, then the prefix's from
    BODYCRC, BODY, TOPICLEN + TOPIC + PROPERTIESLENGTH, PROPERTIES."""
    if len(PUT_SHAPES) >= PUT_SHAPES_MAX:
        return None
    fmt = prefix.format
    assert fmt.startswith(">ii")  # TOTALSIZE, MAGICCODE
    size = prefix.size + blen + len(head) + 2 + plen
    rec = struct.Struct(f">8s{fmt[3:]}{blen}s{len(head) + 2}s{plen}s")
    shape = PUT_SHAPES[prefix, head, blen, plen] = (
        rec.pack_into,
        struct.pack(">i", size) + _MAGIC,
        head + struct.pack(">H", plen),
    )
    return shape
