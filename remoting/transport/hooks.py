"""RPC hooks: the seam for ACL signing/verification and tracing (RocketMQ ``RPCHook``).

A hook sees every request before it is processed (server) or sent (client), and every
response after it is produced or received. A server-side ``before_request`` may raise a
``ResponseError`` to reject the request (ACL denial replies SYSTEM_ERROR with the reason).

A :data:`BeforeHook` is the cheaper form for work that only happens before (signing a request,
checking one): a plain callable ``(remote_addr, request)`` run inline, so the transports keep
their fast paths (no coroutine per call on the client, the synchronous reply on the server).

A :data:`BatchCheck` (server only) sees the commands of one read before the first is handled:
a before-hook that does its work there for all of them, back to back, finds its code and data
warm, where one call per request between two handlers finds them cold (ACL: ~6 -> ~3.4 µs of
broker CPU per 1 KB send). It must not raise nor change the commands; the before-hook still
runs for each request and decides (the batch check only prepares).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from pocketmq.remoting.protocol.command import RemotingCommand


class RPCHook(Protocol):
    def before_request(self, remote_addr: str, request: RemotingCommand) -> None: ...

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None: ...


#: ``(remote_addr, request) -> None``: signs (client) or checks (server, may raise ResponseError).
BeforeHook = Callable[[str, RemotingCommand], None]
#: ``(remote_addr, commands)``: prepares the before-hooks' work for one read (requests and
#: responses, in order); never raises.
BatchCheck = Callable[[str, list[RemotingCommand]], None]


T = TypeVar("T")
logger = logging.getLogger(__name__)


def safe_call(cb: Callable[[T], None], arg: T) -> None:
    """``cb(arg)``, an exception logged instead of raised (a connection's callbacks: one failing
    must not keep the others, or the connection, from running)."""
    try:
        cb(arg)
    except Exception:
        logger.exception("connection callback %r failed", cb)
