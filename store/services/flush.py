"""Durability services: async CommitLog flush, SYNC_FLUSH group commit, ConsumeQueue/index/checkpoint flush.

Every fsync runs in the store's executor (``os.fdatasync`` releases the GIL; ``mmap.flush``
would not). The loop thread computes what to flush (``flush_plan``), the worker syncs the file
descriptors, and the loop marks the positions flushed afterwards, so no store object is
touched from a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from pocketmq.store.checkpoint import StoreCheckpoint
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.cq_table import ConsumeQueueTable
from pocketmq.store.dispatch import Dispatcher
from pocketmq.store.index_file import IndexService
from pocketmq.store.layout import OS_PAGE_SIZE
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.services.base import StoreService

logger = logging.getLogger(__name__)


def _fsync_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.fdatasync(fd)
        except OSError as exc:  # a file deleted meanwhile (its fd closed): nothing left to sync
            logger.debug("fdatasync(%d) skipped: %s", fd, exc)


async def _flush_commitlog(service: StoreService, commitlog: CommitLog, checkpoint: StoreCheckpoint) -> int:
    mfq = commitlog.mfq
    plan = mfq.flush_plan()
    if not plan:
        return mfq.flushed_where
    last = mfq.last
    ts = last.last_store_timestamp if last is not None else 0
    await service.in_thread(_fsync_all, [mf.fd for mf, _ in plan if not mf.closed])
    mfq.commit_flush(plan)
    checkpoint.physic_msg_timestamp = max(checkpoint.physic_msg_timestamp, ts)
    return mfq.flushed_where


class CommitLogFlushService(StoreService):
    """ASYNC_FLUSH: every ``flushIntervalCommitLog`` ms if >= ``flushCommitLogLeastPages`` pages
    are dirty, and at least every ``flushCommitLogThoroughInterval`` ms."""

    name = "flush-commitlog"

    def __init__(
        self,
        commitlog: CommitLog,
        checkpoint: StoreCheckpoint,
        config: MessageStoreConfig,
        executor: ThreadPoolExecutor,
    ) -> None:
        super().__init__(config.flush_interval_commit_log / 1000, executor)
        self.commitlog = commitlog
        self.checkpoint = checkpoint
        self.least_bytes = config.flush_commit_log_least_pages * OS_PAGE_SIZE
        self.thorough_s = config.flush_commit_log_thorough_interval / 1000
        self._last_thorough = time.monotonic()

    async def run_once(self) -> None:
        dirty = self.commitlog.mfq.dirty_bytes()
        now = time.monotonic()
        thorough = now - self._last_thorough >= self.thorough_s
        if dirty and (dirty >= self.least_bytes or thorough):
            if thorough:
                self._last_thorough = now
            await _flush_commitlog(self, self.commitlog, self.checkpoint)

    async def on_stop(self) -> None:
        await _flush_commitlog(self, self.commitlog, self.checkpoint)


class GroupCommitService(StoreService):
    """SYNC_FLUSH: put waiters are resolved once ``flushed_where`` covers their end offset.

    One fsync serves every waiter that arrived before it started (group commit). Waiters that
    are still pending after ``syncFlushTimeout`` get False (FLUSH_DISK_TIMEOUT); waiters are
    FIFO by offset and by deadline, so both sweeps pop from the left.
    """

    name = "group-commit"

    def __init__(
        self,
        commitlog: CommitLog,
        checkpoint: StoreCheckpoint,
        config: MessageStoreConfig,
        executor: ThreadPoolExecutor,
    ) -> None:
        super().__init__(None, executor)
        self.commitlog = commitlog
        self.checkpoint = checkpoint
        self.timeout_s = config.sync_flush_timeout / 1000
        self._waiters: deque[tuple[int, float, asyncio.Future[bool]]] = deque()
        self._sweeper: asyncio.Task[None] | None = None

    def wait_flushed(self, end_offset: int) -> asyncio.Future[bool]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if self.commitlog.mfq.flushed_where >= end_offset:
            fut.set_result(True)
            return fut
        self._waiters.append((end_offset, loop.time() + self.timeout_s, fut))
        self._event.set()
        return fut

    def start(self) -> None:
        super().start()
        self._sweeper = asyncio.get_running_loop().create_task(
            self._sweep(), name="store-group-commit-timeouts"
        )

    async def run_once(self) -> None:
        waiters = self._waiters
        while waiters:
            flushed = await _flush_commitlog(self, self.commitlog, self.checkpoint)
            while waiters and waiters[0][0] <= flushed:
                fut = waiters.popleft()[2]
                if not fut.done():
                    fut.set_result(True)
            if waiters and waiters[0][0] > self.commitlog.max_offset:
                # cannot happen unless the log was truncated under the waiter; do not spin
                self._fail_all()

    def _fail_all(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()[2]
            if not fut.done():
                fut.set_result(False)

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            await asyncio.sleep(0.1)
            now = loop.time()
            waiters = self._waiters
            while waiters and waiters[0][1] <= now:
                fut = waiters.popleft()[2]
                if not fut.done():
                    fut.set_result(False)

    async def on_stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            try:
                await self._sweeper
            except asyncio.CancelledError:
                pass
        flushed = await _flush_commitlog(self, self.commitlog, self.checkpoint)
        while self._waiters:
            end, _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(end <= flushed)


class ConsumeQueueFlushService(StoreService):
    """Every ``flushIntervalConsumeQueue`` ms: fsync dirty ConsumeQueue and index files, then
    advance and fsync the checkpoint's logics/index timestamps."""

    name = "flush-consumequeue"

    def __init__(
        self,
        commitlog: CommitLog,
        cq_table: ConsumeQueueTable,
        index: IndexService,
        dispatcher: Dispatcher,
        checkpoint: StoreCheckpoint,
        config: MessageStoreConfig,
        executor: ThreadPoolExecutor,
    ) -> None:
        super().__init__(config.flush_interval_consume_queue / 1000, executor)
        self.commitlog = commitlog
        self.cq_table = cq_table
        self.index = index
        self.dispatcher = dispatcher
        self.checkpoint = checkpoint

    async def run_once(self) -> None:
        ts = self.dispatcher.last_dispatched_timestamp
        plans: list[list[tuple[MappedFile, int]]] = []
        queues = []
        for cq in self.cq_table:
            plan = cq.mfq.flush_plan()
            if plan:
                plans.append(plan)
                queues.append(cq)
        self.index.write_headers()
        fds = [mf.fd for plan in plans for mf, _ in plan if not mf.closed]
        index_files = list(self.index.full_unflushed)
        if self.index.files:
            index_files.append(self.index.files[-1])
        fds += [f.mf.fd for f in index_files if not f.mf.closed]
        if fds:
            await self.in_thread(_fsync_all, fds)
        for cq, plan in zip(queues, plans, strict=True):
            cq.mfq.commit_flush(plan)
        for f in index_files[:-1] if self.index.files else index_files:
            if f in self.index.full_unflushed:
                self.index.full_unflushed.remove(f)
        cp = self.checkpoint
        if ts > cp.logics_msg_timestamp:
            cp.logics_msg_timestamp = ts
            cp.index_msg_timestamp = ts
        cp.write()
        if not cp.mf.closed:
            await self.in_thread(_fsync_all, [cp.mf.fd])

    async def on_stop(self) -> None:
        await self.run_once()
