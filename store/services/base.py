"""``StoreService``: an asyncio task that runs ``run_once`` on a period or when woken up.

The asyncio counterpart of RocketMQ's ``ServiceThread`` without its 1 ms polling: ``wakeup()``
sets an event and the loop waits on it with a plain ``event.wait()``. A periodic service keeps
one ``call_later`` timer that sets the same event and is re-armed only when it fires, rather
than an ``asyncio.timeout`` armed per wait: that context manager (a timer handle, a cancel
and a reschedule per wake-up) was 8-10% of a broker's CPU for the reput service when it ran
here. ``run_once`` holds the logic and can be awaited directly in tests. Unexpected errors are
logged and the loop goes on after a short pause; cancellation is never swallowed.

Work woken by every put runs without a task, as an event wait costs a future and two task
steps per wake-up: ``ReputService`` is not a ``StoreService`` but another ``Service`` (its own
``call_soon`` lifecycle); ``GroupCommitService`` keeps this class for its executor and its
stop/``on_stop`` sequence but starts no task (the fsync helper's answers drive it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from pocketmq.store.config import MessageStoreConfig
    from pocketmq.store.dispatch.dispatcher import Dispatcher
    from pocketmq.store.index.file import IndexService
    from pocketmq.store.log.commitlog import CommitLog
    from pocketmq.store.queue.cq_table import ConsumeQueueTable
    from pocketmq.store.recovery.checkpoint import StoreCheckpoint
    from pocketmq.store.stats import StoreStats

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ServedStore(Protocol):
    """What the services use of the store they run for (``MessageStore`` is one). A Protocol,
    so the services depend on the store's parts, not on the façade that starts them."""

    clock: Callable[[], int]
    #: set by the clean service above ``diskSpaceWarningLevelRatio`` (puts are refused)
    disk_full: bool

    @property
    def config(self) -> MessageStoreConfig: ...
    @property
    def commitlog(self) -> CommitLog: ...
    @property
    def cq_table(self) -> ConsumeQueueTable: ...
    @property
    def index(self) -> IndexService: ...
    @property
    def dispatcher(self) -> Dispatcher: ...
    @property
    def checkpoint(self) -> StoreCheckpoint | None: ...
    @property
    def stats(self) -> StoreStats: ...
    def flush(self) -> None: ...


class Service(Protocol):
    """What ``StoreServices`` starts and stops."""

    def start(self) -> None:
        """Begin (on the loop)."""

    async def stop(self) -> None:
        """End, after a last pass over the work left."""


class StoreService:
    name = "service"

    def __init__(self, interval_s: float | None, executor: ThreadPoolExecutor) -> None:
        self.interval_s = interval_s
        self.executor = executor
        self._event = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def run_once(self) -> None:
        raise NotImplementedError

    async def in_thread(self, fn: Callable[..., T], *args: object) -> T:
        """Run a blocking, GIL-releasing call (fsync, fallocate, unlink) in the store's executor."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def wakeup(self) -> None:
        self._event.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"store-{self.name}")
        self._task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("store service %s died", self.name, exc_info=task.exception())

    def _tick(self) -> None:
        """The period elapsed: wake the loop and re-arm (one timer handle per period)."""
        self._timer = None
        if not self._stopping and self.interval_s is not None:
            self._event.set()
            self._timer = asyncio.get_running_loop().call_later(self.interval_s, self._tick)

    async def _run(self) -> None:
        event = self._event
        if self.interval_s is not None:
            self._timer = asyncio.get_running_loop().call_later(self.interval_s, self._tick)
        while not self._stopping:
            await event.wait()
            event.clear()
            if self._stopping:
                break
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("store service %s failed; retrying", self.name)
                await asyncio.sleep(1.0)

    async def stop(self) -> None:
        """Stop the loop (a run in progress completes first), then run ``on_stop``."""
        self._stopping = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._event.set()
        if self._task is not None:
            try:
                await self._task
            except Exception:
                logger.exception("store service %s ended with an error", self.name)
            self._task = None
        await self.on_stop()

    async def on_stop(self) -> None:
        return None
