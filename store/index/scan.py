"""Index keys of CommitLog records read straight from a mapping (the index process's hot loop).

The index process (``index.process.main``) gets no dispatch fields from anyone: it walks the records
below the offset reput has dispatched and indexes exactly what reput would have indexed in
process - each record's UNIQ_KEY, then each KEYS token (split on ``" "``, empty tokens
skipped), rolled-back transaction records and records without properties skipped - with
the same hashes (``index.hash``), written by the same ``IndexService.put_hashes``.

Everything is read from the mapping without decoding the record: one ``unpack_from`` of the
five fields below, ``mmap.find`` for the property names, and the key hash from two cached
parts looked up by the key's bytes (``KeyHashCache``, the bytes mirror of ``index.hash``'s
tables; a miss computes the parts from the decoded key with ``index_hash.key_parts``, so
non-ASCII keys hash as Java does). A property is found where ``get_property`` finds it: the
first ``NAME\\x01`` that starts the properties or follows a ``\\x02``.

Record prefix read here (``log.layout.RECORD_INDEX_WALK_V4`` for IPv4 hosts; IPv6 hosts go
through ``RECORD_PREFIX_STRUCTS``)::

     0 i TOTALSIZE   4 i MAGICCODE   36 i SYSFLAG   56 q STORETIMESTAMP   84 i BODYLENGTH
    then BODY, TOPICLEN (1), TOPIC, PROPERTIESLENGTH (2), PROPERTIES
"""

from __future__ import annotations

import array
import logging
import mmap
import struct
import sys
from collections.abc import Callable

from pocketmq.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    HOST_FLAGS_MASK,
    MESSAGE_MAGIC_CODE,
    RECORD_PREFIX_STRUCTS,
    SIZE_MAGIC,
    TRANSACTION_ROLLBACK_TYPE,
)
from pocketmq.store.index.file import IndexFile, IndexService
from pocketmq.store.index.hash import UNIQ_DEPTH, fold_hash, key_parts, topic_key_hash
from pocketmq.store.log.layout import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_SLOT_SIZE,
    RECORD_FIELD_INDEX,
    RECORD_INDEX_WALK_V4,
)

__all__ = [
    "KeyHashCache",
    "SegmentFinder",
    "index_range",
    "repair_unrecorded",
    "scan_keys",
    "settle_last_files",
]

logger = logging.getLogger(__name__)

_WALK = RECORD_INDEX_WALK_V4
_WALK_SIZE = _WALK.size  # 88
_TS = RECORD_FIELD_INDEX["STORETIMESTAMP"]
_BL = RECORD_FIELD_INDEX["BODYLENGTH"]
_UNIQ_NAME = b"UNIQ_KEY\x01"
_KEYS_NAME = b"KEYS\x01"
_UNIQ = b"\x02" + _UNIQ_NAME
_KEYS = b"\x02" + _KEYS_NAME
_MAX_TOPICS = 1024
_MAX_HEADS = 16_384
_MAX_TAILS = 1 << 15
#: (mapping, CommitLog offset of its first byte, file size), or None past the end
SegmentFinder = Callable[[int], "tuple[mmap.mmap, int, int] | None"]


class KeyHashCache:
    """``index.hash``'s head and tail tables keyed by bytes: ``h = fold(heads[key[:-2]] +
    tails[key[-2:]])``. Only tails of 2 ASCII bytes without a separator are stored, so a key
    shorter than 2 (whose 2-byte slice reaches into ``NAME\\x01``) never hits."""

    __slots__ = ("tails", "topics")

    def __init__(self) -> None:
        #: topic bytes -> (topic, {head bytes: h(topic#head) * 31**2})
        self.topics: dict[bytes, tuple[str, dict[bytes, int]]] = {}
        self.tails: dict[bytes, int] = {}

    def prefill(self) -> None:
        """Every 2-byte ASCII tail without a separator (the str table has them from the start)."""
        ok = [c for c in range(128) if c not in (1, 2)]
        tails = self.tails
        for a in ok:
            for b in ok:
                tails[bytes((a, b))] = a * 31 + b

    def topic(self, raw: bytes) -> tuple[str, dict[bytes, int]]:
        t = self.topics.get(raw)
        if t is None:
            if len(self.topics) >= _MAX_TOPICS:
                self.topics.clear()
            t = self.topics[raw] = (raw.decode(), {})
        return t

    def miss(self, topic: str, heads: dict[bytes, int], kb: bytes, depth: int = 1) -> int:
        """The hash of key ``kb`` computed from its text (cached for the next); -1 if it is
        not UTF-8 (reput would have stopped at such a record: it is never dispatched).
        ``depth``: ``UNIQ_DEPTH`` for a UNIQ_KEY (``index.hash.key_parts``)."""
        try:
            key = kb.decode()
        except UnicodeDecodeError:
            return -1
        tail = kb[-2:]
        if len(kb) >= 2 and tail.isascii() and 1 not in tail and 2 not in tail:
            parts = key_parts(topic, key, depth)
            if parts is not None:
                if len(heads) >= _MAX_HEADS:
                    heads.clear()
                if len(self.tails) >= _MAX_TAILS:
                    self.tails.clear()
                    self.prefill()
                heads[kb[:-2]], self.tails[tail] = parts
                return fold_hash(parts[0] + parts[1])
        return topic_key_hash(topic, key)


def scan_keys(
    mm: mmap.mmap,
    base: int,
    pos: int,
    stop: int,
    cache: KeyHashCache,
    hashes: list[int],
    phys: list[int],
    tss: list[int],
) -> tuple[int, int]:
    """Index hashes of the records starting in ``mm[pos:stop)`` (one segment; ``base`` is its
    CommitLog offset), appended to ``hashes`` / ``phys`` / ``tss`` as ``put_hashes`` takes them.

    The records must be complete (below what reput dispatched). Returns the position after the
    last record and its store timestamp (0 if none); a BLANK returns the segment's size.

    Raises:
        ValueError: bytes that are neither a record nor a BLANK.
    """
    unpack = _WALK.unpack_from
    find = mm.find
    tails = cache.tails
    miss = cache.miss
    add_h = hashes.append
    add_p = phys.append
    add_t = tss.append
    last_raw = b""
    topic = ""
    heads: dict[bytes, int] = {}
    last_ts = 0
    while pos < stop:
        try:
            total, magic, sys_flag, ts, body_len = unpack(mm, pos)
        except struct.error:  # fewer than 88 bytes left in the segment: a BLANK (8 or more)
            total, magic = SIZE_MAGIC.unpack_from(mm, pos)
            sys_flag = ts = body_len = 0
        if magic != MESSAGE_MAGIC_CODE:
            if magic == BLANK_MAGIC_CODE:
                return len(mm), last_ts
            raise ValueError(f"no record at CommitLog offset {base + pos} (magic {magic:#x})")
        end = pos + total
        if sys_flag & HOST_FLAGS_MASK:
            prefix = RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK]
            f = prefix.unpack_from(mm, pos)
            ts, body_len = f[_TS], f[_BL]
            p = pos + prefix.size + body_len
        else:
            p = pos + _WALK_SIZE + body_len
        last_ts = ts
        tl = mm[p]
        pa = p + 3 + tl
        if pa < end and sys_flag & TRANSACTION_ROLLBACK_TYPE != TRANSACTION_ROLLBACK_TYPE:
            raw = mm[p + 1 : p + 1 + tl]
            if raw != last_raw:
                last_raw = raw
                topic, heads = cache.topic(raw)
            phy = base + pos
            # "\\x02NAME\\x01" from the byte before the properties (PROPERTIESLENGTH's low
            # byte: if it is 2, a match there is a first property); a first property after
            # any other byte is caught by comparing the first bytes
            c = mm[pa]
            i = find(_UNIQ, pa - 1, end)
            if c == 85 and mm[pa : pa + 9] == _UNIQ_NAME:  # "U"
                i = pa - 1
            if i >= 0:
                a = i + 10
                j = find(b"\x02", a, end)
                if j < 0:
                    j = end
                if j > a:
                    try:
                        # inline of index.hash.topic_key_hash
                        u = (heads[mm[a : j - 2]] + tails[mm[j - 2 : j]]) & 0xFFFFFFFF
                        add_h(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                        add_p(phy)
                        add_t(ts)
                    except KeyError:
                        h = miss(topic, heads, mm[a:j], UNIQ_DEPTH)
                        if h >= 0:
                            add_h(h)
                            add_p(phy)
                            add_t(ts)
            i = find(_KEYS, pa - 1, end)
            if c == 75 and mm[pa : pa + 5] == _KEYS_NAME:  # "K"
                i = pa - 1
            if i >= 0:
                a = i + 6
                j = find(b"\x02", a, end)
                if j < 0:
                    j = end
                if j > a:
                    kb = mm[a:j]
                    for k in kb.split(b" ") if 32 in kb else (kb,):  # (32: b" " would first fail as an int)
                        if k:
                            try:
                                # inline of index.hash.topic_key_hash
                                u = (heads[k[:-2]] + tails[k[-2:]]) & 0xFFFFFFFF
                                add_h(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                                add_p(phy)
                                add_t(ts)
                            except KeyError:
                                h = miss(topic, heads, k)
                                if h >= 0:
                                    add_h(h)
                                    add_p(phy)
                                    add_t(ts)
        pos = end
    return pos, last_ts


def index_range(
    segment_at: SegmentFinder, index: IndexService, cache: KeyHashCache, start: int, stop: int
) -> tuple[int, int]:
    """Index the records that start in CommitLog ``[start, stop)``; they must be complete
    (below a record boundary reput reached). Skips a gap of deleted segments. Returns the
    record boundary reached (``>= stop`` unless the CommitLog ends early) and the last
    record's store timestamp (0 if none).

    Raises:
        OSError: a new index file could not be created.
        ValueError: no record where one must be.
    """
    off = start
    last_ts = 0
    hashes: list[int] = []
    phys: list[int] = []
    tss: list[int] = []
    while off < stop:
        seg = segment_at(off)
        if seg is None:
            break
        mm, base, size = seg
        if off < base:  # the segment holding ``off`` is gone: continue at the next one
            off = base
            continue
        pos, ts = scan_keys(mm, base, off - base, min(size, stop - base), cache, hashes, phys, tss)
        if hashes:
            index.put_hashes(hashes, phys, tss)
            hashes.clear()
            phys.clear()
            tss.clear()
        if ts:
            last_ts = ts
        off = base + pos
    index.write_headers()
    return off, last_ts


def repair_unrecorded(f: IndexFile) -> None:
    """Put the slot table back to what the header describes after a child was killed within a
    slice: ``put_hashes`` sets a slice's slots before it writes its entries, so a slot may
    point at an entry past ``indexCount``, written or not. A written one holds the slot value
    it replaced (its ``prev``): undone newest first, then zeroed. A slot pointing at an entry
    never written gets the newest entry below the count in its bucket (a backward scan; only
    after a kill). The next slice then writes exactly what an uninterrupted child would have.
    """
    mm, base, slots, count = f.mf.mm, f.entries_base, f.mf.aux, f.index_count
    end = count
    while end < f.index_num and any(INDEX_ENTRY.unpack_from(mm, base + end * INDEX_ENTRY_SIZE)):
        end += 1
    for i in range(end - 1, count - 1, -1):
        h, _phy, _diff, prev = INDEX_ENTRY.unpack_from(mm, base + i * INDEX_ENTRY_SIZE)
        if slots[h % f.slot_num] == i:
            slots[h % f.slot_num] = prev
    if end > count:
        mm[base + count * INDEX_ENTRY_SIZE : base + end * INDEX_ENTRY_SIZE] = bytes(
            (end - count) * INDEX_ENTRY_SIZE
        )
    table = array.array("i", mm[INDEX_HEADER.size : INDEX_HEADER.size + f.slot_num * INDEX_SLOT_SIZE])
    if sys.byteorder == "little":
        table.byteswap()
    if not table or max(table) < count:
        return
    stale = {s for s, v in enumerate(table) if v >= count}
    logger.warning("index %s: %d slots point past the header; repairing", f.path, len(stale))
    for s in stale:
        slots[s] = 0
    hi = count
    while stale and hi > 1:
        lo = max(1, hi - 65536)
        chunk = list(INDEX_ENTRY.iter_unpack(mm[base + lo * INDEX_ENTRY_SIZE : base + hi * INDEX_ENTRY_SIZE]))
        for k in range(len(chunk) - 1, -1, -1):
            s = chunk[k][0] % f.slot_num
            if s in stale:
                slots[s] = lo + k
                stale.discard(s)
        hi = lo


def settle_last_files(files: list[IndexFile]) -> int | None:
    """Make the newest files consistent after a kill (the index process's or the store's).

    ``repair_unrecorded`` undoes what was written past each header. If the newest files hold
    no entry after that, a kill hit while rolling (creating a file, before writing entries or
    the full file's final header): the newest file is then set to continue from the newest
    one with entries - right after its last record if the file that followed says that
    record is complete (``IndexService._new_file``), else at that record, whose entries are
    undone so that it is indexed again whole: never twice, never half. Returns that record's
    CommitLog offset (indexing must resume there at the latest), else None.
    """
    if not files:
        return None
    k = len(files) - 1
    repair_unrecorded(files[k])
    while k > 0 and files[k].index_count <= 1:
        k -= 1
        repair_unrecorded(files[k])
    if k == len(files) - 1 or files[k].index_count <= 1:
        return None  # the newest file has entries, or no file has any
    full, after, last = files[k], files[k + 1], files[-1]
    redo = None
    if after.end_phy_offset == full.end_phy_offset + 1 and after.end_phy_offset > 1:
        end, ts = after.end_phy_offset, full.end_timestamp  # its last record is complete
    else:
        end = redo = full.end_phy_offset
        ts = _drop_last_record(full)
    if (last.end_phy_offset, last.end_timestamp) != (end, ts):
        last.begin_phy_offset = last.end_phy_offset = end
        last.begin_timestamp = last.end_timestamp = ts
        last.write_header()
    return redo


def _drop_last_record(f: IndexFile) -> int:
    """Undo the entries of ``f``'s last record (they are newest in their chains); returns an
    upper bound of the store time of the record before (entries keep whole seconds)."""
    mm, base, slots, record = f.mf.mm, f.entries_base, f.mf.aux, f.end_phy_offset
    i = f.index_count - 1
    while i >= 1:
        h, phy, _diff, prev = INDEX_ENTRY.unpack_from(mm, base + i * INDEX_ENTRY_SIZE)
        if phy != record:
            break
        if slots[h % f.slot_num] == i:
            slots[h % f.slot_num] = prev
            if prev == 0:
                f.hash_slot_count -= 1
        mm[base + i * INDEX_ENTRY_SIZE : base + (i + 1) * INDEX_ENTRY_SIZE] = bytes(INDEX_ENTRY_SIZE)
        i -= 1
    if i == f.index_count - 1:
        return f.end_timestamp
    f.index_count = i + 1
    if i >= 1:
        _h, f.end_phy_offset, diff, _p = INDEX_ENTRY.unpack_from(mm, base + i * INDEX_ENTRY_SIZE)
        f.end_timestamp = f.begin_timestamp + diff * 1000 + 999
    f.write_header()
    return f.end_timestamp
