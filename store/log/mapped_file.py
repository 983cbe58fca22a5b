"""``MappedFile``: one memory-mapped segment of a CommitLog / ConsumeQueue / index.

Files are sparse until written, as RocketMQ's are: a new file gets its size (``ftruncate``),
not its blocks. ``allocated`` is how much of it has real blocks: the CommitLog asks for them
(``ensure``, ``posix_fallocate`` a step ahead of the writer) before its mapped writes reach
them, so a full disk is an ``OSError`` it answers with a refusal, never a SIGBUS. With
``preallocate`` (``warmMapedFileEnable`` for CommitLog segments) the whole file gets its
blocks at creation instead: 1 GiB of real disk per segment at once, one more segment ahead.

Positions (bytes from the start of this file):

* ``wrote_position`` - end of appended data (the loop thread advances it);
* ``flushed_position`` - end of data known to be on disk (set after an fsync completed).

The file knows nothing about record formats (RocketMQ's append-callback seam): writers use
``mm`` directly with ``pack_into`` / slice assignment and then advance ``wrote_position``.
Reads copy out (``read``) or hand out a ``SelectedBuffer`` that must be released; a file whose
views are alive is not unmapped (``destroy`` returns False and can be retried).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any

from pocketmq.store.errors import StoreCorruptError
from pocketmq.store.log import syscalls
from pocketmq.store.log.layout import file_name_of

# Indirections so fault tests can inject ENOSPC without touching the os module.
_preallocate = syscalls.preallocate
_extend = syscalls.extend_sparse
_allocate = syscalls.allocate_range
#: blocks are reserved this far at a time ahead of the CommitLog writer (one fallocate per step)
ALLOCATION_STEP = 4 * 1024 * 1024


@dataclass(slots=True)
class SelectedBuffer:
    """A zero-copy view into a mapped file; call ``release()`` (or use ``with``)."""

    start_offset: int
    view: memoryview
    owner: MappedFile

    def release(self) -> None:
        if self.view is not None:
            self.view.release()
            self.owner.ref_count -= 1

    def __enter__(self) -> SelectedBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class MappedFile:
    __slots__ = (
        "advance_at",
        "allocated",
        "aux",
        "fd",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "last_store_timestamp",
        "mm",
        "path",
        "prefaulted",
        "ref_count",
        "reserving",
        "sync_key",
        "wrote_position",
    )

    def __init__(
        self, path: str, file_from_offset: int, file_size: int, *, create: bool, preallocate: bool = False
    ) -> None:
        """Open (or create: sparse, or with all its blocks if ``preallocate``) ``path`` and map it.

        Raises:
            OSError: the file cannot be created or preallocated (e.g. ENOSPC). A half-created
                file is removed again.
            StoreCorruptError: an existing file is larger than ``file_size``.
        """
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        self.path = path
        self.wrote_position = 0
        self.flushed_position = 0
        self.last_store_timestamp = 0
        self.ref_count = 0
        #: end of the range a prefault was requested for (the allocation service's window)
        self.prefaulted = 0
        #: end of the range the allocation service was asked to reserve blocks for
        self.reserving = 0
        #: the write position before which the allocation service has nothing to request
        #: (``AllocateService.advance``; 0: look now). Whoever moves ``prefaulted`` or
        #: ``reserving`` other than ``advance`` sets it to 0
        self.advance_at = 0
        #: bytes from the start known to have disk blocks (``ensure``); an existing file starts
        #: at 0 (its first ``ensure`` costs a fallocate over blocks it mostly has already)
        self.allocated = 0
        #: an owner's typed view over ``mm`` (ctypes ``from_buffer``); dropped by ``close``
        #: first, because a live export makes ``mmap.close`` fail
        self.aux: Any = None
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        existed = os.path.exists(self.path)
        fd = os.open(self.path, flags, 0o644)
        try:
            st = os.fstat(fd)
            actual = st.st_size
            #: how the fsync helper names this file: path and inode (``fsync_process``: a
            #: path made again after a delete is reopened without a stat per request)
            self.sync_key = f"{path}\0{st.st_ino}"
            if actual > file_size:
                raise StoreCorruptError(self.path, actual, f"file is larger than the configured {file_size}")
            if actual < file_size or not existed:
                # new file, or one cut short by a crash/corruption: the missing part reads as zeros
                if preallocate:
                    _preallocate(fd, file_size)
                    self.allocated = file_size
                else:
                    _extend(fd, file_size)
            self.mm = mmap.mmap(fd, file_size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            if not existed:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
            raise
        self.fd = fd

    @classmethod
    def in_dir(
        cls, directory: str, file_from_offset: int, file_size: int, *, create: bool, preallocate: bool = False
    ) -> MappedFile:
        """The segment ``directory/<20-digit offset>``."""
        return cls(
            os.path.join(directory, file_name_of(file_from_offset)),
            file_from_offset,
            file_size,
            create=create,
            preallocate=preallocate,
        )

    def ensure(self, end: int) -> None:
        """Give ``[0, end)`` real disk blocks (a step ahead), so writes there cannot SIGBUS.

        Raises:
            OSError: ENOSPC (nothing changes; the caller refuses the write).
        """
        start = self.allocated
        if end <= start:
            return
        stop = min(self.file_size, max(end, start + ALLOCATION_STEP))
        _allocate(self.fd, start, stop - start)
        self.allocated = stop

    def reserve(self, end: int) -> None:
        """``ensure`` for another thread (the allocation service, a window ahead of the writer):
        ``[allocated, end)`` in one call; ``allocated`` never moves back.

        Raises:
            OSError: ENOSPC (nothing changes; the writer's own ``ensure`` meets it too).
        """
        start = self.allocated
        end = min(end, self.file_size)
        if end <= start:
            return
        _allocate(self.fd, start, end - start)
        self.allocated = max(self.allocated, end)

    # -- positions
    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def set_positions(self, pos: int) -> None:
        self.wrote_position = pos
        self.flushed_position = pos

    # -- io
    def write(self, pos: int, data: bytes | memoryview, through_fd: bool) -> None:
        """Copy ``data`` in at ``pos``: through the mapping, or with ``pwrite`` (``through_fd``,
        see ``CommitLog.write_through``).

        Raises:
            OSError: the ``pwrite`` failed or stopped short (EIO, ENOSPC).
        """
        if through_fd:
            wrote = os.pwrite(self.fd, data, pos)
            if wrote != len(data):
                raise syscalls.short_write(self.fd, wrote, len(data))
        else:
            self.mm[pos : pos + len(data)] = data

    def read(self, pos: int, size: int) -> bytes:
        return self.mm[pos : pos + size]

    def select(self, pos: int, size: int) -> SelectedBuffer:
        self.ref_count += 1
        return SelectedBuffer(self.file_from_offset + pos, memoryview(self.mm)[pos : pos + size], self)

    def fsync(self) -> None:
        """Blocking; services call it in a worker thread."""
        syscalls.fsync(self.fd)

    def prefault(self, *, write: bool, start: int = 0, end: int | None = None) -> None:
        """Populate page tables of ``[start, end)`` (blocking; run it in a worker thread)."""
        start -= start % 4096
        end = self.file_size if end is None else min(end, self.file_size)
        if end > start:
            syscalls.prefault(self.mm, end - start, write=write, start=start)

    def zero_from(self, pos: int, end: int | None = None) -> None:
        """Erase ``[pos, end)`` (default: to the end of the file) so stale bytes cannot be revived."""
        syscalls.zero_range(self.fd, self.mm, pos, self.file_size if end is None else end)

    # -- lifetime
    def close(self) -> bool:
        """Unmap and close; False (nothing done) while views are still exported."""
        if self.fd < 0:
            return True
        self.aux = None
        try:
            self.mm.close()
        except BufferError:
            return False
        os.close(self.fd)
        self.fd = -1
        return True

    def destroy(self) -> bool:
        """Close and delete the file; False if views are still alive (retry later)."""
        if not self.close():
            return False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        return True

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position}, flushed={self.flushed_position})"
