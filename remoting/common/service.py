"""Background services and task hygiene for the event loop.

:class:`Service` is the asyncio counterpart of RocketMQ's ``ServiceThread``: a loop that runs
:meth:`Service.run_once` every ``interval`` seconds, or at once when :meth:`Service.wakeup` is
called. Rules:

1. ``run_once`` holds the logic and can be awaited directly by tests; the loop adds only timing.
2. A wakeup that arrives while ``run_once`` is running is not lost: the event is cleared *before*
   each run, so the next wait returns immediately (``ServiceThread.hasNotified``).
3. An exception from one iteration is logged with its traceback and the loop continues; a
   service never dies silently. ``CancelledError`` is never swallowed.
4. :meth:`Service.stop` lets the current iteration finish for up to ``grace`` seconds, then
   cancels; afterwards :meth:`Service.on_shutdown` runs once (e.g. a last flush).

:class:`TaskSet` keeps strong references to fire-and-forget tasks (the loop only keeps weak
ones), logs their unexpected failures from a done-callback, and cancels them newest first.
:func:`cancel_and_wait` stops one task (a sweeper, a timer loop) and waits until it is gone;
:func:`wake_first` wakes the first still-waiting future of a FIFO of waiters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


def wake_first(waiters: deque[asyncio.Future[None]]) -> None:
    """Wake the first of ``waiters`` (FIFO) still waiting; the done ones before it (their
    waiter was cancelled) are dropped."""
    while waiters:
        w = waiters.popleft()
        if not w.done():
            w.set_result(None)
            return


class Service:
    """A periodic or wakeup-driven background loop owned by the running event loop.

    Subclasses override :meth:`run_once` and optionally :meth:`on_shutdown`.

    Args:
        interval: seconds between runs; ``None`` runs only on :meth:`wakeup`.
        initial_delay: seconds to wait before the first run (``stop`` interrupts it).
        name: used for the task name and log lines; defaults to the class name.
    """

    def __init__(
        self,
        *,
        interval: float | None,
        initial_delay: float = 0.0,
        name: str | None = None,
    ) -> None:
        if interval is not None and interval < 0:
            raise ValueError(f"interval must be >= 0 or None, got {interval}")
        if initial_delay < 0:
            raise ValueError(f"initial_delay must be >= 0, got {initial_delay}")
        self.interval = interval
        self.initial_delay = initial_delay
        self.name = name or type(self).__name__
        self._wakeup = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        #: Number of completed iterations (successful or not); handy for tests and metrics.
        self.iterations = 0
        #: Number of iterations that raised.
        self.failures = 0

    # -- to override -------------------------------------------------------------------------

    async def run_once(self) -> None:
        """One unit of work. Exceptions are logged by the loop, which keeps going."""
        raise NotImplementedError

    async def on_shutdown(self) -> None:
        """Called once by :meth:`stop` after the loop has ended (default: nothing)."""

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def is_stopping(self) -> bool:
        return self._stopping

    def start(self) -> None:
        """Start the loop as a task of the running event loop.

        Raises:
            RuntimeError: already started, or no running event loop.
        """
        if self._task is not None:
            raise RuntimeError(f"service {self.name} already started")
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"service:{self.name}")

    def wakeup(self) -> None:
        """Run the next iteration now (or right after the current one)."""
        self._wakeup.set()

    async def stop(self, grace: float = 5.0) -> None:
        """Stop the loop; idempotent.

        The iteration in progress may finish within ``grace`` seconds, after which the task is
        cancelled. :meth:`on_shutdown` then runs (also when the service was never started, so a
        final flush is not skipped). Exceptions from ``on_shutdown`` propagate.
        """
        if self._stopping and self._task is None:
            return
        self._stopping = True
        self._wakeup.set()
        if self._task is not None and self._task is asyncio.current_task():
            # Called from run_once itself: the loop ends after this iteration; on_shutdown
            # runs when someone else calls stop() (awaiting our own task would deadlock).
            return
        task, self._task = self._task, None
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=grace)
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task is not None and task.done() and not task.cancelled():
            exc = task.exception()
            if exc is not None:  # only possible for bugs in the loop itself
                logger.error("service %s loop ended with an error", self.name, exc_info=exc)
        await self.on_shutdown()

    # -- the loop ----------------------------------------------------------------------------

    async def _wait(self, timeout: float | None) -> None:
        """Wait for a wakeup or ``timeout`` seconds, whichever comes first."""
        if self._wakeup.is_set():
            return
        if timeout is None:
            await self._wakeup.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wakeup.wait()

    async def _run(self) -> None:
        logger.debug("service %s started", self.name)
        if self.initial_delay > 0:
            await self._wait(self.initial_delay)
        while not self._stopping:
            # Cleared before the run: a wakeup during run_once triggers the next run at once.
            self._wakeup.clear()
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failures += 1
                logger.exception("service %s: iteration failed; continuing", self.name)
            self.iterations += 1
            if self._stopping:
                break
            await self._wait(self.interval)
        logger.debug("service %s stopped", self.name)


class TaskSet:
    """Strong references to background tasks, with error logging and ordered cancellation."""

    def __init__(self, name: str = "tasks") -> None:
        self.name = name
        # dict preserves insertion order: cancellation goes newest first.
        self._tasks: dict[asyncio.Task[Any], None] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, task: object) -> bool:
        return task in self._tasks

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Create a task on the running loop and keep it referenced until it ends."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.add(task)
        return task

    def add(self, task: asyncio.Task[T]) -> asyncio.Task[T]:
        """Keep ``task`` referenced until it ends; log it if it fails unexpectedly."""
        self._tasks[task] = None
        task.add_done_callback(self._on_done)
        return task

    def _on_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(task, None)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            logger.error("%s: task %s failed", self.name, task.get_name(), exc_info=exc)

    async def cancel_all(self, timeout: float | None = 5.0) -> None:
        """Cancel every task, newest first, waiting for each to finish (up to ``timeout`` each)."""
        for task in reversed(list(self._tasks)):
            if task.done():
                continue
            task.cancel()
            # asyncio.wait never raises the task's exception; the done-callback logs it.
            await asyncio.wait({task}, timeout=timeout)
            if not task.done():
                logger.warning("%s: task %s ignored cancellation", self.name, task.get_name())
        self._tasks = {t: None for t in self._tasks if not t.done()}


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (None: nothing to do) and wait until it has finished.

    Its cancellation, or whatever it raised meanwhile, ends here (an unexpected exception is
    logged); the cancellation of the *calling* task is never swallowed (``asyncio.wait``
    propagates it), unlike ``try: await task / except CancelledError: pass``.
    """
    if task is None:
        return
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled() and task.exception() is not None:
        logger.error("task %s failed before it was cancelled", task.get_name(), exc_info=task.exception())
