"""The store's asyncio services (the only store modules besides ``ha`` that touch asyncio).

``StoreServices`` wires them for one ``MessageStore``: reput (event-driven), CommitLog flush
(ASYNC_FLUSH) or group commit (SYNC_FLUSH), ConsumeQueue/index/checkpoint flush, next-segment
allocation, cleanup and housekeeping. Blocking syscalls run in two small thread pools: one
for fsync, one for allocation and unlinking (so a slow fallocate never delays a group commit).
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pocketmq.store.config import FlushDiskType
from pocketmq.store.services.allocate import AllocateService
from pocketmq.store.services.base import StoreService
from pocketmq.store.services.clean import CleanService, HousekeepingService
from pocketmq.store.services.flush import CommitLogFlushService, ConsumeQueueFlushService, GroupCommitService
from pocketmq.store.services.reput import ReputService

if TYPE_CHECKING:
    from pocketmq.store.message_store import MessageStore

__all__ = ["StoreServices"]


class StoreServices:
    def __init__(self, store: MessageStore) -> None:
        cfg = store.config
        cp = store.checkpoint
        assert cp is not None
        self.store = store
        self.flush_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="store-flush")
        self.io_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-io")
        fx, io = self.flush_executor, self.io_executor
        self.reput = ReputService(store.dispatcher, fx)
        self.group_commit = GroupCommitService(store.commitlog, cp, cfg, fx)
        self.commitlog_flush = CommitLogFlushService(store.commitlog, cp, cfg, fx)
        self.cq_flush = ConsumeQueueFlushService(
            store.commitlog, store.cq_table, store.index, store.dispatcher, cp, cfg, fx
        )
        self.clean = CleanService(store, io)
        self.housekeeping = HousekeepingService(store, io)
        # Next segments are prefaulted off the loop (READ: clean page-cache pages; WRITE only
        # with warmMapedFileEnable, as Java's warm-up writes zeros).
        sync = cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self.allocate = AllocateService(
            io, prefault=True, warm_write=cfg.warm_maped_file_enable, random_writer=sync
        )
        self._services: list[StoreService] = [
            self.reput,
            self.group_commit if sync else self.commitlog_flush,
            self.cq_flush,
            self.clean,
            self.housekeeping,
        ]

    def start(self) -> None:
        mfq = self.store.commitlog.mfq
        mfq.on_created = self.allocate.on_created
        if mfq.last is not None:
            self.allocate.on_created(mfq.last)
        self.reput.after_batch = self._advance_prefault
        for s in self._services:
            s.start()
        self.reput.wakeup()

    def _advance_prefault(self) -> None:
        last = self.store.commitlog.mfq.last
        if last is not None:
            self.allocate.advance(last)

    async def stop(self) -> None:
        """Reverse start order; reput drains, then the flushers run a last time."""
        self.store.commitlog.mfq.on_created = None
        order = [self.clean, self.housekeeping, self.reput, *self._services[1:3]]
        for s in order:
            await s.stop()
        await self.allocate.stop()
        loop = asyncio.get_running_loop()
        # the final full flush (fsync of every file) also runs off the loop
        await loop.run_in_executor(self.flush_executor, self.store.flush)
        for ex in (self.flush_executor, self.io_executor):
            await loop.run_in_executor(None, functools.partial(ex.shutdown, wait=True))
