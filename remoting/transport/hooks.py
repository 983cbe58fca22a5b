"""RPC hooks: the seam for ACL signing/verification and tracing (RocketMQ ``RPCHook``); and
``safe_call`` for the connection callbacks.

A hook sees every request before it is processed (server) or sent (client), and every
response after it is produced or received. A server-side ``before_request`` may raise a
``ResponseError`` to reject the request (ACL denial replies SYSTEM_ERROR with the reason).

A :class:`ReadEnd` is work a server runs once at the end of a read, after the read's replies are
written (the broker's reput slice for the sends the read stored).

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


class ReadEnd:
    """One callable run at the end of the server read (``RemotingConnection._handle``) that set
    it: a server's connections hold one (``RemotingServer.read_end``, shared by a broker's
    servers); ``active`` is True while a read's commands are handled, so work asked for then
    (``pending``) runs once that read's replies are written, with no ``call_soon`` and its loop
    callback. Work asked for outside a read (a timer, a task) finds ``active`` False and
    schedules itself as before. Loop thread only."""

    __slots__ = ("active", "pending")

    def __init__(self) -> None:
        self.active = False
        self.pending: Callable[[], None] | None = None


def safe_call(cb: Callable[[_Conn], None], conn: _Conn) -> None:
    """A connection callback (``on_connect``, ``on_close``): a failing one is logged, the
    others still run."""
    try:
        cb(conn)
    except Exception:
        logger.exception("connection callback %r failed", cb)
