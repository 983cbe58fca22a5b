"""The table of requests awaiting their replies on one connection, and its deadline sweep.

Timeouts are deadlines stored on the pending entry, not a timer per request (a timer costs
~4-9 µs per request): the connection's owner runs one sweeper that calls
:func:`expire_pending` (RocketMQ's ``scanResponseTable``).
"""

from __future__ import annotations

import asyncio

from pocketmq.remoting.protocol.codes import code_name
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingTimeoutError

#: A request awaiting its reply: (future, deadline, request). A plain tuple: one is built per
#: request, and a tuple costs a fraction of a class instance.
Pending = tuple["asyncio.Future[RemotingCommand]", float, RemotingCommand]


def expire_pending(pending: dict[int, Pending], now: float, peer: str) -> int:
    """Fail every request of ``pending`` whose deadline has passed; returns how many."""
    expired = [opaque for opaque, entry in pending.items() if entry[1] <= now]
    for opaque in expired:
        future, _deadline, req = pending.pop(opaque)
        if not future.done():
            future.set_exception(
                RemotingTimeoutError(
                    f"wait response on {peer} timeout: code={code_name(req.code, response=False)} opaque={opaque}"
                )
            )
    return len(expired)
