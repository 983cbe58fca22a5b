"""``ReplyFuture``: the future of a request's reply, whose awaiting task resumes as the reply is read.

A plain future schedules its done callbacks with ``call_soon``: the task awaiting a reply (an
``await producer.send(msg)``) resumed a loop turn after the read, and the request it wrote
next opened a batch that a second ``call_soon`` (``_flush``) closed. This future keeps the
first done callback given with a context (a task's wake-up) aside and calls it at once, in
that context, when the connection sets the reply (``set_result``, called from the read's
handling, where no task runs): the task continues inside the read's handling, and its next
request joins the batch written at the end of that read (one ``writev``, no handle, no
extra loop turn). At one send in flight: see docs/performance.md (client, one in flight).

Anything else (a timeout from the sweeper task, a lost connection, a cancel, a callback added
without a context) keeps a future's usual order: the wake-up is scheduled with ``call_soon``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import Context
from typing import Any

from pocketmq.remoting.protocol.command import RemotingCommand

_set_result = asyncio.Future.set_result

_Callback = Callable[["ReplyFuture"], object]


class ReplyFuture(asyncio.Future[RemotingCommand]):
    """A reply's future (see the module docstring); ``_wake``/``_wake_ctx`` are set by the maker
    (no ``__init__`` of our own: the C future's is called as is)."""

    __slots__ = ("_wake", "_wake_ctx")

    _wake: _Callback | None
    _wake_ctx: Context | None

    def add_done_callback(self, fn: _Callback, /, *, context: Context | None = None) -> None:
        if context is not None and self._wake is None and not self.done():
            self._wake, self._wake_ctx = fn, context
        else:
            super().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn: _Callback, /) -> int:
        removed = super().remove_done_callback(fn)
        if self._wake is not None and self._wake == fn:
            self._wake = self._wake_ctx = None
            removed += 1
        return removed

    def set_result(self, result: RemotingCommand, /) -> None:
        _set_result(self, result)
        wake = self._wake
        if wake is not None:  # (a client connection's _handle has this inline)
            self._wake = None
            try:
                self._wake_ctx.run(wake, self)  # type: ignore[union-attr]
            except RuntimeError:
                self.wake_later(wake)

    def wake_later(self, wake: _Callback) -> None:
        """``wake`` could not run now (a task runs: its context is entered, or another task
        is current; neither started the wake-up): it runs next turn, as a future's callback."""
        ctx, self._wake_ctx = self._wake_ctx, None
        self.get_loop().call_soon(wake, self, context=ctx)

    def set_exception(self, exception: type | BaseException, /) -> None:
        super().set_exception(exception)
        self._wake_soon()

    def cancel(self, msg: Any | None = None) -> bool:
        if not super().cancel(msg):
            return False
        self._wake_soon()
        return True

    def _wake_soon(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            self.wake_later(wake)


def reply_future(loop: asyncio.AbstractEventLoop) -> ReplyFuture:
    """A new :class:`ReplyFuture` of ``loop``."""
    fut = ReplyFuture(loop=loop)
    fut._wake = fut._wake_ctx = None
    return fut


__all__ = ["ReplyFuture", "reply_future"]
