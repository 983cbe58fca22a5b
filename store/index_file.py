"""``IndexFile`` (hash slots + chained entries, layout.py) and ``IndexService`` (rolling, queries).

Key = ``topic#key``; hash = ``abs(String.hashCode)`` (0 for Integer.MIN_VALUE); slot = hash %
slotNum. Each entry links to the previous entry of its bucket, so a query walks one chain.
The header is kept in memory and written back at the end of every dispatch batch; a crash in
between leaves entries past ``indexCount``, which ``load`` re-adopts by walking forward.
Queries are verified by the caller against the real message (hash collisions never leak).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from operator import mul

from pocketmq.remoting.protocol.message import java_string_hash
from pocketmq.store.layout import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_SLOT,
    INDEX_SLOT_SIZE,
)
from pocketmq.store.mapped_file import MappedFile

logger = logging.getLogger(__name__)

_MAX_INT = 0x7FFFFFFF


_TAIL = 12
_POW31_TAIL = pow(31, _TAIL, 1 << 32)
_TAIL_POWERS = tuple(pow(31, k, 1 << 32) for k in range(_TAIL - 1, -1, -1))
_HEAD_HASHES: dict[str, int] = {}


def index_key_hash(key: str) -> int:
    """``abs(key.hashCode())``, 0 for Integer.MIN_VALUE (Java ``IndexFile.indexKeyHashMethod``).

    Keys are ``topic#key`` and UNIQ_KEYs share a per-producer prefix, so the hash of everything
    but the last 12 chars is cached: ``h(a + b) = h(a) * 31**len(b) + h(b)`` (mod 2**32).
    """
    if len(key) > _TAIL + 2 and key.isascii():
        head = key[:-_TAIL]
        hh = _HEAD_HASHES.get(head)
        if hh is None:
            hh = java_string_hash(head) & 0xFFFFFFFF
            if len(_HEAD_HASHES) > 4096:
                _HEAD_HASHES.clear()
            _HEAD_HASHES[head] = hh
        u = (hh * _POW31_TAIL + sum(map(mul, key[-_TAIL:].encode(), _TAIL_POWERS))) & 0xFFFFFFFF
        h = abs(u - 0x100000000 if u & 0x80000000 else u)
    else:
        h = abs(java_string_hash(key))
    return 0 if h > _MAX_INT else h


_POW31 = tuple(pow(31, k, 1 << 32) for k in range(257))
_TOPIC_HASHES: dict[str, int] = {}


def topic_key_hash(topic: str, key: str) -> int:
    """``index_key_hash(topic + "#" + key)`` without building the string (the hot path)."""
    n = len(key)
    if n > 256 or not key.isascii():
        return index_key_hash(f"{topic}#{key}")
    th = _TOPIC_HASHES.get(topic)
    if th is None:
        th = java_string_hash(topic + "#") & 0xFFFFFFFF
        if len(_TOPIC_HASHES) > 4096:
            _TOPIC_HASHES.clear()
        _TOPIC_HASHES[topic] = th
    if n > _TAIL + 2:
        head = key[:-_TAIL]
        hh = _HEAD_HASHES.get(head)
        if hh is None:
            hh = java_string_hash(head) & 0xFFFFFFFF
            if len(_HEAD_HASHES) > 4096:
                _HEAD_HASHES.clear()
            _HEAD_HASHES[head] = hh
        kh = hh * _POW31_TAIL + sum(map(mul, key[-_TAIL:].encode(), _TAIL_POWERS))
    else:
        kh = sum(map(mul, key.encode(), _POW31[n - 1 :: -1])) if n else 0
    u = (th * _POW31[n] + kh) & 0xFFFFFFFF
    h = abs(u - 0x100000000 if u & 0x80000000 else u)
    return 0 if h > _MAX_INT else h


_unpack_slot = INDEX_SLOT.unpack_from
_pack_slot = INDEX_SLOT.pack_into
_pack_entry = INDEX_ENTRY.pack_into


class IndexFile:
    __slots__ = (
        "begin_phy_offset",
        "begin_timestamp",
        "end_phy_offset",
        "end_timestamp",
        "entries_base",
        "hash_slot_count",
        "index_count",
        "index_num",
        "mf",
        "slot_num",
    )

    def __init__(
        self, path: str, slot_num: int, index_num: int, *, create: bool, end_phy: int = 0, end_ts: int = 0
    ) -> None:
        size = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
        self.mf = MappedFile(path, 0, size, create=create)
        self.slot_num = slot_num
        self.index_num = index_num
        self.entries_base = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE
        if create:
            # a new file continues where the previous one ended (Java IndexFile constructor)
            self.begin_timestamp = self.end_timestamp = end_ts
            self.begin_phy_offset = self.end_phy_offset = end_phy
            self.hash_slot_count = 0
            self.index_count = 1
            self.write_header()
        else:
            (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
             self.hash_slot_count, self.index_count) = INDEX_HEADER.unpack_from(self.mf.mm, 0)  # fmt: skip
            self.index_count = max(1, min(self.index_count, index_num))
            self._adopt_unrecorded()
        self.mf.set_positions(size)

    @property
    def path(self) -> str:
        return self.mf.path

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def write_header(self) -> None:
        INDEX_HEADER.pack_into(
            self.mf.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        )  # fmt: skip

    def _adopt_unrecorded(self) -> None:
        """Entries written after the last header write (crash): take them back while plausible."""
        mm, base = self.mf.mm, self.entries_base
        i = self.index_count
        while i < self.index_num:
            key_hash, phy, diff, prev = INDEX_ENTRY.unpack_from(mm, base + i * INDEX_ENTRY_SIZE)
            if key_hash == 0 and phy == 0 and diff == 0 and prev == 0:
                break
            if phy < self.end_phy_offset or diff < 0 or not 0 <= prev < i:
                break
            self.end_phy_offset = phy
            self.end_timestamp = max(self.end_timestamp, self.begin_timestamp + diff * 1000)
            i += 1
        if i != self.index_count:
            logger.info("index %s: adopted %d entries past the header", self.path, i - self.index_count)
            self.index_count = i
            self.write_header()

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add one entry; False when the file is full."""
        return self.put_hashed(index_key_hash(key), phy_offset, store_timestamp)

    def put_hashed(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """``put_key`` with the key's index hash already computed."""
        idx = self.index_count
        if idx >= self.index_num:
            return False
        mm = self.mf.mm
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.slot_num) * INDEX_SLOT_SIZE
        (slot_value,) = _unpack_slot(mm, slot_pos)
        if slot_value <= 0 or slot_value > idx:
            slot_value = 0
        begin = self.begin_timestamp
        diff = (store_timestamp - begin) // 1000 if begin > 0 else 0
        if diff < 0:
            diff = 0
        elif diff > _MAX_INT:
            diff = _MAX_INT
        _pack_entry(mm, self.entries_base + idx * INDEX_ENTRY_SIZE, key_hash, phy_offset, diff, slot_value)
        _pack_slot(mm, slot_pos, idx)
        if idx <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count = idx + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        return True

    def is_time_matched(self, begin: int, end: int) -> bool:
        return (
            (begin < self.begin_timestamp and end > self.end_timestamp)
            or self.begin_timestamp <= begin <= self.end_timestamp
            or self.begin_timestamp <= end <= self.end_timestamp
        )

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append candidate offsets for ``key`` stored (to the second) within ``[begin, end]`` ms."""
        key_hash = index_key_hash(key)
        mm = self.mf.mm
        (idx,) = INDEX_SLOT.unpack_from(mm, INDEX_HEADER_SIZE + (key_hash % self.slot_num) * INDEX_SLOT_SIZE)
        count = self.index_count
        if idx <= 0 or idx >= count:
            return
        seen = 0
        while len(out) < max_num and seen < count:
            seen += 1
            h, phy, diff, prev = INDEX_ENTRY.unpack_from(mm, self.entries_base + idx * INDEX_ENTRY_SIZE)
            if diff < 0:
                break
            # entries keep whole seconds: the message time is within [t, t + 999]
            t = self.begin_timestamp + diff * 1000
            if h == key_hash and t + 999 >= begin and t <= end:
                out.append(phy)
            if prev <= 0 or prev >= count or prev >= idx or t + 999 < begin:
                break
            idx = prev

    def truncate_phy(self, phy_max: int) -> None:
        """After the CommitLog was cut: new records below the old end must be indexed again."""
        if self.end_phy_offset > phy_max:
            self.end_phy_offset = phy_max
            self.write_header()


class IndexService:
    def __init__(self, directory: str, slot_num: int, index_num: int, clock: Callable[[], int]) -> None:
        self.dir = directory
        self.slot_num = slot_num
        self.index_num = index_num
        self.clock = clock
        self.files: list[IndexFile] = []
        self._dirty = False
        #: files that filled up and still need an fsync (the flush service drains it)
        self.full_unflushed: list[IndexFile] = []

    def load(self) -> None:
        if not os.path.isdir(self.dir):
            return
        for name in sorted(os.listdir(self.dir)):
            if len(name) == 17 and name.isdigit():
                self.files.append(
                    IndexFile(os.path.join(self.dir, name), self.slot_num, self.index_num, create=False)
                )

    def _new_file(self) -> IndexFile:
        os.makedirs(self.dir, exist_ok=True)
        now = self.clock()
        last = self.files[-1] if self.files else None
        while True:
            name = time.strftime("%Y%m%d%H%M%S", time.localtime(now / 1000)) + f"{now % 1000:03d}"
            path = os.path.join(self.dir, name)
            if not os.path.exists(path):
                break
            now += 1  # two files in the same millisecond
        f = IndexFile(
            path, self.slot_num, self.index_num, create=True,
            end_phy=last.end_phy_offset if last else 0, end_ts=last.end_timestamp if last else 0,
        )  # fmt: skip
        if last is not None:
            last.write_header()
            self.full_unflushed.append(last)
        self.files.append(f)
        return f

    def build_index(
        self, topic: str, phy: int, store_ts: int, uniq_key: str | None, keys: str | None
    ) -> None:
        """Index one record (skipped if already indexed). Raises OSError if a file cannot be created."""
        f = self.files[-1] if self.files else None
        if f is not None and (phy < f.end_phy_offset or (phy == f.end_phy_offset and f.index_count > 1)):
            return  # already indexed (recovery re-dispatch)
        if f is None:
            f = self._new_file()
        if uniq_key and not f.put_hashed(topic_key_hash(topic, uniq_key), phy, store_ts):
            f = self._new_file()
            f.put_hashed(topic_key_hash(topic, uniq_key), phy, store_ts)
        if keys:
            for k in keys.split(" ") if " " in keys else (keys,):
                if k and not f.put_hashed(topic_key_hash(topic, k), phy, store_ts):
                    f = self._new_file()
                    f.put_hashed(topic_key_hash(topic, k), phy, store_ts)
        self._dirty = True

    def write_headers(self) -> None:
        if self._dirty and self.files:
            self.files[-1].write_header()
            self._dirty = False

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Candidate physical offsets, newest file first."""
        out: list[int] = []
        key_full = f"{topic}#{key}"
        for f in reversed(self.files):
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(key_full, max_num, begin, end, out)
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return out

    @property
    def last_update_timestamp(self) -> int:
        return self.files[-1].end_timestamp if self.files else 0

    @property
    def last_update_phy_offset(self) -> int:
        return self.files[-1].end_phy_offset if self.files else 0

    def truncate_phy(self, phy_max: int) -> None:
        for f in self.files:
            f.truncate_phy(phy_max)

    def delete_expired(self, min_phy: int) -> int:
        """Delete files (never the last) whose entries all point below ``min_phy``."""
        n = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < min_phy:
            f = self.files.pop(0)
            if f in self.full_unflushed:
                self.full_unflushed.remove(f)
            f.mf.destroy()
            n += 1
        return n

    def flush(self) -> None:
        self.write_headers()
        for f in self.files:
            f.mf.fsync()
        self.full_unflushed.clear()

    def close(self) -> None:
        self.write_headers()
        for f in self.files:
            f.mf.close()
        self.files = []
