"""On-disk layouts of the store (reference §6); all integers big-endian.

Directory (``storePathRootDir``)::

    commitlog/<20-digit start offset>          CommitLog segments (records: see remoting.protocol.message)
    consumequeue/<topic>/<queueId>/<20-digit>  ConsumeQueue files, named by byte offset of the first unit
    index/<yyyyMMddHHmmssSSS>                  index files, named by local creation time
    checkpoint                                 one 4 KiB page
    abort                                      exists while a store is open; gone after a clean close
    lock                                       flock()ed by the process that has the store open

Every mapped file is preallocated to its full size (``posix_fallocate``) before it is mapped,
so writes into the mapping never need new disk blocks (no SIGBUS on a full disk) and untouched
space reads as zeros. A zero TOTALSIZE / zero unit therefore marks the end of written data.

ConsumeQueue unit (20 bytes; logical offset n lives at byte n*20)::

    0  8 commitLogOffset   int64
    8  4 size              int32   (Integer.MAX_VALUE with offset 0 = blank padding unit)
   12  8 tagsCode          int64   tag hash, or the delivery time for SCHEDULE_TOPIC_XXXX

Index file = header (40) + hashSlotNum slots (4 each) + indexNum entries (20 each)::

    header  0 8 beginTimestamp   8 8 endTimestamp   16 8 beginPhyOffset   24 8 endPhyOffset
           32 4 hashSlotCount   36 4 indexCount (starts at 1; entry 0 unused)
    slot    int32 index number of the newest entry of that bucket (0 = empty)
    entry   0 4 keyHash  4 8 phyOffset  12 4 timeDiff (s since beginTimestamp)  16 4 prevIndex

Checkpoint (4096 bytes, mapped)::

    0 8 physicMsgTimestamp   store time of the last flushed CommitLog record
    8 8 logicsMsgTimestamp   store time of the last flushed ConsumeQueue unit
   16 8 indexMsgTimestamp    store time of the last flushed index entry
"""

from __future__ import annotations

import struct

from pocketmq.remoting.protocol.message import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE

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
    "SCHEDULE_TOPIC",
    "file_name_of",
    "offset_of_file_name",
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


def file_name_of(offset: int) -> str:
    """20-digit zero-padded file name for a start offset."""
    return f"{offset:020d}"


def offset_of_file_name(name: str) -> int | None:
    """Start offset of a 20-digit file name, ``None`` for anything else (tmp files, junk)."""
    if len(name) == 20 and name.isdigit():
        return int(name)
    return None
