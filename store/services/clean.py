"""Retention and housekeeping services; the decisions themselves are pure (store/services/cleanup.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

from pocketmq.store.log.syscalls import disk_usage_ratio
from pocketmq.store.services.base import ServedStore, StoreService
from pocketmq.store.services.cleanup import count_expired_files, decide

logger = logging.getLogger(__name__)


def _mtimes_ms(paths: list[str]) -> list[int]:
    out = []
    for p in paths:
        try:
            out.append(int(os.stat(p).st_mtime * 1000))
        except FileNotFoundError:
            out.append(0)
    return out


class CleanService(StoreService):
    """Every ``cleanResourceInterval`` ms: disk-full flag, expired CommitLog segments, then the
    ConsumeQueue and index files that only point below the new CommitLog start."""

    name = "clean"

    def __init__(self, store: ServedStore, executor: ThreadPoolExecutor) -> None:
        super().__init__(store.config.clean_resource_interval / 1000, executor)
        self.store = store
        #: rounds of forced deletion requested by an admin (Java executeDeleteFilesManually: 20)
        self.manual_delete_rounds = 0

    async def run_once(self) -> None:
        store = self.store
        cfg = store.config
        try:
            ratio = await self.in_thread(disk_usage_ratio, cfg.commit_log_dir)
        except OSError:
            ratio = -1.0
        hour = time.localtime(store.clock() / 1000).tm_hour
        decision = decide(
            hour=hour,
            used_ratio=ratio,
            delete_when=cfg.delete_when,
            disk_max_used_space_ratio=cfg.disk_max_used_space_ratio,
            disk_space_clean_forcibly_ratio=cfg.disk_space_clean_forcibly_ratio,
            disk_space_warning_level_ratio=cfg.disk_space_warning_level_ratio,
            clean_file_forcibly_enable=cfg.clean_file_forcibly_enable,
            manual=self.manual_delete_rounds > 0,
        )
        if decision.disk_full != store.disk_full:
            log = logger.error if decision.disk_full else logger.info
            log("disk %s is %.1f%% used: puts %s", cfg.commit_log_dir, ratio * 100,
                "refused" if decision.disk_full else "accepted again")  # fmt: skip
            store.disk_full = decision.disk_full
        if decision.delete:
            if self.manual_delete_rounds > 0:
                self.manual_delete_rounds -= 1
            await self.delete_commitlog_files(decision.clean_immediately)
        self.clean_queues()

    async def delete_commitlog_files(self, clean_immediately: bool) -> int:
        store = self.store
        mfq = store.commitlog.mfq
        paths = [mf.path for mf in mfq.files]
        mtimes = await self.in_thread(_mtimes_ms, paths)
        n = count_expired_files(
            mtimes,
            store.clock(),
            store.config.file_reserved_time * 3_600_000,
            clean_immediately=clean_immediately,
        )
        # the files may have changed while we were in the thread: only delete the same leading ones
        n = min(n, len(mfq.files))
        while n and [mf.path for mf in mfq.files[:n]] != paths[:n]:
            n -= 1
        for mf in mfq.delete_first(n):
            path = mf.path
            # munmap of a 1 GiB segment tears down its page tables (tens of ms): not on the loop;
            # the segment has left the queue, so only holders of views still read it (and those
            # make close() refuse)
            if not await self.in_thread(mf.close):
                logger.warning("CommitLog segment %s still referenced; deleting anyway", path)
            await self.in_thread(_unlink, path)
            logger.info("deleted expired CommitLog segment %s", path)
            await asyncio.sleep(store.config.delete_commit_log_files_interval / 1000)
        return n

    def clean_queues(self) -> None:
        store = self.store
        min_phy = store.commitlog.min_offset
        for cq in store.cq_table:
            cq.delete_expired(min_phy)
        store.index.delete_expired(min_phy)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class HousekeepingService(StoreService):
    """Once a second: statistics sample (for the 10/60/600 s rates)."""

    name = "housekeeping"

    def __init__(self, store: ServedStore, executor: ThreadPoolExecutor) -> None:
        super().__init__(1.0, executor)
        self.store = store

    async def run_once(self) -> None:
        store = self.store
        store.stats.sample(store.clock(), store.commitlog.put_times_total)
