"""``AllocateService``: prepares the next CommitLog segment in a worker thread (etcd file_pipeline).

Creating a segment means open + ``posix_fallocate`` + mmap + prefault (``madvise`` through
ctypes, so the GIL is released); done inline it would stall the puts on the first touches of a
fresh segment. When the writer rolls, ``take`` hands over the prepared file (waiting for it if
the worker is still busy, as Java's ``AllocateMappedFileService`` does) and requests the next
one. A failed preparation (e.g. ENOSPC) makes ``take`` return None, so the queue creates the
segment inline and reports the error as a put status.

Prefaulting runs a window ahead of the writer (``advance``, called after each reput batch)
rather than over the whole 1 GiB at once: populating a segment's page tables costs ~1 s of
kernel CPU, which on a small machine competes with the loop, and most of it would be for
pages a lightly loaded broker does not write for hours.

With SYNC_FLUSH the segment being written is mapped ``MADV_RANDOM``: with mmap readahead the kernel fills the
page cache with large folios (ext4, seen on Linux 6.18), dirty state is kept per folio, and every
SYNC_FLUSH fdatasync then wrote back whole large folios for a few KB of new messages: 18x the
bytes (1.27 GB for 69 MB of appends) and 1-1.5 ms per fsync instead of 0.25 ms. Random advice
makes faults allocate single pages. Once the writer has moved on, the full segment gets
``MADV_NORMAL`` back, so consumers catching up from disk still get readahead. ASYNC_FLUSH keeps
the default: its flushes are large and rare, and page-sized faults cost the prefault thread ~25%
more CPU per message (measured), which a 2-core broker shares with its clients.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor

from pocketmq.store.log import syscalls
from pocketmq.store.log.mapped_file import MappedFile

logger = logging.getLogger(__name__)

#: longest the writer waits for a segment already being prepared (Java waits up to 5 s)
TAKE_TIMEOUT_S = 5.0
#: how far ahead of the writer pages are prefaulted; the next window is requested when the
#: writer is half way through the current one
PREFAULT_WINDOW = 64 << 20
#: madvise advice values (linux/mman.h)
MADV_NORMAL = 0
MADV_RANDOM = 1


def _advise(mf: MappedFile, advice: int) -> None:
    """Readahead advice for the whole mapping (best effort: a no-op where unsupported)."""
    if not mf.closed:
        syscalls.madvise(mf.mm, 0, mf.file_size, advice)


def _create(
    directory: str, offset: int, size: int, prefault: bool, warm_write: bool, random: bool
) -> MappedFile:
    os.makedirs(directory, exist_ok=True)
    mf = MappedFile.in_dir(directory, offset, size, create=True, preallocate=warm_write)
    if random:
        _advise(mf, MADV_RANDOM)  # before the prefault, which would otherwise read ahead
    if prefault:
        mf.prefault(write=warm_write, end=PREFAULT_WINDOW)
    return mf


class AllocateService:
    name = "allocate"

    def __init__(
        self, executor: ThreadPoolExecutor, *, prefault: bool, warm_write: bool, random_writer: bool = False
    ) -> None:
        self.executor = executor
        self.prefault = prefault
        self.warm_write = warm_write
        #: map the segment being written MADV_RANDOM (SYNC_FLUSH, see the module docstring)
        self.random_writer = random_writer
        self._pending: dict[tuple[str, int], Future[MappedFile]] = {}
        #: paths of segments this service prepared (already prefaulted)
        self._prepared: set[str] = set()
        self._stopped = False
        #: the segment being written (mapped MADV_RANDOM until the next one takes over)
        self._writing: MappedFile | None = None

    def request(self, directory: str, offset: int, size: int) -> None:
        key = (directory, offset)
        if self._stopped or key in self._pending or os.path.exists(os.path.join(directory, f"{offset:020d}")):
            return
        self._pending[key] = self.executor.submit(
            _create, directory, offset, size, self.prefault, self.warm_write, self.random_writer
        )

    def take(self, directory: str, offset: int, size: int) -> MappedFile | None:
        """Called by the queue when it needs segment ``offset``."""
        fut = self._pending.pop((directory, offset), None)
        mf: MappedFile | None = None
        if fut is not None:
            try:
                mf = fut.result(timeout=TAKE_TIMEOUT_S)
            except Exception as exc:  # ENOSPC, timeout...: the queue retries inline
                logger.warning("preallocated CommitLog segment %d unavailable: %s", offset, exc)
                fut.add_done_callback(_destroy_result)
                mf = None
            if mf is not None and mf.file_size != size:
                mf.destroy()
                mf = None
        if mf is not None:
            self._prepared.add(mf.path)
            mf.prefaulted = min(PREFAULT_WINDOW, mf.file_size) if self.prefault else mf.file_size
        return mf

    def on_created(self, mf: MappedFile) -> None:
        """The queue added segment ``mf``: prepare the one after it (and, if ``mf`` was made
        inline, e.g. the very first one, prefault the window ahead of the writer)."""
        if mf.path not in self._prepared:
            if self.random_writer:
                _advise(mf, MADV_RANDOM)
            mf.prefaulted = mf.wrote_position
            self.advance(mf)
        if self.random_writer:
            prev, self._writing = self._writing, mf
            if prev is not None and prev is not mf:
                _advise(prev, MADV_NORMAL)
        self._prepared.discard(mf.path)
        self.request(os.path.dirname(mf.path), mf.file_end_offset, mf.file_size)

    def advance(self, mf: MappedFile) -> None:
        """Prefault the next window of ``mf`` once the writer is half way through the current one."""
        if not self.prefault or self._stopped:
            return
        mark = mf.prefaulted
        if mark < mf.file_size and mf.wrote_position + PREFAULT_WINDOW // 2 >= mark:
            start = max(mark, mf.wrote_position)
            mf.prefaulted = start + PREFAULT_WINDOW
            self.executor.submit(_prefault_range, mf, start, start + PREFAULT_WINDOW, self.warm_write)

    async def stop(self) -> None:
        """Wait for preparations in flight, then remove segments prepared but never used
        (nothing touches the directory after the store has shut down)."""
        self._stopped = True
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            try:
                mf = await asyncio.wrap_future(fut)
            except Exception:  # a failed preparation left nothing behind
                continue
            mf.destroy()


def _prefault_range(mf: MappedFile, start: int, end: int, warm_write: bool) -> None:
    if not mf.closed:
        mf.prefault(write=warm_write, start=start, end=end)


def _destroy_result(fut: Future[MappedFile]) -> None:
    if not fut.cancelled() and fut.exception() is None:
        fut.result().destroy()
