"""``MappedFileQueue``: the ordered, contiguous segments of one log (CommitLog or one ConsumeQueue).

Segment ``k`` covers ``[start + k*file_size, start + (k+1)*file_size)``; file names are the
20-digit start offsets, so the segment for any offset is found by arithmetic. Only the last
segment is written. ``flushed_where`` is the offset below which everything is on disk.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

from pocketmq.store.log.layout import offset_of_file_name
from pocketmq.store.log.mapped_file import MappedFile

logger = logging.getLogger(__name__)

#: Supplies a ready (preallocated, maybe prefaulted) file for an offset, or None to create inline.
Allocator = Callable[[str, int, int], MappedFile | None]


class MappedFileQueue:
    def __init__(self, directory: str, file_size: int, *, allocator: Allocator | None = None) -> None:
        self.dir = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self.allocator = allocator
        #: called after a segment was added (the allocation service prepares the next one)
        self.on_created: Callable[[MappedFile], None] | None = None
        #: new files get all their blocks at creation (``warmMapedFileEnable`` CommitLog
        #: segments); else they are sparse (``MappedFile``)
        self.preallocate = False
        self.flushed_where = 0

    # -- loading
    def load(self) -> list[int]:
        """Map every segment in the directory; returns the start offsets of missing segments.

        Segments after the first gap are not mapped (they cannot be reached by a contiguous
        scan); their offsets are returned with the gap so callers can decide (CQ: rebuild).
        Positions are set to "full"; recovery sets the real end of the last segment.
        """
        if not os.path.isdir(self.dir):
            return []
        offsets = sorted(o for o in (offset_of_file_name(n) for n in os.listdir(self.dir)) if o is not None)
        gaps: list[int] = []
        for off in offsets:
            if off % self.file_size:
                logger.error("ignoring %s/%020d: not aligned to file size %d", self.dir, off, self.file_size)
                continue
            if self.files and off != self.files[-1].file_end_offset:
                gaps.append(self.files[-1].file_end_offset)
                break
            mf = MappedFile.in_dir(self.dir, off, self.file_size, create=False)
            mf.set_positions(self.file_size)
            self.files.append(mf)
        if self.files:
            self.flushed_where = self.files[-1].file_end_offset
        return gaps

    # -- lookup
    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def find_by_offset(self, offset: int) -> MappedFile | None:
        files = self.files
        if not files or offset < files[0].file_from_offset:
            return None
        idx = (offset - files[0].file_from_offset) // self.file_size
        return files[idx] if idx < len(files) else None

    def segments_from(self, offset: int, stop: int | None = None) -> Iterator[MappedFile]:
        """The file holding ``offset``, then each next one while its start is below ``stop``
        (None: no bound); a missing file (past the end, or a gap) ends the walk."""
        while stop is None or offset < stop:
            mf = self.find_by_offset(offset)
            if mf is None:
                return
            yield mf
            offset = mf.file_from_offset + mf.file_size

    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    def max_offset(self) -> int:
        """End of written data (the next append position)."""
        files = self.files  # (not ``last``: a property call, per reput slice)
        if files:
            last = files[-1]
            return last.file_from_offset + last.wrote_position
        return 0

    def roll_next_file(self, offset: int) -> int:
        return offset - offset % self.file_size + self.file_size

    # -- writing
    def last_for_append(self, start_offset: int = 0) -> MappedFile:
        """The segment to append to, creating the next one when the last is full.

        Raises:
            OSError: the segment could not be created (ENOSPC ...).
        """
        last = self.last
        if last is not None and not last.is_full:
            return last
        if last is None:
            create_at = start_offset - start_offset % self.file_size
        else:
            create_at = last.file_end_offset
        return self.create_file(create_at)

    def create_file(self, offset: int) -> MappedFile:
        mf = self.allocator(self.dir, offset, self.file_size) if self.allocator else None
        if mf is None:
            os.makedirs(self.dir, exist_ok=True)
            mf = MappedFile.in_dir(
                self.dir, offset, self.file_size, create=True, preallocate=self.preallocate
            )
        if not self.files:
            self.flushed_where = offset
        self.files.append(mf)
        if self.on_created is not None:
            self.on_created(mf)
        return mf

    def reset_to(self, offset: int) -> None:
        """Start an empty queue at ``offset`` (drops nothing; queue must be empty)."""
        assert not self.files
        self.flushed_where = offset

    # -- truncation and deletion
    def truncate_dirty(self, offset: int) -> list[MappedFile]:
        """Drop data at and after ``offset``: the segment holding it is cut (its tail zeroed),
        later segments are removed from the queue and returned (callers destroy them)."""
        removed: list[MappedFile] = []
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_end_offset <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                pos = offset - mf.file_from_offset
                mf.zero_from(pos)
                mf.set_positions(pos)
                keep.append(mf)
            else:
                removed.append(mf)
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)
        return removed

    def delete_first(self, count: int = 1) -> list[MappedFile]:
        removed, self.files = self.files[:count], self.files[count:]
        return removed

    def destroy(self) -> None:
        for mf in self.files:
            mf.destroy()
        self.files = []
        self.flushed_where = 0

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        self.files = []

    # -- flushing (sync; services split plan / fsync / commit across threads)
    #
    # When ``flushed_where`` is in the last file, every file before it is flushed to its end
    # (``commit_flush`` sets it at the first file that is not; ``load``, ``truncate_dirty``
    # and ``delete_first`` keep it at or below that file's), so plan and commit look at the
    # last file alone instead of walking every segment kept: once per group-commit fsync
    # under SYNC_FLUSH, at each send at one in flight.
    def flush_plan(self) -> list[tuple[MappedFile, int]]:
        """Files with unflushed data and the position to mark flushed once fsync returns."""
        files = self.files
        if files:
            last = files[-1]
            if self.flushed_where >= last.file_from_offset:
                pos = last.wrote_position
                return [(last, pos)] if last.flushed_position < pos else []
        return [(mf, mf.wrote_position) for mf in files if mf.flushed_position < mf.wrote_position]

    def commit_flush(self, plan: list[tuple[MappedFile, int]]) -> None:
        for mf, pos in plan:
            mf.flushed_position = max(mf.flushed_position, pos)
        files = self.files
        if not files:
            return
        last = files[-1]
        if self.flushed_where >= last.file_from_offset:
            self.flushed_where = last.file_from_offset + last.flushed_position
            return
        for mf in files:
            if mf.flushed_position < mf.file_size:
                self.flushed_where = mf.file_from_offset + mf.flushed_position
                return
        self.flushed_where = last.file_end_offset

    def flush(self) -> int:
        """Synchronous flush of everything written; returns ``flushed_where``."""
        plan = self.flush_plan()
        for mf, _ in plan:
            mf.fsync()
        self.commit_flush(plan)
        return self.flushed_where

    def dirty_bytes(self) -> int:
        return sum(mf.wrote_position - mf.flushed_position for mf in self.files)
