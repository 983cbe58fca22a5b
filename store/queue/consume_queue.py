"""``ConsumeQueue``: per (topic, queueId) index of 20-byte units into the CommitLog (log/layout.py).

Logical offset n lives at byte n*20 of the queue's byte space; files are named by the byte
offset of their first unit. ``put`` is idempotent: re-dispatching a record whose unit already
exists is a no-op (or a repair if the unit disagrees), which is what makes recovery re-dispatch
safe. A queue whose first file starts above offset 0 is padded with blank units
``(0, 0x7FFFFFFF, 0)``; blank units are never served.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from operator import itemgetter

from pocketmq.store.log.layout import CQ_BLANK_SIZE, CQ_UNIT, CQ_UNIT_SIZE
from pocketmq.store.log.mapped_file import MappedFile
from pocketmq.store.log.mapped_file_queue import Allocator, MappedFileQueue

logger = logging.getLogger(__name__)

_BLANK_UNIT = CQ_UNIT.pack(0, CQ_BLANK_SIZE, 0)
_unpack_unit = CQ_UNIT.unpack_from
_pack_unit = CQ_UNIT.pack_into
#: n -> the struct of n consecutive units (batch dispatch); small n only, see ``_units_struct``
_RUNS: dict[int, struct.Struct] = {}


def _units_struct(n: int) -> struct.Struct:
    st = _RUNS.get(n)
    if st is None:
        st = struct.Struct(">" + "qiq" * n)
        if n <= 256:
            _RUNS[n] = st
    return st


#: (records n, queues p) -> the itemgetter of a slice's columns queue by queue when its records
#: go to p queues in turn (``put_in_turn``); a few slice lengths and queue counts
_TURNS: dict[tuple[int, int], itemgetter[tuple[int, ...]]] = {}


def put_in_turn(
    cqs: Sequence[ConsumeQueue | None],
    phys: Sequence[int],
    sizes: Sequence[int],
    qoffs: Sequence[int],
    tss: Sequence[int],
) -> int:
    """Units (tagsCode 0) of a reput slice whose ``n`` records go to the ``p`` queues ``cqs`` in
    turn (record i to ``cqs[i % p]``; ``qoffs`` their logical offsets, ``tss`` their store
    times), each queue's written with one ``pack_into`` (as ``ConsumeQueue.put_units``) from
    one interleaving of the slice's fields queue by queue: no call, list and slice
    assignments per queue (~640 instructions a record at 8 queues of 4 records).

    Returns how many queues, from the first, were written; the caller writes the others (a
    queue not made yet, units not the next of its last file or past its end)."""
    n = len(phys)
    p = len(cqs)
    take = _TURNS.get((n, p))
    if take is None:
        take = itemgetter(*[i for k in range(p) for i in range(k, n, p)])
        if len(_TURNS) < 256:
            _TURNS[n, p] = take
    fields = [0] * (3 * n)
    fields[0::3] = take(phys)
    fields[1::3] = take(sizes)
    q_offs = take(qoffs)
    q, r = divmod(n, p)
    a = 0  # (the queue's first record in queue order)
    for k, cq in enumerate(cqs):
        m = q + 1 if k < r else q
        b = a + m
        off = q_offs[a]
        if cq is None or q_offs[b - 1] - off != m - 1 or not (files := cq.mfq.files):
            return k
        mf = files[-1]
        pos = off * CQ_UNIT_SIZE - mf.file_from_offset
        end_pos = pos + m * CQ_UNIT_SIZE
        if pos != mf.wrote_position or end_pos > mf.file_size:
            return k
        _units_struct(m).pack_into(mf.mm, pos, *fields[3 * a : 3 * b])
        mf.wrote_position = end_pos
        end = fields[3 * b - 3] + fields[3 * b - 2]
        if end > cq.max_physic_offset:  # noqa: PLR1730
            cq.max_physic_offset = end
        if ts := tss[k + (m - 1) * p]:
            cq.last_store_timestamp = ts
        a = b
    return p


class ConsumeQueue:
    def __init__(
        self, topic: str, queue_id: int, root: str, file_size: int, *, allocator: Allocator | None = None
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.dir = os.path.join(root, topic, str(queue_id))
        self.file_size = file_size
        self.mfq = MappedFileQueue(self.dir, file_size, allocator=allocator)
        #: first servable logical offset (units)
        self.min_logic_offset = 0
        #: end (offset + size) of the furthest record referenced
        self.max_physic_offset = 0
        #: store timestamp of the last unit written (for the checkpoint)
        self.last_store_timestamp = 0

    # ---------------------------------------------------------------- load / recover

    def load(self) -> bool:
        """Map the files; False if a file in the middle is missing (the queue needs a rebuild)."""
        return not self.mfq.load()

    def recover(self) -> None:
        """Find the end of valid units in the last three files (Java ``ConsumeQueue.recover``)."""
        files = self.mfq.files
        if not files:
            return
        start = max(0, len(files) - 3)
        end_offset = files[start].file_from_offset
        max_phy = 0
        for mf in files[start:]:
            mm = mf.mm
            pos = 0
            full = True
            while pos < mf.file_size:
                phy, size, _tags = _unpack_unit(mm, pos)
                if phy < 0 or size <= 0:
                    full = False
                    break
                if size != CQ_BLANK_SIZE:
                    max_phy = phy + size
                pos += CQ_UNIT_SIZE
            end_offset = mf.file_from_offset + pos
            if not full:
                break
        for mf in self.mfq.truncate_dirty(end_offset):
            mf.destroy()
        self._drop_empty_tail()
        self.max_physic_offset = max_phy
        self.min_logic_offset = self.mfq.min_offset() // CQ_UNIT_SIZE

    def correct_min_offset(self, min_phy: int) -> None:
        """First unit whose record is still in the CommitLog (and is not padding)."""
        first = self.mfq.first
        if first is None:
            return
        mm = first.mm
        limit = first.wrote_position
        pos = 0
        while pos < limit:
            phy, size, _ = _unpack_unit(mm, pos)
            if size != CQ_BLANK_SIZE and phy >= min_phy:
                break
            pos += CQ_UNIT_SIZE
        self.min_logic_offset = (first.file_from_offset + pos) // CQ_UNIT_SIZE

    def truncate_dirty(self, phy_offset: int) -> None:
        """Drop trailing units whose record does not end at or before ``phy_offset``."""
        self._drop_empty_tail()
        files = self.mfq.files
        while files:
            last = files[-1]
            pos = last.wrote_position
            mm = last.mm
            while pos > 0:
                phy, size, _ = _unpack_unit(mm, pos - CQ_UNIT_SIZE)
                if size == CQ_BLANK_SIZE or phy + size <= phy_offset:
                    break
                pos -= CQ_UNIT_SIZE
            if pos == last.wrote_position:
                break
            if pos == 0 and len(files) > 1:
                self.mfq.files.pop().destroy()
                files = self.mfq.files
                continue
            last.zero_from(pos, last.wrote_position)
            last.set_positions(pos)
            break
        self.max_physic_offset = self._last_physic_end()
        self.min_logic_offset = min(self.min_logic_offset, self.max_offset)

    def _drop_empty_tail(self) -> None:
        """Remove trailing files without a unit: the next file the preparer made ahead of need
        and a crash left behind a last file that was exactly full. Kept, it would end the walk
        back of ``truncate_dirty`` before it reached the full file's units."""
        files = self.mfq.files
        while len(files) > 1 and files[-1].wrote_position == 0:
            files.pop().destroy()

    def _last_physic_end(self) -> int:
        for mf in reversed(self.mfq.files):
            pos = mf.wrote_position
            while pos > 0:
                phy, size, _ = _unpack_unit(mf.mm, pos - CQ_UNIT_SIZE)
                if size != CQ_BLANK_SIZE:
                    return int(phy + size)
                pos -= CQ_UNIT_SIZE
        return 0

    # ---------------------------------------------------------------- write

    def put(self, phy: int, size: int, tags_code: int, cq_offset: int, store_timestamp: int = 0) -> None:
        """Write the unit for logical offset ``cq_offset`` (idempotent; pads gaps with blanks).

        Raises:
            OSError: a new file could not be created; nothing was written.
        """
        files = self.mfq.files
        if files:
            # the hot path: the next unit of the last file (one per dispatched message; reput's
            # fast path, dispatch.appended, inlines this branch: change both)
            mf = files[-1]
            pos = cq_offset * CQ_UNIT_SIZE - mf.file_from_offset
            if pos == mf.wrote_position and pos < mf.file_size:
                _pack_unit(mf.mm, pos, phy, size, tags_code)
                mf.wrote_position = pos + CQ_UNIT_SIZE
                end = phy + size
                if end > self.max_physic_offset:  # noqa: PLR1730 - no builtin call per unit
                    self.max_physic_offset = end
                if store_timestamp:
                    self.last_store_timestamp = store_timestamp
                return
        self._put_slow(phy, size, tags_code, cq_offset, store_timestamp)

    def put_run(self, phy: int, sizes: list[int], tags_codes: list[int], cq_offset: int, ts: int) -> bool:
        """Units of consecutive records (a batch put) appended with one ``pack_into``.

        False, with nothing written, unless they are exactly the next units of the last file
        and fit in it; the caller then ``put``s them one by one.
        """
        offsets = list(accumulate(sizes, initial=phy))
        offsets.pop()
        return self.put_units(offsets, sizes, tags_codes, cq_offset, ts)

    def put_units(
        self,
        phys: Sequence[int],
        sizes: Sequence[int],
        tags_codes: Sequence[int] | None,
        cq_offset: int,
        ts: int,
    ) -> bool:
        """Units of records ``phys`` (ascending, not necessarily adjacent: one queue's share of
        a reput slice of single sends), tagsCodes ``tags_codes`` (None: all 0), appended with
        one ``pack_into``; ``ts`` is the last record's store time.

        False, with nothing written, unless they are exactly the next units of the last file
        and fit in it; the caller then ``put``s them one by one.
        """
        files = self.mfq.files
        if not files:
            return False
        mf = files[-1]
        pos = cq_offset * CQ_UNIT_SIZE - mf.file_from_offset
        n = len(sizes)
        end_pos = pos + n * CQ_UNIT_SIZE
        if pos != mf.wrote_position or end_pos > mf.file_size:
            return False
        # the units' fields interleaved by three C-level slice assignments (a tuple per unit
        # from zip, flattened by chain, cost ~0.9k instructions a unit: as much as the packing)
        fields = [0] * (3 * n)
        fields[0::3] = phys
        fields[1::3] = sizes
        if tags_codes is not None:
            fields[2::3] = tags_codes
        _units_struct(n).pack_into(mf.mm, pos, *fields)
        mf.wrote_position = end_pos
        end = phys[-1] + sizes[-1]
        if end > self.max_physic_offset:  # noqa: PLR1730
            self.max_physic_offset = end
        if ts:
            self.last_store_timestamp = ts
        return True

    def redispatch(self, phy: int, size: int, tags_code: int, cq_offset: int, store_timestamp: int) -> bool:
        """Recovery: check (repair) or append the unit of ``cq_offset``; False if it lies beyond
        the queue's end, i.e. units are missing and the queue must be rebuilt."""
        files = self.mfq.files
        if not files:
            if cq_offset > 0:
                return False
        else:
            mf = files[-1]
            pos = cq_offset * CQ_UNIT_SIZE - mf.file_from_offset
            wrote = mf.wrote_position
            if 0 <= pos < wrote:
                # the common case after a crash: the unit is there; compare it (one unpack)
                if _unpack_unit(mf.mm, pos) != (phy, size, tags_code):
                    logger.warning(
                        "consume queue %s/%d: repairing unit %d", self.topic, self.queue_id, cq_offset
                    )
                    _pack_unit(mf.mm, pos, phy, size, tags_code)
                return True
            if pos > wrote:
                return False
        self.put(phy, size, tags_code, cq_offset, store_timestamp)
        return True

    def _put_slow(self, phy: int, size: int, tags_code: int, cq_offset: int, store_timestamp: int) -> None:
        expected = cq_offset * CQ_UNIT_SIZE
        mfq = self.mfq
        last = mfq.last
        cur = last.file_from_offset + last.wrote_position if last is not None else -1
        if last is not None and expected == cur and not last.is_full:
            mf = last
        elif expected < cur:
            self._check_existing(phy, size, tags_code, cq_offset)
            return
        else:
            mf = self._prepare_append(expected, cur)
        pos = expected - mf.file_from_offset
        _pack_unit(mf.mm, pos, phy, size, tags_code)
        mf.wrote_position = pos + CQ_UNIT_SIZE
        end = phy + size
        self.max_physic_offset = max(self.max_physic_offset, end)
        if store_timestamp:
            self.last_store_timestamp = store_timestamp

    def _prepare_append(self, expected: int, cur: int) -> MappedFile:
        mfq = self.mfq
        if cur < 0:
            # empty queue: start at the file holding ``expected``, padded up to it
            start = expected - expected % self.file_size
            mf = mfq.create_file(start)
            self._pad(mf, 0, expected - start)
            self.min_logic_offset = expected // CQ_UNIT_SIZE
            return mf
        if expected > cur:
            logger.error(
                "consume queue %s/%d: gap %d..%d padded with blank units",
                self.topic, self.queue_id, cur // CQ_UNIT_SIZE, expected // CQ_UNIT_SIZE,
            )  # fmt: skip
        # pad the gap (if any) file by file, then return the file that will hold ``expected``
        while True:
            mf = mfq.last_for_append()
            file_end = mf.file_end_offset
            stop = min(expected, file_end)
            pos = mf.wrote_position
            if mf.file_from_offset + pos < stop:
                self._pad(mf, pos, stop - mf.file_from_offset)
            if expected < file_end:
                return mf

    @staticmethod
    def _pad(mf: MappedFile, start: int, end: int) -> None:
        n = (end - start) // CQ_UNIT_SIZE
        if n > 0:
            mf.mm[start:end] = _BLANK_UNIT * n
        mf.wrote_position = end

    def _check_existing(self, phy: int, size: int, tags_code: int, cq_offset: int) -> None:
        pos_abs = cq_offset * CQ_UNIT_SIZE
        mf = self.mfq.find_by_offset(pos_abs)
        if mf is None:
            return  # below the first file: already cleaned up
        pos = pos_abs - mf.file_from_offset
        if _unpack_unit(mf.mm, pos) != (phy, size, tags_code):
            logger.warning("consume queue %s/%d: repairing unit %d", self.topic, self.queue_id, cq_offset)
            CQ_UNIT.pack_into(mf.mm, pos, phy, size, tags_code)

    # ---------------------------------------------------------------- read

    @property
    def max_offset(self) -> int:
        """Number of units written (the next logical offset)."""
        return self.mfq.max_offset() // CQ_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset

    def units_from(self, offset: int, max_units: int) -> bytes | None:
        """Raw units from ``offset`` to the end of its file (at most ``max_units``); None if no file."""
        pos_abs = offset * CQ_UNIT_SIZE
        mf = self.mfq.find_by_offset(pos_abs)
        if mf is None:
            return None
        pos = pos_abs - mf.file_from_offset
        end = min(mf.wrote_position, pos + max_units * CQ_UNIT_SIZE)
        if pos >= end:
            return None
        return mf.mm[pos:end]

    def pull_window(self, offset: int, max_nums: int) -> tuple[int, int, bytes | None]:
        """``(min_offset, max_offset, units)`` for a pull at ``offset``, in one call (the store's
        ``get_message``: two properties, ``mfq.max_offset`` and ``units_from`` were four Python
        calls a pull, twice per delivery at one send in flight). ``units`` is what
        ``units_from(offset, max(800, max_nums))`` returns when ``min <= offset < max``, else None."""
        min_o = self.min_logic_offset
        files = self.mfq.files
        if not files:
            return min_o, 0, None
        mf = files[-1]
        # inline of log.mapped_file_queue.MappedFileQueue.max_offset
        max_o = (mf.file_from_offset + mf.wrote_position) // CQ_UNIT_SIZE
        if offset >= max_o or offset < min_o:
            return min_o, max_o, None
        pos = offset * CQ_UNIT_SIZE - mf.file_from_offset
        if pos < 0:  # (an earlier file: any but the last)
            found = self.mfq.find_by_offset(offset * CQ_UNIT_SIZE)
            if found is None:
                return min_o, max_o, None
            mf = found
            pos = offset * CQ_UNIT_SIZE - mf.file_from_offset
        end = pos + (max_nums if max_nums > 800 else 800) * CQ_UNIT_SIZE
        if end > mf.wrote_position:  # noqa: PLR1730 - no builtin call per pull
            end = mf.wrote_position
        return min_o, max_o, mf.mm[pos:end] if pos < end else None

    def get_unit(self, offset: int) -> tuple[int, int, int] | None:
        if offset < self.min_logic_offset or offset >= self.max_offset:
            return None
        pos_abs = offset * CQ_UNIT_SIZE
        mf = self.mfq.find_by_offset(pos_abs)
        if mf is None:
            return None
        phy, size, tags = _unpack_unit(mf.mm, pos_abs - mf.file_from_offset)
        if size == CQ_BLANK_SIZE:
            return None
        return int(phy), int(size), int(tags)

    def iter_units(self, start: int = 0) -> Iterator[tuple[int, int, int, int]]:
        """``(logical offset, phy, size, tags)`` of every non-blank unit from ``start``."""
        for mf in self.mfq.files:
            base = mf.file_from_offset // CQ_UNIT_SIZE
            data = mf.mm[: mf.wrote_position]
            for i, (phy, size, tags) in enumerate(CQ_UNIT.iter_unpack(data)):
                if base + i >= start and size != CQ_BLANK_SIZE:
                    yield base + i, phy, size, tags

    def roll_next_file(self, offset: int) -> int:
        """First logical offset of the file after the one holding ``offset``."""
        per_file = self.file_size // CQ_UNIT_SIZE
        return offset + per_file - offset % per_file

    def offset_by_time(self, timestamp: int, store_time_of: Callable[[int], int], min_phy: int) -> int:
        """First logical offset whose message was stored at or after ``timestamp`` (lower bound).

        Messages already deleted from the CommitLog count as older. Returns ``max_offset`` when
        every message is older, ``min_offset`` when none is.
        """
        lo, hi = self.min_logic_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            unit = self.get_unit(mid)
            older = True
            if unit is not None and unit[0] >= min_phy:
                ts = store_time_of(unit[0])
                older = ts < 0 or ts < timestamp
            if older:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # ---------------------------------------------------------------- cleanup

    def delete_expired(self, min_phy: int) -> int:
        """Delete whole files (never the last) whose units all point below ``min_phy``."""
        files = self.mfq.files
        count = 0
        while len(files) - count > 1:
            mf = files[count]
            last_pos = mf.file_size - CQ_UNIT_SIZE
            phy, size, _ = _unpack_unit(mf.mm, last_pos)
            if size != CQ_BLANK_SIZE and phy + size > min_phy:
                break
            count += 1
        for mf in self.mfq.delete_first(count):
            mf.destroy()
        if count:
            self.correct_min_offset(min_phy)
        return count

    def flush(self) -> None:
        self.mfq.flush()

    def close(self) -> None:
        self.mfq.close()

    def destroy(self) -> None:
        """Delete every file and the queue's directory."""
        self.mfq.destroy()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.min_logic_offset = 0
        self.max_physic_offset = 0
