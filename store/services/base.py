"""``StoreService``: an asyncio task that runs ``run_once`` on a period or when woken up.

The asyncio counterpart of RocketMQ's ``ServiceThread`` without its 1 ms polling: ``wakeup()``
sets an event, the loop waits on it with the service's interval as timeout. ``run_once`` holds
the logic and can be awaited directly in tests. Unexpected errors are logged and the loop goes
on after a short pause; cancellation is never swallowed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


class StoreService:
    name = "service"

    def __init__(self, interval_s: float | None, executor: ThreadPoolExecutor) -> None:
        self.interval_s = interval_s
        self.executor = executor
        self._event = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    async def run_once(self) -> None:
        raise NotImplementedError

    async def in_thread(self, fn: Callable[..., T], *args: object) -> T:
        """Run a blocking, GIL-releasing call (fsync, fallocate, unlink) in the store's executor."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def wakeup(self) -> None:
        self._event.set()

    def wakeup_callable(self) -> Callable[[], None]:
        """``wakeup`` without its own frame (bound ``Event.set``), for per-message callers."""
        return self._event.set

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"store-{self.name}")
        self._task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("store service %s died", self.name, exc_info=task.exception())

    async def _run(self) -> None:
        event = self._event
        while not self._stopping:
            if self.interval_s is None:
                await event.wait()
            else:
                try:
                    async with asyncio.timeout(self.interval_s):
                        await event.wait()
                except TimeoutError:
                    pass
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
