"""``GroupTransfer``: SYNC_MASTER puts waiting for a slave's acknowledgement (Java
``GroupTransferService`` + ``HAService.isSlaveOK``), without a task or timer per put.

A put's wait is decided at once when it can be:

* the acknowledged watermark already covers the put's end offset → PUT_OK;
* no slave is connected, or the best slave is ``haSlaveFallbehindMax`` or more behind the put's
  end → SLAVE_NOT_AVAILABLE (the message stays stored, as in RocketMQ).

Otherwise the put joins one FIFO of ``(end offset, deadline, future)``. Puts are appended in
CommitLog order and share one timeout, so both the end offsets and the deadlines of the FIFO
ascend: an acknowledgement resolves a prefix (PUT_OK), and one timer armed for the head's
deadline resolves expired heads (FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``).

The watermark only rises, and only from reports a connection accepted (``0 ≤ offset ≤ the
master's max``): a hostile peer cannot acknowledge bytes the master never wrote.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from pocketmq.store.results import PutMessageStatus

__all__ = ["GroupTransfer"]

_PUT_OK = PutMessageStatus.PUT_OK
_FLUSH_SLAVE_TIMEOUT = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
_SLAVE_NOT_AVAILABLE = PutMessageStatus.SLAVE_NOT_AVAILABLE


#: a waiter's completion: ``resolve(arg, status)``
Resolve = Callable[[Any, PutMessageStatus], None]


def _set_future(fut: asyncio.Future[PutMessageStatus], status: PutMessageStatus) -> None:
    if not fut.done():
        fut.set_result(status)


class GroupTransfer:
    """The SYNC_MASTER :class:`~pocketmq.store.listener.ReplicationWaiter`.

    Two ways to wait: ``await wait_replicated(end)`` (a future per put, for the store's
    ``put_*_async``), or :meth:`add` with a plain callback (no future, no task: the broker's
    send path answers its requests straight from the acknowledgement).

    Args:
        slave_count: how many slave connections have reported at least once.
        wakeup: wakes the transfer loops (a waiting put wants its bytes sent now).
        timeout_ms: ``slaveTimeout``.
        fallbehind_max: ``haSlaveFallbehindMax`` bytes.
    """

    def __init__(
        self,
        *,
        slave_count: Callable[[], int],
        wakeup: Callable[[], None],
        timeout_ms: int,
        fallbehind_max: int,
    ) -> None:
        self._slave_count = slave_count
        self._wakeup = wakeup
        self._timeout_s = timeout_ms / 1000
        self._fallbehind_max = fallbehind_max
        #: the highest offset any accepted slave report acknowledged (Java push2SlaveMaxOffset)
        self.acked = 0
        self._fifo: deque[tuple[int, float, Resolve, Any]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    @property
    def waiting(self) -> int:
        return len(self._fifo)

    def slave_ok(self, end_offset: int) -> bool:
        """A slave is connected and less than ``haSlaveFallbehindMax`` behind ``end_offset``."""
        return self._slave_count() > 0 and end_offset - self.acked < self._fallbehind_max

    def add(self, end_offset: int, resolve: Resolve, arg: Any) -> PutMessageStatus | None:
        """The status now (PUT_OK, SLAVE_NOT_AVAILABLE), or None: ``resolve(arg, status)`` is
        called later, on the loop, with PUT_OK or FLUSH_SLAVE_TIMEOUT."""
        if self.acked >= end_offset:
            return _PUT_OK
        if not self.slave_ok(end_offset):
            return _SLAVE_NOT_AVAILABLE
        loop = asyncio.get_running_loop()
        self._fifo.append((end_offset, loop.time() + self._timeout_s, resolve, arg))
        if self._timer is None:
            self._timer = loop.call_later(self._timeout_s, self._expire)
        self._wakeup()
        return None

    async def wait_replicated(self, end_offset: int) -> PutMessageStatus:
        fut: asyncio.Future[PutMessageStatus] = asyncio.get_running_loop().create_future()
        status = self.add(end_offset, _set_future, fut)
        if status is not None:
            return status
        return await fut

    def on_ack(self, offset: int) -> None:
        """A connection accepted a report of ``offset``: resolve every put it covers."""
        if offset <= self.acked:
            return
        self.acked = offset
        fifo = self._fifo
        while fifo and fifo[0][0] <= offset:
            _, _, resolve, arg = fifo.popleft()
            resolve(arg, _PUT_OK)

    def _expire(self) -> None:
        self._timer = None
        fifo = self._fifo
        loop = asyncio.get_running_loop()
        now = loop.time()
        while fifo and fifo[0][1] <= now:
            _, _, resolve, arg = fifo.popleft()
            resolve(arg, _FLUSH_SLAVE_TIMEOUT)
        if fifo:
            self._timer = loop.call_later(max(0.0, fifo[0][1] - now), self._expire)

    def reset_watermark(self) -> None:
        """Forget acknowledgements (tests; a master whose CommitLog was truncated)."""
        self.acked = 0

    def close(self) -> None:
        """Store shutdown: waiting puts time out now (their messages are stored)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._fifo:
            _, _, resolve, arg = self._fifo.popleft()
            resolve(arg, _FLUSH_SLAVE_TIMEOUT)
