"""``IndexFile`` (hash slots + chained entries, log/layout.py) and ``IndexService`` (rolling, queries).

Key = ``topic#key``; hash = ``abs(String.hashCode)`` (0 for Integer.MIN_VALUE, computed with
cached heads and tails in ``index.hash``); slot = hash % slotNum. Each entry links to the
previous entry of its bucket, so a query walks one chain. The slot table is read and written
through a big-endian ctypes view of the mapping (``MappedFile.aux``). Reput's fast path
writes the entries of a whole slice of records with a few ``pack_into`` calls (``put_hashes``);
recovery and the decoding path write a record's entries together (``put_entries``).
The header is kept in memory and written back after each write of entries (a run of reput's
fast path, ``Dispatcher.write_index_backlog``, or a dispatch batch of the decoding path); a
crash in between leaves entries past ``indexCount``, which ``load`` re-adopts by walking forward.
Queries are verified by the caller against the real message (hash collisions never leak).
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import time
from collections.abc import Callable, Sequence

from pocketmq.store.index.hash import (
    index_key_hash,
    topic_key_hash,
    topic_key_hashes,
)
from pocketmq.store.index.process.ipc import wait_unlocked
from pocketmq.store.log.layout import (
    INDEX_ENTRY,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_SLOT,
    INDEX_SLOT_SIZE,
)
from pocketmq.store.log.mapped_file import MappedFile

__all__ = ["IndexFile", "IndexService", "index_key_hash", "time_diff", "topic_key_hash"]

logger = logging.getLogger(__name__)

_MAX_INT = 0x7FFFFFFF

_unpack_slot = INDEX_SLOT.unpack_from
_pack_slot = INDEX_SLOT.pack_into
_pack_entry = INDEX_ENTRY.pack_into
_ENTRY_FMT = INDEX_ENTRY.format.lstrip(">")
#: n -> the struct of n consecutive entries (n <= _RUN)
_RUNS: dict[int, struct.Struct] = {}
_RUN = 256


def time_diff(store_timestamp: int, begin_timestamp: int) -> int:
    """An entry's timeDiff: whole seconds since the file's beginTimestamp (0 while the file has
    none yet), clamped to [0, Integer.MAX_VALUE] as Java's int field."""
    diff = (store_timestamp - begin_timestamp) // 1000 if begin_timestamp > 0 else 0
    if diff < 0:
        return 0
    return min(diff, _MAX_INT)


def _entries_struct(n: int) -> struct.Struct:
    st = _RUNS.get(n)
    if st is None:
        st = _RUNS[n] = struct.Struct(">" + _ENTRY_FMT * n)
    return st


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
        self,
        path: str,
        slot_num: int,
        index_num: int,
        *,
        create: bool,
        end_phy: int = 0,
        end_ts: int = 0,
        adopt: bool = True,
        prepared: MappedFile | None = None,
    ) -> None:
        """``prepared``: a new, empty file of the right size made ahead (``IndexService.prepared``),
        already renamed to ``path``; used instead of creating one."""
        size = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
        self.mf = prepared if prepared is not None else MappedFile(path, 0, size, create=create)
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
            self.read_header()
            if adopt:  # (False: trust the header and write nothing; the index process may own it)
                self._adopt_unrecorded()
        self.mf.set_positions(size)
        # the slot table as big-endian uint32s: one C-level subscript per slot read or write
        # (vs. position arithmetic + unpack_from / pack_into). Unsigned: a negative (corrupt)
        # slot reads > Integer.MAX_VALUE, past any entry index, so "v <= 0 or v > idx" and
        # ``put_hashes``' "v and v <= i" both reject it
        self.mf.aux = (ctypes.c_uint32.__ctype_be__ * slot_num).from_buffer(self.mf.mm, INDEX_HEADER_SIZE)

    @property
    def path(self) -> str:
        return self.mf.path

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def read_header(self) -> None:
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = INDEX_HEADER.unpack_from(self.mf.mm, 0)  # fmt: skip
        self.index_count = max(1, min(self.index_count, self.index_num))

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
        diff = time_diff(store_timestamp, self.begin_timestamp)
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

    def put_entries(self, hashes: Sequence[int], phy_offset: int, store_timestamp: int) -> int:
        """All index entries of one record; returns how many fit (the rest go to a new file).

        Byte-for-byte what ``put_hashed`` per key writes, with the per-record work (time
        diff, header counters) done once.
        """
        idx = self.index_count
        if idx <= 1 or idx + len(hashes) > self.index_num:
            n = 0
            for h in hashes:
                if not self.put_hashed(h, phy_offset, store_timestamp):
                    break
                n += 1
            return n
        begin = self.begin_timestamp
        # inline of index.file.time_diff
        diff = (store_timestamp - begin) // 1000 if begin > 0 else 0
        if diff < 0:
            diff = 0
        elif diff > _MAX_INT:
            diff = _MAX_INT
        mm = self.mf.mm
        slot_num = self.slot_num
        entry_pos = self.entries_base + idx * INDEX_ENTRY_SIZE
        new_slots = 0
        slots = self.mf.aux
        for h in hashes:
            i1 = h % slot_num
            slot_value = slots[i1]
            if slot_value <= 0 or slot_value > idx:
                slot_value = 0
                new_slots += 1
            _pack_entry(mm, entry_pos, h, phy_offset, diff, slot_value)
            slots[i1] = idx
            idx += 1
            entry_pos += INDEX_ENTRY_SIZE
        self.hash_slot_count += new_slots
        self.index_count = idx
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        return len(hashes)

    def put_hashes(self, hashes: list[int], phys: list[int], tss: list[int]) -> bool:
        """Entries of consecutive records (one reput slice), packed in runs of ``_RUN`` entries.

        ``phys[i]`` and ``tss[i]`` are the record and store time of ``hashes[i]``. False, with
        nothing written, unless the file has room past its first entry for all of them; the
        bytes are what ``put_hashed`` per key writes.
        """
        idx = self.index_count
        n = len(hashes)
        if idx <= 1 or idx + n > self.index_num:
            return False
        begin = self.begin_timestamp
        ts = tss[0]
        if n == 1:  # (one send in flight: the entry alone, no lists)
            # inline of index.file.time_diff
            diff = (ts - begin) // 1000 if begin > 0 else 0
            if diff < 0:
                diff = 0
            elif diff > _MAX_INT:
                diff = _MAX_INT
            h = hashes[0]
            slots = self.mf.aux
            s = h % self.slot_num
            v = slots[s]
            slots[s] = idx
            if not v or v > idx:  # (unsigned: a negative, corrupt slot reads > idx)
                v = 0
                self.hash_slot_count += 1
            _pack_entry(self.mf.mm, self.entries_base + idx * INDEX_ENTRY_SIZE, h, phys[0], diff, v)
            self.index_count = idx + 1
            self.end_phy_offset = phys[0]
            self.end_timestamp = ts
            return True
        last_ts = tss[-1]
        if tss.count(ts) == n:  # one store time (C-level compares; min()/max() cost ~70 a value)
            diffs = [time_diff(ts, begin)] * n
        elif (
            begin > 0
            and ts <= last_ts
            and 0 <= (ts - begin) // 1000 == (last_ts - begin) // 1000 <= _MAX_INT
            and sorted(tss) == tss
        ):
            # store times in order whose first and last have one timeDiff: all have it (it
            # grows with the time); C-level checks instead of a compare per entry below (a
            # reput run spans a few ms: ~0.35k instructions fewer an entry at 16 entries)
            diffs = [(ts - begin) // 1000] * n
        else:
            diffs = []
            add_diff = diffs.append
            last_ts = -1
            diff = 0
            for ts in tss:
                if ts != last_ts:
                    last_ts = ts
                    # inline of index.file.time_diff
                    diff = (ts - begin) // 1000 if begin > 0 else 0
                    if diff < 0:
                        diff = 0
                    elif diff > _MAX_INT:
                        diff = _MAX_INT
                add_diff(diff)
        slot_num = self.slot_num
        mf = self.mf
        slots = mf.aux
        # prevs preset to 0 (a new slot: the common case on 5M slots), set only for a slot in
        # use: no call and no counter an entry; the new slots are the zeros, counted at C level
        prevs = [0] * n
        i = idx
        for h in hashes:
            s = h % slot_num
            v = slots[s]
            slots[s] = i
            if v and v <= i:  # (unsigned: a negative, corrupt slot reads > i)
                prevs[i - idx] = v
            i += 1
        new_slots = prevs.count(0)
        # the entries' fields interleaved by four C-level slice assignments (not a tuple each)
        args = [0] * (4 * n)
        args[0::4] = hashes
        args[1::4] = phys
        args[2::4] = diffs
        args[3::4] = prevs
        mm = mf.mm
        pos = self.entries_base + idx * INDEX_ENTRY_SIZE
        if n <= _RUN:
            _entries_struct(n).pack_into(mm, pos, *args)
        else:
            for k in range(0, n, _RUN):
                m = min(_RUN, n - k)
                _entries_struct(m).pack_into(mm, pos + k * INDEX_ENTRY_SIZE, *args[k * 4 : (k + m) * 4])
        self.hash_slot_count += new_slots
        self.index_count = i
        self.end_phy_offset = phys[-1]
        self.end_timestamp = tss[-1]
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
        if self.end_phy_offset > phy_max or (self.end_phy_offset == phy_max > 0 and self.index_count > 1):
            # entries at or past the cut point index records that are gone: the record that
            # will be appended at ``phy_max`` must not look "already indexed"
            self.end_phy_offset = phy_max - 1 if phy_max > 0 else 0
            self.write_header()


class IndexService:
    def __init__(self, directory: str, slot_num: int, index_num: int, clock: Callable[[], int]) -> None:
        self.dir = directory
        self.slot_num = slot_num
        self.index_num = index_num
        self.clock = clock
        self.files: list[IndexFile] = []
        self._dirty = False
        #: supplies a new, empty, mapped file of ``file_size`` made ahead (``services.prepare``),
        #: or None: ``_new_file`` then creates it inline
        self.prepared: Callable[[], MappedFile | None] | None = None
        #: files that filled up and still need an fsync (the flush service drains it)
        self.full_unflushed: list[IndexFile] = []
        #: True while the index process writes the files: then only read, after ``sync``
        self.shared = False

    @property
    def file_size(self) -> int:
        return INDEX_HEADER_SIZE + self.slot_num * INDEX_SLOT_SIZE + self.index_num * INDEX_ENTRY_SIZE

    def sync(self) -> None:
        """Re-read the last known file's header, open files created since (by the index process)."""
        files = self.files
        if files:
            files[-1].read_header()
        try:
            names = sorted(n for n in os.listdir(self.dir) if len(n) == 17 and n.isdigit())
        except FileNotFoundError:
            return
        last = os.path.basename(files[-1].path) if files else ""
        for name in names:
            if name > last:
                path = os.path.join(self.dir, name)
                files.append(IndexFile(path, self.slot_num, self.index_num, create=False, adopt=False))

    def load(self, *, adopt: bool = True) -> None:
        """Map every file; ``adopt``: take back entries past a header (else they are redone)."""
        if not os.path.isdir(self.dir):
            return
        if not wait_unlocked(self.dir, 10.0):  # an index process of a killed store still runs
            logger.error("index process of %s still running after 10 s; loading anyway", self.dir)
        for name in sorted(n for n in os.listdir(self.dir) if len(n) == 17 and n.isdigit()):
            path = os.path.join(self.dir, name)
            self.files.append(IndexFile(path, self.slot_num, self.index_num, create=False, adopt=adopt))

    def _new_file(self, done: int = 0) -> IndexFile:
        """``done``: keys of the record already in the full file; if none, the new file ends one
        past its last record (a crash before its first entry then re-indexes nothing twice)."""
        os.makedirs(self.dir, exist_ok=True)
        now = self.clock()
        last = self.files[-1] if self.files else None
        while True:
            name = time.strftime("%Y%m%d%H%M%S", time.localtime(now / 1000)) + f"{now % 1000:03d}"
            path = os.path.join(self.dir, name)
            if not os.path.exists(path):
                break
            now += 1  # two files in the same millisecond
        mf = self.prepared() if self.prepared is not None else None
        if mf is not None:
            os.rename(mf.path, path)  # its name is its creation time, given now
            mf.path = path
        f = IndexFile(
            path, self.slot_num, self.index_num, create=True,
            end_phy=last.end_phy_offset + (done == 0) if last else 0,
            end_ts=last.end_timestamp if last else 0, prepared=mf,
        )  # fmt: skip
        if last is not None:
            last.write_header()
            self.full_unflushed.append(last)
        self.files.append(f)
        return f

    def build_index(
        self, topic: str, phy: int, store_ts: int, uniq_key: str | None, keys: str | None
    ) -> None:
        """Index one record (skipped if already indexed): UNIQ_KEY, then each KEYS token.
        Recovery and the decoding reput path call this per record; reput's fast path
        collects a slice's hashes for ``put_hashes`` instead (same bytes).

        Raises:
            OSError: a new index file could not be created.
        """
        files = self.files
        if files and self.is_indexed(phy):
            return  # recovery re-dispatch
        hashes = topic_key_hashes(topic, uniq_key, keys)
        if not hashes:
            return
        f = files[-1] if files else self._new_file()
        done = f.put_entries(hashes, phy, store_ts)
        while done < len(hashes):
            f = self._new_file(done)
            done += f.put_entries(hashes[done:], phy, store_ts)
        self._dirty = True

    def put_hashes(self, hashes: list[int], phys: list[int], tss: list[int]) -> None:
        """Index entries of consecutive records (reput's fast path collects a slice's);
        ``phys[i]`` and ``tss[i]`` are the record and store time of ``hashes[i]``. Records
        already indexed are skipped, so a failed call can be repeated whole.

        Raises:
            OSError: a new index file could not be created.
        """
        n = len(hashes)
        i = 0
        while i < n:
            files = self.files
            f = files[-1] if files else None
            if f is not None and f.index_count > 1 and phys[i] > f.end_phy_offset:
                # as many whole records as the file has room for, in one go
                j = min(n, i + f.index_num - f.index_count)
                if j < n:
                    while j > i and phys[j] == phys[j - 1]:
                        j -= 1
                if j > i:
                    if i == 0 and j == n:
                        f.put_hashes(hashes, phys, tss)
                    else:
                        f.put_hashes(hashes[i:j], phys[i:j], tss[i:j])
                    self._dirty = True
                    i = j
                    continue
            # one record on its own: a new or full file, or a record indexed already
            phy = phys[i]
            j = i + 1
            while j < n and phys[j] == phy:
                j += 1
            if not self.is_indexed(phy):
                part = hashes[i:j]
                f = f if f is not None else self._new_file()
                done = f.put_entries(part, phy, tss[i])
                while done < len(part):
                    f = self._new_file(done)
                    done += f.put_entries(part[done:], phy, tss[i])
                self._dirty = True
            i = j

    def is_indexed(self, phy: int) -> bool:
        """Whether the record at ``phy`` is already indexed (what ``build_index`` skips)."""
        files = self.files
        if not files:
            return False
        f = files[-1]
        end = f.end_phy_offset
        return phy < end or (phy == end and f.index_count > 1)

    def write_headers(self) -> None:
        if self._dirty and self.files:
            self.files[-1].write_header()
            self._dirty = False

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Candidate physical offsets, newest file first."""
        if self.shared:
            self.sync()
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
        if self.shared:
            self.sync()
        return self.files[-1].end_timestamp if self.files else 0

    @property
    def last_update_phy_offset(self) -> int:
        if self.shared:
            self.sync()
        return self.files[-1].end_phy_offset if self.files else 0

    def truncate_phy(self, phy_max: int) -> None:
        for f in self.files:
            f.truncate_phy(phy_max)

    def delete_expired(self, min_phy: int) -> int:
        """Delete files (never the last) whose entries all point below ``min_phy``."""
        if self.shared:
            self.sync()  # (the index process only writes the last file and new ones)
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
