"""``IndexProcess``: the store's side of the index process (``indexProcessEnable``).

While a child runs, reput writes ConsumeQueue units only (``Dispatcher.index_enable`` off),
publishes its offset after every slice (``publish``: one slot store and one eventfd write)
and the ``IndexService`` is in shared mode (read-only, re-synced by queries and cleanup).
``Dispatcher.behind`` includes the child's lag, and the checkpoint's indexMsgTimestamp is
the child's FLUSHED_TS (``Dispatcher.index_timestamp``).

A child that dies is restarted from its published INDEXED offset: records between that and
its last header are skipped as already indexed, what it wrote past the header is undone
(``index.scan.settle_last_files``) and written again. After ``MAX_RESTARTS`` failures within
a minute the store indexes in process again. On shutdown the child is told to finish
(``request_stop`` / ``wait``) and the store takes the files back (``reclaim``), indexing in
process whatever a dead or late child left.
"""

from __future__ import annotations

import logging
import mmap
import os
import subprocess
import sys
import threading
import time
from typing import Any, Protocol

from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.index.file import IndexService
from pocketmq.store.index.process.ipc import DISPATCHED, FLUSHED_TS, INDEXED, STOP, SharedState, state_path
from pocketmq.store.index.scan import KeyHashCache, index_range, settle_last_files
from pocketmq.store.log.commitlog import CommitLog

__all__ = ["MAX_RESTARTS", "IndexProcess", "ReputSide"]

logger = logging.getLogger(__name__)

MAX_RESTARTS = 5
_RESTART_WINDOW_S = 60.0


class ReputSide(Protocol):
    """What the control reads and switches on the store's dispatcher (``dispatch.dispatcher.
    Dispatcher``): a Protocol, so the index package does not import the dispatch package."""

    reput_from_offset: int
    index_enable: bool
    #: the running ``IndexProcess`` while it builds the index, else None
    index_child: Any

    def write_index_backlog(self) -> None: ...


class IndexProcess:
    def __init__(
        self, config: MessageStoreConfig, commitlog: CommitLog, index: IndexService, dispatcher: ReputSide
    ) -> None:
        self.config = config
        self.commitlog = commitlog
        self.index = index
        self.dispatcher = dispatcher
        os.makedirs(config.index_dir, exist_ok=True)
        self.state = SharedState(state_path(config.index_dir), create=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self._wake_fd = -1
        self._pipe_w = -1
        self._published = -1
        self._deaths: list[float] = []

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Hand indexing to a new child from where the index ends (reput's offset: recovery
        indexed everything below it)."""
        self.dispatcher.write_index_backlog()
        self.index.write_headers()
        self._spawn(self.dispatcher.reput_from_offset)
        self.index.shared = True
        self.dispatcher.index_enable = False
        self.dispatcher.index_child = self

    def _spawn(self, start: int) -> None:
        cfg = self.config
        self.state.reset(start)
        self._published = self.dispatcher.reput_from_offset
        self.state.slots[DISPATCHED] = self._published
        wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        r, w = os.pipe()
        cmd = [
            sys.executable, "-m", "pocketmq.store.index.process.main",
            "--index-dir", cfg.index_dir, "--commitlog-dir", cfg.commit_log_dir,
            "--segment-size", str(cfg.mapped_file_size_commit_log),
            "--slots", str(cfg.max_hash_slot_num), "--entries", str(cfg.max_index_num),
            "--start", str(start), "--flush-ms", str(cfg.flush_interval_consume_queue),
            "--wake-fd", str(wake), "--parent-fd", str(r),
            "--log-level", logging.getLevelName(logger.getEffectiveLevel()),
        ]  # fmt: skip
        # PR_SET_PDEATHSIG fires when the spawning *thread* exits: only the main thread's
        # lifetime is the process's (the pipe's EOF covers the other cases)
        if threading.current_thread() is threading.main_thread():
            cmd.append("--pdeathsig")
        try:
            self.proc = subprocess.Popen(cmd, pass_fds=(wake, r), stdin=subprocess.DEVNULL)
        except BaseException:
            for fd in (wake, r, w):
                os.close(fd)
            raise
        os.close(r)
        self._wake_fd, self._pipe_w = wake, w
        logger.info("index process %d started at CommitLog offset %d", self.proc.pid, start)

    def _close_fds(self) -> None:
        for fd in (self._wake_fd, self._pipe_w):
            if fd >= 0:
                os.close(fd)
        self._wake_fd = self._pipe_w = -1

    # ---------------------------------------------------------------- running

    def publish(self, offset: int) -> None:
        """Reput reached ``offset``: tell the child (after each slice, not per record)."""
        if offset != self._published and self._wake_fd >= 0:
            self._published = offset
            self.state.slots[DISPATCHED] = offset
            os.eventfd_write(self._wake_fd, 1)

    @property
    def indexed(self) -> int:
        """Every record below this CommitLog offset is indexed."""
        return int(self.state.slots[INDEXED])

    @property
    def flushed_timestamp(self) -> int:
        """Store time of the last record whose index entries are on disk."""
        return int(self.state.slots[FLUSHED_TS])

    def check(self) -> None:
        """The watchdog: restart a child that died (or give up on it, see the module doc)."""
        proc = self.proc
        if proc is not None:
            if proc.poll() is None:
                return
            logger.error(
                "index process %d died (exit code %s) at offset %d", proc.pid, proc.returncode, self.indexed
            )
            self._close_fds()
            self.proc = None
            self._died()
        if self.dispatcher.index_child is not self:
            return  # indexing in process again
        if len(self._deaths) > MAX_RESTARTS:
            logger.error("index process keeps failing: indexing in process from now on")
            self.reclaim()
            return
        try:
            self._spawn(self.indexed)
        except OSError as exc:
            logger.error("index process could not be started: %s", exc)
            self._died()

    def _died(self) -> None:
        now = time.monotonic()
        self._deaths = [t for t in self._deaths if now - t < _RESTART_WINDOW_S] + [now]

    # ---------------------------------------------------------------- shutdown

    def request_stop(self) -> None:
        """Final offset published, STOP set: the child indexes the rest, flushes and exits."""
        self.publish(self.dispatcher.reput_from_offset)
        self.state.slots[STOP] = 1
        if self._wake_fd >= 0:
            os.eventfd_write(self._wake_fd, 1)

    def wait(self, timeout_s: float) -> bool:
        """Blocking (run it off the loop): True if the child exited in time; killed if not."""
        proc = self.proc
        if proc is None:
            return False
        try:
            proc.wait(timeout_s)
            return proc.returncode == 0
        except subprocess.TimeoutExpired:
            logger.error("index process %d did not stop in %.0f s: killing it", proc.pid, timeout_s)
            proc.kill()
            proc.wait()
            return False

    def reclaim(self) -> None:
        """Index in this process again (the child is gone): re-read the files it wrote and
        index what it had not reached."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        self._close_fds()
        index = self.index
        index.sync()
        index.shared = False
        redo = settle_last_files(index.files)
        d = self.dispatcher
        d.index_child = None
        d.index_enable = True
        start, end = self.indexed, d.reput_from_offset
        if redo is not None:
            start = min(start, redo)
        if start < end:
            logger.warning("indexing CommitLog [%d, %d) in process", start, end)
            off, _ts = index_range(self._segment_at, index, KeyHashCache(), start, end)
            self.state.slots[INDEXED] = off

    def _segment_at(self, offset: int) -> tuple[mmap.mmap, int, int] | None:
        mfq = self.commitlog.mfq
        mf = mfq.find_by_offset(offset)
        if mf is None:
            if not mfq.files or offset >= mfq.min_offset():
                return None
            mf = mfq.files[0]
        return mf.mm, mf.file_from_offset, mf.file_size

    def close(self) -> None:
        if self.proc is not None:
            self.reclaim()
        self.state.close()
