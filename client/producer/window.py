"""``SendWindow``: the producer's bound on asynchronous sends in flight (``max_in_flight``).

RocketMQ's Java client takes a permit of its async semaphore (``clientAsyncSemaphoreValue``,
65535) for every async request and, when none is free, waits for one up to the send timeout,
then fails with a timeout. The same here: ``send_async`` past ``max_in_flight`` does not raise;
its send waits for a slot and the wait counts in its ``send_msg_timeout`` (:func:`send_when_free`),
and ``Producer.submit`` awaits a slot before it starts a send, which slows a sending loop down
to the pace of the broker's replies (backpressure).

A slot is held from the start of a send until its future is done. Waiters queue in FIFO order;
a freed slot wakes the first one, which takes the slot when it runs (or queues again at the head
when a send that did not wait took it first). The common case (a slot free) costs one compare
and one add when the send starts and one subtract and one test when it ends.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from pocketmq.client.errors import RemotingTimeoutError
from pocketmq.remoting.common.service import wake_first


class SendWindow:
    """At most ``size`` sends in flight; :meth:`wait` for room when full."""

    __slots__ = ("busy", "size", "waiters")

    def __init__(self, size: int) -> None:
        self.size = size
        #: slots held (sends started and not done)
        self.busy = 0
        self.waiters: deque[asyncio.Future[None]] = deque()

    def release(self) -> None:
        """A send ended: free its slot and wake the first waiter."""
        self.busy -= 1
        if self.waiters:
            self.wake()

    def wake(self) -> None:
        """Wake the first waiter that is still waiting."""
        wake_first(self.waiters)

    async def wait(self, budget: float) -> float:
        """Wait until a slot is free, and take it; returns what is left of ``budget`` seconds.

        Raises:
            RemotingTimeoutError: no slot was freed within ``budget`` (as Java's async send
                when its semaphore stays exhausted for the whole send timeout).
        """
        begin = time.monotonic()
        remaining = budget
        first = True
        while self.busy >= self.size:
            if remaining <= 0:
                raise RemotingTimeoutError(
                    f"no free send slot within {budget:.3f}s: {self.busy} sends in flight"
                    f" (max_in_flight={self.size}), {len(self.waiters)} waiting"
                )
            loop = asyncio.get_running_loop()
            w: asyncio.Future[None] = loop.create_future()
            # A waiter that was woken but found its slot taken goes back to the head of the line.
            if first:
                self.waiters.append(w)
            else:
                self.waiters.appendleft(w)
            first = False
            timer = loop.call_later(remaining, _expire, w)
            try:
                await w
            except asyncio.CancelledError:
                if w.done() and not w.cancelled() and self.busy < self.size:
                    self.wake()  # woken, then cancelled: pass the wake-up on
                raise
            except TimeoutError:
                pass
            finally:
                timer.cancel()
            remaining = budget - (time.monotonic() - begin)
        self.busy += 1
        if self.waiters and self.busy < self.size:
            self.wake()  # room for more than this one (several slots freed in one turn)
        return remaining


def _expire(w: asyncio.Future[None]) -> None:
    if not w.done():
        w.set_exception(TimeoutError())
