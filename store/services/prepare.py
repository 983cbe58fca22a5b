"""``QueueFilePreparer``: ConsumeQueue files created, sized and first-touched off the loop, ahead of need.

A ConsumeQueue file created on the loop costs an open, an ``ftruncate``, an ``mmap`` and then a
page fault on the first write of each 4 KiB page (a new page-cache page, zeroed, and its block
reserved): on a loaded machine 2-15 ms for the first units of a queue, so a new 8-queue topic
stalled every connection for up to ~120 ms, and every roll to a queue's next file did it again.

The preparer does that work in the store's I/O thread (the one that prepares CommitLog
segments), ahead of the writer:

* ``prepare_queues(dirs)``: at topic creation (``MessageStore.prepare_topic``), the first file
  of each of its queues;
* ``ahead(queues)``: after each ConsumeQueue flush pass (every ``flushIntervalConsumeQueue``,
  1 s, over the queues written since the last pass only), for each such queue's last file:
  the next file once this one is ``NEXT_FILE_RATIO`` full, and the next ``WINDOW`` of this one
  write-prefaulted once the writer is half way through the current window.

``IndexFilePreparer`` does the same for IndexFiles (``maxHashSlotNum`` x 4 bytes of hash slots,
written at random, then the entries, written in order): the next file is made once the current
one is ``NEXT_FILE_RATIO`` full, under a name the index's loading ignores (``PREPARED_INDEX``),
its slot table and first ``WINDOW`` of entries write-prefaulted; ``IndexService._new_file``
renames it to its creation time when it takes it. Entries get the same windows ahead as
ConsumeQueue units. Not used with ``indexProcessEnable`` (the index process writes the files).

``take`` is the ConsumeQueue's allocator: it hands over the prepared file (waiting for it if the
I/O thread is still busy with it; None, so the queue creates it inline, if nothing was asked).

Prefaulting is ``MADV_POPULATE_WRITE`` over a window only (``WINDOW``): the loop's unit writes
then find their pages mapped writable, and the file stays sparse past the window, so an idle
queue costs 1 MiB of disk, not the whole file (issue 23). Populating writes no data, so the
thread and the loop can touch the same pages. A prepared file that is never used (its topic
was deleted, or the store stops) is removed; one left by a crash is an empty trailing file,
which ConsumeQueue recovery drops.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from pocketmq.store.index.file import IndexService
from pocketmq.store.log.layout import INDEX_ENTRY_SIZE
from pocketmq.store.log.mapped_file import MappedFile
from pocketmq.store.queue.consume_queue import ConsumeQueue
from pocketmq.store.services.allocate import destroy_unused, wait_prepared

logger = logging.getLogger(__name__)

#: bytes of a ConsumeQueue file prefaulted ahead of its writer (52,428 units)
WINDOW = 1 << 20
#: a queue's next file is prepared once its current one is this full
NEXT_FILE_RATIO = 0.5
#: name of an IndexFile made ahead (not 17 digits: ``IndexService.load`` / ``sync`` skip it)
PREPARED_INDEX = "prepared-index.tmp"


def _create(directory: str, offset: int, size: int) -> MappedFile:
    os.makedirs(directory, exist_ok=True)
    mf = MappedFile.in_dir(directory, offset, size, create=True)
    try:
        mf.prefault(write=True, end=WINDOW)
    except BaseException:
        mf.destroy()
        raise
    mf.prefaulted = min(WINDOW, size)
    return mf


def _prefault(mf: MappedFile, start: int, end: int) -> None:
    if not mf.closed:
        mf.prefault(write=True, start=start, end=end)


def _destroy_under(top: str, fut: Future[MappedFile]) -> None:
    """Remove a file prepared for a deleted queue and the empty directories up to ``top``."""
    if fut.cancelled() or fut.exception() is not None:
        return
    mf = fut.result()
    mf.destroy()
    d = os.path.dirname(mf.path)
    while True:
        try:
            os.rmdir(d)
        except OSError:
            return
        if d.rstrip(os.sep) == top.rstrip(os.sep):
            return
        d = os.path.dirname(d)


class QueueFilePreparer:
    name = "prepare-consumequeue"

    def __init__(self, executor: ThreadPoolExecutor, file_size: int) -> None:
        self.executor = executor
        self.file_size = file_size
        self._pending: dict[tuple[str, int], Future[MappedFile]] = {}
        self._stopped = False
        #: files handed over by ``take`` (tests read it; a counter, not a log line per file)
        self.taken = 0

    def request(self, directory: str, offset: int) -> None:
        """Prepare ``directory/<offset>`` in the I/O thread (no-op if asked already or present)."""
        key = (directory, offset)
        if self._stopped or key in self._pending:
            return
        if os.path.exists(os.path.join(directory, f"{offset:020d}")):
            return
        self._pending[key] = self.executor.submit(_create, directory, offset, self.file_size)

    def prepare_queues(self, directories: Iterable[str]) -> None:
        """The first file (offset 0) of each new queue."""
        for d in directories:
            self.request(d, 0)

    def ahead(self, queues: Iterable[ConsumeQueue]) -> None:
        """Queues just written: prefault the next window, prepare the next file when due."""
        if self._stopped:
            return
        size = self.file_size
        for cq in queues:
            files = cq.mfq.files
            if not files:
                continue
            mf = files[-1]
            wrote = mf.wrote_position
            mark = mf.prefaulted
            if mark < size and wrote + WINDOW // 2 >= mark:
                start = max(mark, wrote)
                mf.prefaulted = start + WINDOW
                self.executor.submit(_prefault, mf, start, start + WINDOW)
            if wrote >= size * NEXT_FILE_RATIO:
                self.request(cq.dir, mf.file_end_offset)

    def take(self, directory: str, offset: int, size: int) -> MappedFile | None:
        """The ConsumeQueue allocator: the prepared file, or None (create it inline)."""
        fut = self._pending.pop((directory, offset), None)
        if fut is None:
            return None
        mf = wait_prepared(fut, f"consume queue file {directory}/{offset:020d}")
        if mf is None:
            return None
        if mf.file_size != size or mf.closed:
            mf.destroy()
            return None
        self.taken += 1
        return mf

    def discard(self, directory: str) -> None:
        """Forget files prepared under ``directory`` (a deleted topic or queue): one not started
        is cancelled, one being made is removed (with the directories it made) once done."""
        prefix = directory.rstrip(os.sep) + os.sep
        for key in [k for k in self._pending if k[0] == directory or k[0].startswith(prefix)]:
            fut = self._pending.pop(key)
            if not fut.cancel():
                fut.add_done_callback(functools.partial(_destroy_under, directory))

    async def stop(self) -> None:
        """Wait for preparations in flight and remove the files nobody took."""
        self._stopped = True
        pending, self._pending = self._pending, {}
        await destroy_unused(pending.values())


def _create_index(directory: str, size: int, slots_end: int) -> MappedFile:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, PREPARED_INDEX)
    try:
        os.unlink(path)  # left by a crash
    except FileNotFoundError:
        pass
    mf = MappedFile(path, 0, size, create=True)
    try:
        mf.prefault(write=True, end=slots_end + WINDOW)
    except BaseException:
        mf.destroy()
        raise
    mf.prefaulted = min(size, slots_end + WINDOW)
    return mf


def _populate(mf: MappedFile, start: int, end: int, write: bool) -> None:
    if not mf.closed:
        mf.prefault(write=write, start=start, end=end)


class IndexFilePreparer:
    """IndexFiles made and first-touched ahead of need (module docstring)."""

    def __init__(self, executor: ThreadPoolExecutor, index: IndexService) -> None:
        self.executor = executor
        self.index = index
        self._pending: Future[MappedFile] | None = None
        self._stopped = False
        self.taken = 0

    def ahead(self) -> None:
        """After a flush pass that saw new messages: the next file when due, the next window."""
        index = self.index
        if self._stopped or index.shared:
            return
        files = index.files
        if not files:
            self.request()
            return
        f = files[-1]
        if f.index_count >= f.index_num * NEXT_FILE_RATIO:
            self.request()
        mf = f.mf
        end = f.entries_base + f.index_count * INDEX_ENTRY_SIZE
        mark = mf.prefaulted
        if mark == 0:
            # a file made inline or loaded at start: its slot table and the entries ahead (READ:
            # a loaded file's pages hold data, populating for write would dirty them all; the
            # entries already written are not read in)
            mf.prefaulted = min(mf.file_size, end + WINDOW)
            self.executor.submit(_populate, mf, 0, f.entries_base, False)
            self.executor.submit(_populate, mf, end, mf.prefaulted, False)
        elif mark < mf.file_size and end + WINDOW // 2 >= mark:
            start = max(mark, end)
            mf.prefaulted = min(mf.file_size, start + WINDOW)
            self.executor.submit(_populate, mf, start, mf.prefaulted, True)

    def request(self) -> None:
        if self._pending is None and not self._stopped:
            index = self.index
            slots_end = index.file_size - index.index_num * INDEX_ENTRY_SIZE
            self._pending = self.executor.submit(_create_index, index.dir, index.file_size, slots_end)

    def take(self) -> MappedFile | None:
        """``IndexService.prepared``: the file made ahead, or None (made inline)."""
        fut, self._pending = self._pending, None
        if fut is None:
            return None
        mf = wait_prepared(fut, "index file")
        if mf is None:
            return None
        if mf.file_size != self.index.file_size or mf.closed:
            mf.destroy()
            return None
        self.taken += 1
        return mf

    async def stop(self) -> None:
        self._stopped = True
        fut, self._pending = self._pending, None
        await destroy_unused([fut] if fut is not None else [])
