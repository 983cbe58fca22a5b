"""The store's asyncio services (the only store modules that touch asyncio).

``StoreServices`` wires them for one store (``base.ServedStore``: the parts the services use,
so they never import the façade that starts them): reput (event-driven), CommitLog flush
(ASYNC_FLUSH) or group commit (SYNC_FLUSH), ConsumeQueue/index/checkpoint flush, next-segment
allocation, cleanup and housekeeping. The periodic flushes fsync in a helper process
(``fsync_process.FsyncPipe``: no GIL hand-offs with the loop). Other blocking syscalls run in
small thread pools: one for fsync (the fallback, and the final flush), one for allocation and
unlinking (so a slow fallocate never delays a group commit), one for ConsumeQueue files
(``prepare``: made ahead of need, never behind a CommitLog prefault).
``policy.PutPolicy`` holds the waits after a put (SYNC_FLUSH group commit, SYNC_MASTER
replication) that the façade's ``put_*_async`` delegate to; ``fsync_process`` is the group
commit's fsync helper process, ``cleanup`` the retention decisions (pure functions).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pocketmq.store.config import BrokerRole, FlushDiskType
from pocketmq.store.services.allocate import AllocateService
from pocketmq.store.services.base import ServedStore, Service, StoreService
from pocketmq.store.services.clean import CleanService, HousekeepingService
from pocketmq.store.services.flush import CommitLogFlushService, ConsumeQueueFlushService, GroupCommitService
from pocketmq.store.services.fsync_process import FsyncPipe
from pocketmq.store.services.prepare import IndexFilePreparer, QueueFilePreparer
from pocketmq.store.services.reput import ReputService

if TYPE_CHECKING:
    from pocketmq.store.index.process.control import IndexProcess
    from pocketmq.store.queue.consume_queue import ConsumeQueue

__all__ = ["StoreServices"]

logger = logging.getLogger(__name__)

#: how long shutdown waits for the index process to catch up, flush and exit
INDEX_STOP_TIMEOUT_S = 30.0


class StoreServices:
    #: the periodic flushes fsync in a helper process (``FsyncPipe``); tests switch it off to
    #: inject faults into the executor's fsyncs
    use_fsync_process = True

    def __init__(self, store: ServedStore) -> None:
        cfg = store.config
        cp = store.checkpoint
        assert cp is not None
        self.store = store
        self.flush_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="store-flush")
        # not niced: a low-priority thread descheduled while it holds the GIL would stall the loop
        self.io_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-io")
        # short jobs that must not wait behind a 64 MiB prefault in store-io: ConsumeQueue
        # files and CommitLog block reservations
        self.prepare_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-prepare")
        #: ConsumeQueue files made off the loop, ahead of need (the queues' allocator)
        self.prepare = QueueFilePreparer(self.prepare_executor, cfg.cq_file_size)
        fx, io = self.flush_executor, self.io_executor
        self.reput = ReputService(store.dispatcher)
        self.group_commit = GroupCommitService(store.commitlog, cp, cfg, fx)
        self.commitlog_flush = CommitLogFlushService(store.commitlog, cp, cfg, fx)
        self.cq_flush = ConsumeQueueFlushService(
            store.commitlog, store.cq_table, store.index, store.dispatcher, cp, cfg, fx
        )
        self.index_prepare: IndexFilePreparer | None = None
        if cfg.message_index_enable and not cfg.index_process_enable:
            self.index_prepare = IndexFilePreparer(self.prepare_executor, store.index)
            store.index.prepared = self.index_prepare.take
        self.cq_flush.on_written = self._written
        self.clean = CleanService(store, io)
        self.housekeeping = HousekeepingService(store, io)
        # Next segments are prefaulted off the loop (READ: clean page-cache pages; WRITE only
        # with warmMapedFileEnable, as Java's warm-up writes zeros).
        sync = cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self.allocate = AllocateService(
            io,
            prefault=True,
            warm_write=cfg.warm_maped_file_enable,
            random_writer=sync,
            check_disk=store.commitlog.check_disk_ratio,
            reserve_executor=self.prepare_executor,
        )
        self._services: list[Service] = [
            self.reput,
            self.group_commit if sync else self.commitlog_flush,
            self.cq_flush,
            self.clean,
            self.housekeeping,
        ]
        #: called after every stored put (``MessageStore``): wakes reput and, under SYNC_FLUSH,
        #: collects a finished fsync without waiting for the loop (``GroupCommitService.poll``)
        self.after_put: Callable[[], None] = self.reput.wakeup
        if sync:
            self.group_commit.reput_gate, self.group_commit.wake_reput = self.reput, self.reput.wakeup
            self.after_put = self.group_commit.poll
        self.index_proc: IndexProcess | None = None
        self._index_watch: StoreService | None = None
        self.fsync_pipe: FsyncPipe | None = None
        #: called after each reput batch (the HA master wakes its transfers)
        self.after_dispatch: Callable[[], None] | None = None

    def start(self) -> None:
        mfq = self.store.commitlog.mfq
        mfq.on_created = self.allocate.on_created
        if mfq.last is not None:
            self.allocate.on_created(mfq.last)
        elif self.store.config.broker_role is not BrokerRole.SLAVE:
            self._first_segment()
        if self.index_prepare is not None and not self.store.index.files:
            # a fresh store's first IndexFile, made ahead as later ones are: made by the first
            # write of index entries (256 keys, or the first flush pass), on the loop, its slot
            # table's pages were then faulted in one by one by the keys of the first seconds
            self.index_prepare.request()
        self.reput.after_batch = self._after_reput
        if self.use_fsync_process:
            try:
                self.fsync_pipe = FsyncPipe()
            except OSError as exc:
                logger.error("cannot start the fsync process (%s): flushes fsync in a thread", exc)
        self.commitlog_flush.pipe = self.cq_flush.pipe = self.fsync_pipe
        cfg = self.store.config
        if cfg.index_process_enable and cfg.message_index_enable:
            self._start_index_process()
        for s in self._services:
            s.start()
        self.reput.wakeup()

    def _first_segment(self) -> None:
        """A fresh master's first CommitLog segment (offset 0, where its first put would create
        it), made now rather than by the first put: made there, on the loop, that put also
        started the allocation threads (a thread start waits until the new thread runs) and
        competed with them for the GIL while they prepared the next segment; the first
        messages of a fresh broker took 3-8 ms end to end (~0.5 ms once it runs). A slave's
        first segment is where the master's transfer starts, so it is left to that."""
        try:
            self.store.commitlog.mfq.last_for_append()
        except OSError as exc:  # ENOSPC...: the first put tries again and reports it
            logger.warning("cannot create the first CommitLog segment yet: %s", exc)

    def _start_index_process(self) -> None:
        from pocketmq.store.index.process.control import IndexProcess
        from pocketmq.store.services.indexproc import IndexProcService

        store = self.store
        proc = IndexProcess(store.config, store.commitlog, store.index, store.dispatcher)
        try:
            proc.start()
        except OSError as exc:
            logger.error("index process could not be started (%s): indexing in process", exc)
            proc.close()
            return
        self.index_proc = proc
        self._index_watch = IndexProcService(proc, self.flush_executor)
        self._services.append(self._index_watch)

    def _written(self, queues: list[ConsumeQueue]) -> None:
        """After a ConsumeQueue flush pass that saw new units: files and windows ahead."""
        self.prepare.ahead(queues)
        if self.index_prepare is not None:
            self.index_prepare.ahead()

    def _after_reput(self) -> None:
        # (per reput slice, a send's at one in flight: files[-1], not the ``last`` property, and
        # the hook read before its call, which 3.11 does not specialize as ``self.hook()``)
        # ``advance``'s first test inline: until the writer reaches ``advance_at`` it returns
        # at once, and a call per send is saved
        files = self.store.commitlog.mfq.files
        if files:
            mf = files[-1]
            if mf.wrote_position >= mf.advance_at:
                self.allocate.advance(mf)
        if self.index_proc is not None:
            self.index_proc.publish(self.store.dispatcher.reput_from_offset)
        after = self.after_dispatch
        if after is not None:
            after()

    async def stop(self) -> None:
        """Reverse start order; reput drains, then the flushers run a last time."""
        self.store.commitlog.mfq.on_created = None
        loop = asyncio.get_running_loop()
        first: list[Service] = [self.clean, self.housekeeping, self.reput]
        for s in first:
            await s.stop()
        proc = self.index_proc
        if proc is not None:
            if self._index_watch is not None:
                await self._index_watch.stop()
            # everything is dispatched: the child indexes the rest and flushes, then the
            # store owns the index files again (and indexes what a dead child left)
            proc.request_stop()
            await loop.run_in_executor(None, proc.wait, INDEX_STOP_TIMEOUT_S)
            try:
                proc.close()
            except (OSError, ValueError) as exc:  # e.g. ENOSPC for a new index file
                logger.error("indexing what the index process left failed: %s", exc)
            self.index_proc = None
        for s in self._services[1:3]:
            await s.stop()
        if self.fsync_pipe is not None:
            self.fsync_pipe.close()
        await self.allocate.stop()
        await self.prepare.stop()
        if self.index_prepare is not None:
            self.store.index.prepared = None
            await self.index_prepare.stop()
        # the final full flush (fsync of every file) also runs off the loop
        await loop.run_in_executor(self.flush_executor, self.store.flush)
        for ex in (self.flush_executor, self.io_executor, self.prepare_executor):
            await loop.run_in_executor(None, functools.partial(ex.shutdown, wait=True))
