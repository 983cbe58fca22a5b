"""Durability services: async CommitLog flush, SYNC_FLUSH group commit, ConsumeQueue/index/checkpoint flush.

Every fsync runs in the store's executor (``os.fdatasync`` releases the GIL; ``mmap.flush``
would not). The loop thread computes what to flush (``flush_plan``), the worker syncs the file
descriptors, and the loop marks the positions flushed afterwards, so no store object is
touched from a worker thread.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pocketmq.remoting.common.service import cancel_and_wait
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.dispatch.dispatcher import Dispatcher
from pocketmq.store.index.file import IndexService
from pocketmq.store.log.commitlog import NO_SERVICES, CommitLog, WakeGate, no_wakeup
from pocketmq.store.log.layout import OS_PAGE_SIZE
from pocketmq.store.log.mapped_file import MappedFile
from pocketmq.store.queue.consume_queue import ConsumeQueue
from pocketmq.store.queue.cq_table import ConsumeQueueTable
from pocketmq.store.recovery.checkpoint import StoreCheckpoint
from pocketmq.store.services.base import StoreService
from pocketmq.store.services.fsync_process import FsyncHelperGone, FsyncPipe, FsyncProcess, results_error

logger = logging.getLogger(__name__)


def _fsync_all(fds: list[int]) -> None:
    """fdatasync each fd. Raises OSError (EIO...): the data is then not known to be on disk."""
    for fd in fds:
        try:
            os.fdatasync(fd)
        except OSError as exc:
            if exc.errno != errno.EBADF:
                raise
            # a file deleted meanwhile (its fd closed): nothing left to sync
            logger.debug("fdatasync(%d) skipped: %s", fd, exc)


async def _sync_files(service: StoreService, pipe: FsyncPipe | None, files: list[MappedFile]) -> None:
    """fdatasync ``files`` through the helper process (``FsyncPipe``: no GIL hand-offs with the
    loop), or in the service's executor without one or once it is gone. Raises OSError (EIO...)."""
    files = [mf for mf in files if not mf.closed]
    if not files:
        return
    if pipe is not None and pipe.alive:
        try:
            await pipe.fsync([mf.sync_key for mf in files])
            return
        except FsyncHelperGone:
            pass  # logged by the pipe; nothing was acknowledged: the thread syncs them all
    await service.in_thread(_fsync_all, [mf.fd for mf in files if not mf.closed])


class CommitLogSyncService(StoreService):
    """What both CommitLog durability services share: the log, the checkpoint whose physic
    timestamp a flush advances, and the flush itself (plan on the loop, fsync in a worker)."""

    def __init__(
        self,
        interval_s: float | None,
        commitlog: CommitLog,
        checkpoint: StoreCheckpoint,
        executor: ThreadPoolExecutor,
    ) -> None:
        super().__init__(interval_s, executor)
        self.commitlog = commitlog
        self.mfq = commitlog.mfq
        self.checkpoint = checkpoint
        #: the periodic flushes' helper process (``StoreServices``; None: fsync in the executor)
        self.pipe: FsyncPipe | None = None

    def flush_plan(self) -> tuple[list[tuple[MappedFile, int]], int]:
        """The dirty ranges to sync and the last store timestamp they cover."""
        mfq = self.mfq
        last = mfq.last
        return mfq.flush_plan(), last.last_store_timestamp if last is not None else 0

    def commit_flush(self, plan: list[tuple[MappedFile, int]], ts: int) -> int:
        """Mark ``plan`` flushed after its fsync; returns the new flushed position."""
        mfq = self.mfq
        mfq.commit_flush(plan)
        cp = self.checkpoint
        cp.physic_msg_timestamp = max(cp.physic_msg_timestamp, ts)
        return mfq.flushed_where

    async def flush_commitlog(self) -> int:
        """fsync every dirty page now; returns the flushed position. Raises OSError (EIO...)."""
        plan, ts = self.flush_plan()
        if not plan:
            return self.mfq.flushed_where
        await _sync_files(self, self.pipe, [mf for mf, _ in plan])
        return self.commit_flush(plan, ts)


class CommitLogFlushService(CommitLogSyncService):
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
        super().__init__(config.flush_interval_commit_log / 1000, commitlog, checkpoint, executor)
        self.least_bytes = config.flush_commit_log_least_pages * OS_PAGE_SIZE
        self.thorough_s = config.flush_commit_log_thorough_interval / 1000
        self._last_thorough = time.monotonic()

    async def run_once(self) -> None:
        dirty = self.mfq.dirty_bytes()
        now = time.monotonic()
        thorough = now - self._last_thorough >= self.thorough_s
        if dirty and (dirty >= self.least_bytes or thorough):
            if thorough:
                self._last_thorough = now
            await self.flush_commitlog()

    async def on_stop(self) -> None:
        await self.flush_commitlog()


#: pause before retrying a failed group-commit fsync
_FSYNC_RETRY_S = 0.05
#: GIL switch interval while group commit fsyncs in a thread (see ``GroupCommitService._use_thread``)
SWITCH_INTERVAL_S = 0.0005
#: [services that lowered it, the interval before the first did]
_switch_state: list[float] = [0, 0.0]


def _lower_switch_interval() -> None:
    if _switch_state[0] == 0:
        _switch_state[1] = sys.getswitchinterval()
        sys.setswitchinterval(min(_switch_state[1], SWITCH_INTERVAL_S))
    _switch_state[0] += 1


def _restore_switch_interval() -> None:
    _switch_state[0] -= 1
    if _switch_state[0] == 0:
        sys.setswitchinterval(_switch_state[1])


#: what ``MessageStore.flush_waiter`` hands out: a round's shared future (the type lives here
#: because only the services may import asyncio)
RoundFuture = asyncio.Future[bool]


#: called with a round's future right after it is resolved (``GroupCommitService.wait_flushed``)
RoundCallback = Callable[[asyncio.Future[bool]], None]


class _Round:
    """Waiters that share one fsync: resolved together once ``flushed_where >= end``."""

    __slots__ = ("count", "deadline", "direct", "end", "future")

    def __init__(self, future: asyncio.Future[bool], end: int, deadline: float) -> None:
        self.future = future
        self.end = end
        self.deadline = deadline
        self.count = 0
        #: callbacks run in the call that resolves the round (``wait_flushed``'s ``direct``)
        self.direct: list[RoundCallback] | None = None

    def resolve(self, flushed: bool) -> None:
        fut = self.future
        if not fut.done():
            fut.set_result(flushed)
        direct, self.direct = self.direct, None
        if direct is not None:
            for cb in direct:
                try:
                    cb(fut)
                except Exception:  # one waiter's failure must not cost the others their answer
                    logger.exception("group commit round callback failed")


class GroupCommitService(CommitLogSyncService):
    """SYNC_FLUSH: put waiters are resolved once ``flushed_where`` covers their end offset.

    Waiters join the *open round* and all await its one future (no future, queue entry or
    wake-up per message). One fsync runs at a time, in a helper process (``fsync_process``:
    no wait for the GIL before it starts or after it ends) or, if that cannot run, in the
    executor; it covers everything written when it started (``_target``) and closes the open
    round, which becomes its *riding round*: a waiter registered later for an end it covers
    (written before it started) joins that round, not the next. Its completion resolves every
    round it covered with one ``set_result`` each, and the next fsync starts at once if
    waiters arrived meanwhile or anything was put since it started (puts of a turn register
    at its end, ``FlushReplies``): the waiters split into groups, some putting while the
    others' data is being synced (for puts no round holds yet: once they are more than half
    as many as the fsync covered, see ``_flush_done``).

    An idle service starts an fsync as soon as the open round holds half as many waiters as
    the last fsync covered (at once for a lone waiter), else in the next loop turn (one
    ``call_soon``), which with many waiters would be only after all of them had put again;
    after an fsync that covered one put (one send in flight), the put itself starts it, by
    a real-time helper (``poll``). A round still pending ``syncFlushTimeout`` after it opened resolves False
    (FLUSH_DISK_TIMEOUT). A failed fsync (EIO) leaves its rounds pending; it is retried.

    No task: the helper's answer is handled in its reader callback, or earlier by the put
    path (``poll``): the fsync marked done, the next one started if rounds wait, the covered
    rounds resolved, in that one call. With a task woken through an ``asyncio.Event`` and
    the fsync's future, each fsync cost two task steps and one more loop turn before the
    waiters' replies went out (at one send in flight, the broker's loop thread spent ~245 µs
    per message under SYNC_FLUSH against ~110 under ASYNC_FLUSH).
    """

    name = "group-commit"
    #: fdatasync in a helper process (tests switch it off to inject faults into the thread's)
    use_process = True
    #: a lone put's fsync (``poll``) by the helper at real-time priority, where permitted
    realtime = True

    def __init__(
        self,
        commitlog: CommitLog,
        checkpoint: StoreCheckpoint,
        config: MessageStoreConfig,
        executor: ThreadPoolExecutor,
    ) -> None:
        super().__init__(None, commitlog, checkpoint, executor)
        self.timeout_s = config.sync_flush_timeout / 1000
        self._open: _Round | None = None
        #: the round the fsync in flight resolves (``wait_flushed``: ends it covers join it)
        self._riding: _Round | None = None
        #: the CommitLog end offset the last fsync started covers (its plan's)
        self._target = 0
        self._rounds: deque[_Round] = deque()
        #: the fsync in flight: (the flush plan, last store timestamp it covers)
        self._inflight: tuple[list[tuple[MappedFile, int]], int] | None = None
        #: set while an fsync is in flight and ``on_stop`` waits for it
        self._idle: asyncio.Future[None] | None = None
        self._eager = 1
        #: puts since the last fsync started (``poll``), and whether that fsync covered one
        #: at most: sends one at a time, whose fsync ``poll`` starts right at the put
        self._puts = 0
        self._lone = True
        #: puts the fsync in flight covers (those counted when it started)
        self._covers = 0
        self._kick_pending = False
        self._retry: asyncio.TimerHandle | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._flushed: asyncio.Future[bool] | None = None
        self._switch_lowered = False
        self._loop: asyncio.AbstractEventLoop | None = None
        #: the fsync helper process (None: fsync in the executor)
        self._proc: FsyncProcess | None = None
        #: the last one-file request: (the file's ``sync_key``, its bytes for the helper)
        self._request: tuple[str, bytes] = ("", b"")
        #: reput's wake-up and its gate (``StoreServices``): :meth:`poll` is the store's
        #: ``after_put`` and wakes reput first, unless a wake-up is already scheduled
        self.reput_gate: WakeGate = NO_SERVICES
        self.wake_reput: Callable[[], None] = no_wakeup

    def wait_flushed(self, end_offset: int, direct: RoundCallback | None = None) -> asyncio.Future[bool]:
        """A future that becomes True once ``end_offset`` is on disk (False on timeout).

        ``direct`` (once per round: a second registration of the same callable is ignored)
        is called with the future in the call that resolves it, e.g. the fsync helper's
        reader callback, rather than a loop turn later as a done-callback is; not called if
        the returned future is done already.

        An end the fsync in flight covers (written before it started) joins the round that
        fsync resolves, not the open one: a turn's puts registered after an fsync started
        mid-turn ride it (``FlushReplies`` registers such a turn in two parts).
        """
        if self.mfq.flushed_where >= end_offset:
            done = self._flushed
            if done is None:
                done = self._flushed = asyncio.get_running_loop().create_future()
                done.set_result(True)
            return done  # awaiting a done future returns at once; safe to share
        riding = end_offset <= self._target
        rnd = self._riding if riding else self._open
        if rnd is None:
            # (the loop kept by start: get_running_loop is a getpid syscall per call in 3.11)
            loop = self._loop or asyncio.get_running_loop()
            rnd = _Round(loop.create_future(), end_offset, loop.time() + self.timeout_s)
            rounds = self._rounds
            if riding:
                # rounds stay in end order: the open round, if any, is the last one and ends
                # past the target
                self._riding = rnd
                rounds.insert(len(rounds) - (self._open is not None), rnd)
            else:
                self._open = rnd
                rounds.append(rnd)
        elif end_offset > rnd.end:
            rnd.end = end_offset
        if direct is not None:
            if rnd.direct is None:
                rnd.direct = [direct]
            elif direct not in rnd.direct:
                rnd.direct.append(direct)
        rnd.count += 1
        if self._inflight is None and not riding and not self._stopping:
            if rnd.count >= self._eager:
                self._start_flush()
            elif not self._kick_pending and self._loop is not None:
                self._kick_pending = True
                self._loop.call_soon(self._kick)
        return rnd.future

    @property
    def pending(self) -> int:
        """Rounds not resolved yet (tests, runtime info)."""
        return len(self._rounds)

    def _kick(self) -> None:
        """Next turn, or a retry after a failed fsync: start an fsync if rounds wait for one."""
        self._kick_pending = False
        self._retry = None
        if self._inflight is None and self._rounds and not self._stopping:
            self._start_flush()

    def _start_flush(self, lone: bool = False) -> None:
        """Close the open round and fsync everything written so far (helper, else executor);
        ``lone``: by the helper at real-time priority (``poll``)."""
        self._riding, self._open = self._open, None
        self._lone = self._puts <= 1
        self._covers = self._puts
        self._puts = 0
        plan, ts = self.flush_plan()
        self._target = self.mfq.max_offset()
        self._inflight = (plan, ts)
        proc = self._proc
        if proc is not None and plan:
            try:
                if len(plan) == 1:
                    # one segment (every fsync but at a segment's end): its request's bytes
                    # kept, not joined and encoded again between the put and the fsync
                    key = plan[0][0].sync_key
                    kept = self._request
                    if kept[0] is not key:
                        kept = self._request = (key, key.encode())
                    proc.send_request(kept[1], lone)
                else:
                    proc.request([mf.sync_key for mf, _ in plan], lone)
                return  # answered in _on_proc
            except OSError as exc:
                logger.error("fsync process unusable (%s): fsync in a thread from now on", exc)
                self._use_thread()
        fds = [mf.fd for mf, _ in plan if not mf.closed]
        fut = asyncio.get_running_loop().run_in_executor(self.executor, _fsync_all, fds)
        fut.add_done_callback(self._on_thread)

    def _on_thread(self, fut: asyncio.Future[None]) -> None:
        # a cancelled fsync is not known to have happened: never acknowledged
        error = OSError(errno.EIO, "fsync cancelled") if fut.cancelled() else fut.exception()
        if error is not None and not isinstance(error, OSError):
            logger.error("CommitLog fsync raised %r", error)
            error = OSError(errno.EIO, str(error))
        self._flush_done(error)

    def poll(self) -> None:
        """After each put (``StoreServices.after_put``, this method itself: one Python call a
        put, not a closure calling reput's ``wakeup`` and this): wake reput (``wake_reput``,
        unless ``reput_gate`` says a wake-up is scheduled), then handle the helper's answer now if it
        has come (``FsyncProcess.answered``: no syscall; the next fsync then starts at once,
        for this put too); with no fsync in flight, start one at once if the last one covered
        a single put.

        The answer: a loop turn that reads and puts a burst of sends holds the reader
        callback back for up to the turn's length (measured at 128 sends in flight: a median
        475 µs from the helper's answer to the callback, for a 770 µs fdatasync). Collected
        here, the covered sends are answered mid-turn, and an fsync for rounds already
        waiting starts then. The start: with one send in flight the fsync need not wait for
        the turn's end (the put's registration, after the reput slice); with more puts per
        fsync it does, so that they share one (``FlushReplies``). Such a lone fsync runs in
        the helper at real-time priority (``realtime``), so that it does not wait for a CPU
        behind the client processes (its run-queue wait was 130-720 µs per message under
        load, often longer than the fdatasync); the gathered ones at normal priority, so that
        a quick helper does not take the loop's CPU between two puts and leave each fsync a
        single put to cover (with every fsync real-time, 640 puts of 32 in-process writers:
        159-561 fsyncs, against 53-77 so; main 43-64; sync22 saw 186-572).
        """
        if not self.reput_gate.scheduled:
            wake = self.wake_reput
            wake()
        proc = self._proc
        if proc is None:
            return
        self._puts += 1
        if self._inflight is not None:
            # inline of services.fsync_process.FsyncProcess.answered
            if proc.answers[0] != proc.answers_read:
                self._on_proc()
        elif self._lone and not self._stopping and self._retry is None:
            self._start_flush(self.realtime)

    def _on_proc(self) -> None:
        """The helper answered (or exited): the fsync in flight is done."""
        proc = self._proc
        if proc is None:
            return
        results = proc.results()
        if results == []:
            return  # spurious wake-up
        if results is None:
            logger.error("fsync process %d exited: fsync in a thread from now on", proc.pid)
            self._use_thread()
            error: OSError | None = OSError(errno.EIO, "fsync process exited")
        else:
            error = results_error(results)
        if self._inflight is not None:
            self._flush_done(error)

    def _flush_done(self, error: BaseException | None) -> None:
        """An fsync ended: resolve the rounds it covered and start the next one if any wait."""
        inflight, self._inflight = self._inflight, None
        idle, self._idle = self._idle, None
        if idle is not None and not idle.done():
            idle.set_result(None)
        if inflight is None:
            return
        if error is not None:
            # nothing is acknowledged; the rounds stay pending (timeouts still apply)
            logger.error("CommitLog fsync failed: %s (retrying)", error)
            if not self._stopping and self._retry is None and self._loop is not None:
                self._retry = self._loop.call_later(_FSYNC_RETRY_S, self._kick)
            return  # on_stop makes the last attempt and answers every waiter
        plan, ts = inflight
        flushed = self.commit_flush(plan, ts)
        rounds = self._rounds
        done: list[_Round] = []
        covered = 0
        while rounds and rounds[0].end <= flushed:
            rnd = rounds.popleft()
            if rnd is self._riding:
                self._riding = None
            elif rnd is self._open:  # (a flush outside this service covered it)
                self._open = None
            covered += rnd.count
            done.append(rnd)
        self._eager = max(1, covered // 2)
        if rounds and rounds[0] is not self._open and rounds[0].end > self.commitlog.max_offset:
            # cannot happen unless the log was truncated under the waiter; do not spin
            self._fail_all()
        if (rounds or self._puts > self._covers // 2) and not self._stopping and self._retry is None:
            # The next fsync first: it runs while this one's replies are built and written.
            # Also for puts since this one started that no round holds yet (a turn's puts
            # register at its end: they ride it, ``wait_flushed``), so the disk is not left
            # idle until the turn ends; but only once they are more than half as many as this
            # fsync covered. For any such put (128 sends in flight, paired runs on a loaded
            # box), fsyncs covered 19-20 puts instead of 57-59, ran 2-3x as often, and each
            # cost the loop and the helper CPU: broker 30-36 -> 25-33, helper 5.9-7.5 ->
            # 3.1-4.1 us/msg with the half, 14-17k -> 18-24k msgs/s.
            self._start_flush()
        for rnd in done:
            rnd.resolve(True)

    def _use_thread(self) -> None:
        """Give up the helper process: later fsyncs run in the executor."""
        proc, self._proc = self._proc, None
        if proc is not None:
            asyncio.get_running_loop().remove_reader(proc.fd)
            proc.close()
        if not self._switch_lowered and not self._stopping:
            # An fsync that returned in the thread waits for the GIL before its waiters can
            # be answered; while the loop is busy putting, CPython hands the GIL over only
            # every switch interval (5 ms by default), which is several fsyncs' time.
            # 0.5 ms: store_bench sync_flush 33-58k -> 47-66k msgs/s (thread path).
            # Process-wide, so only lowered, and put back on stop.
            _lower_switch_interval()
            self._switch_lowered = True

    def start(self) -> None:
        # no task (class docstring): the helper's reader callback and wait_flushed drive it
        loop = self._loop = asyncio.get_running_loop()
        self._sweeper = loop.create_task(self._sweep(), name="store-group-commit-timeouts")
        if self.use_process:
            try:
                self._proc = FsyncProcess()
            except OSError as exc:
                logger.error("cannot start the fsync process (%s): fsync in a thread", exc)
            else:
                loop.add_reader(self._proc.fd, self._on_proc)
                return
        self._use_thread()

    async def run_once(self) -> None:
        """Start an fsync if rounds wait and none runs (what the next-turn callback does)."""
        self._kick()

    def _fail_all(self) -> None:
        self._open = self._riding = None
        while self._rounds:
            self._rounds.popleft().resolve(False)

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            await asyncio.sleep(0.1)
            now = loop.time()
            rounds = self._rounds
            while rounds and rounds[0].deadline <= now:
                rnd = rounds.popleft()
                if rnd is self._open:
                    self._open = None
                elif rnd is self._riding:
                    self._riding = None
                rnd.resolve(False)

    async def on_stop(self) -> None:
        if self._switch_lowered:
            self._switch_lowered = False
            _restore_switch_interval()
        await cancel_and_wait(self._sweeper)
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._inflight is not None:
            # resolved by _flush_done (a failure is logged there; the final flush retries it)
            idle = self._idle = asyncio.get_running_loop().create_future()
            await idle
        self._open = self._riding = None
        try:
            flushed = await self.flush_commitlog()
        except OSError as exc:
            logger.error("final CommitLog fsync failed: %s", exc)
            flushed = self.mfq.flushed_where
        while self._rounds:
            rnd = self._rounds.popleft()
            rnd.resolve(rnd.end <= flushed)
        proc, self._proc = self._proc, None
        if proc is not None:
            asyncio.get_running_loop().remove_reader(proc.fd)
            proc.close()


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
        #: called with the queues written since the last pass (``prepare.QueueFilePreparer.ahead``)
        self.on_written: Callable[[list[ConsumeQueue]], None] | None = None
        self.index = index
        self.dispatcher = dispatcher
        self.checkpoint = checkpoint
        #: the helper process the fsyncs go through (``StoreServices``; None: the executor)
        self.pipe: FsyncPipe | None = None

    async def run_once(self) -> None:
        try:
            self.dispatcher.write_index_backlog()  # (reput's fast path writes index entries in runs)
        except OSError as exc:  # its timestamp stays behind; the next pass or reput retries
            logger.error("index entries could not be written: %s", exc)
        ts = self.dispatcher.last_dispatched_timestamp
        index_ts = self.dispatcher.index_timestamp()
        plans: list[list[tuple[MappedFile, int]]] = []
        queues = []
        for cq in self.cq_table:
            plan = cq.mfq.flush_plan()
            if plan:
                plans.append(plan)
                queues.append(cq)
        if self.on_written is not None and queues:
            self.on_written(queues)
        self.index.write_headers()
        files = [mf for plan in plans for mf, _ in plan]
        index_files = list(self.index.full_unflushed)
        if self.index.files and not self.index.shared:  # (else the index process flushes it)
            index_files.append(self.index.files[-1])
        files += [f.mf for f in index_files]
        await _sync_files(self, self.pipe, files)
        for cq, plan in zip(queues, plans, strict=True):
            cq.mfq.commit_flush(plan)
        for f in index_files:
            if f in self.index.full_unflushed:
                self.index.full_unflushed.remove(f)
        cp = self.checkpoint
        cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, ts)
        cp.index_msg_timestamp = max(cp.index_msg_timestamp, index_ts)
        cp.write()
        await _sync_files(self, self.pipe, [cp.mf])

    async def on_stop(self) -> None:
        await self.run_once()
