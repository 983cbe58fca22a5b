"""RPC hooks: the seam for ACL signing/verification and tracing (RocketMQ ``RPCHook``); and
``safe_call`` for the connection callbacks.

A hook sees every request before it is processed (server) or sent (client), and every
response after it is produced or received. A server-side ``before_request`` may raise a
``ResponseError`` to reject the request (ACL denial replies SYSTEM_ERROR with the reason).

A :data:`BeforeHook` is the cheaper form for work that only happens before (signing a request,
checking one): a plain callable ``(remote_addr, request)`` run inline, so the transports keep
their fast paths (no coroutine per call on the client, the synchronous reply on the server).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from pocketmq.remoting.protocol.command import RemotingCommand

logger = logging.getLogger(__name__)
_Conn = TypeVar("_Conn")


class RPCHook(Protocol):
    def before_request(self, remote_addr: str, request: RemotingCommand) -> None: ...

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None: ...


#: ``(remote_addr, request) -> None``: signs (client) or checks (server, may raise ResponseError).
BeforeHook = Callable[[str, RemotingCommand], None]


def safe_call(cb: Callable[[_Conn], None], conn: _Conn) -> None:
    """A connection callback (``on_connect``, ``on_close``): a failing one is logged, the
    others still run."""
    try:
        cb(conn)
    except Exception:
        logger.exception("connection callback %r failed", cb)
