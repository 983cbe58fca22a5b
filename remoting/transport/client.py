"""``RemotingClient``: request/response over one lazily opened connection per address.

* ``invoke`` sends a request and awaits its reply (matched by opaque); the deadline lives on
  the pending entry and one sweeper task per client expires them all (RocketMQ
  ``scanResponseTable``; cheaper than ``wait_for`` per call, docs/development.md, hot paths).
* ``invoke_into`` is ``invoke`` for a caller that takes the reply itself: the connection hands
  it to the caller's waiter, with no future or callback in between (a producer's ``send_async``).
* ``invoke_oneway`` writes and forgets.
* Connections are opened on first use and re-opened after a loss (reconnect); concurrent
  callers share one connect attempt.
* Server-initiated requests arriving on our connections go to handlers registered with
  ``register`` (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, ...).
* RPC hooks see every request before it is sent and every reply received.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pocketmq.remoting.common.service import cancel_and_wait
from pocketmq.remoting.protocol.codes import RPC_ONEWAY
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingConnectError, RemotingTimeoutError
from pocketmq.remoting.protocol.frame import DEFAULT_MAX_FRAME_SIZE
from pocketmq.remoting.transport.connection import Handler, RemotingConnection
from pocketmq.remoting.transport.dispatch import ProcessorDispatcher
from pocketmq.remoting.transport.hooks import BeforeHook, RPCHook

logger = logging.getLogger(__name__)

#: the oneway bit of a request's flag, as a plain int (a module global, not an IntFlag member)
_RPC_ONEWAY = int(RPC_ONEWAY)


class ReplyWaiter(Protocol):
    """What :meth:`RemotingClient.invoke_into` hands the reply to: a future's three methods
    the connection calls (the pending table holds it as it holds a future)."""

    def set_result(self, reply: RemotingCommand, /) -> None: ...

    def set_exception(self, exc: BaseException, /) -> None: ...

    def done(self) -> bool: ...


class ReplyConnection(RemotingConnection):
    """A client's connection (``server`` False). A large read of replies is decoded whole, and
    handled in its turn up to ``REPLIES_PER_TURN`` replies (``PER_TURN`` a turn past that): the
    raw slices guard a server's loop against its many peers (T16), while a client's reads are
    the replies to its own requests, and cutting them cost it ~1.7k instructions a reply at 128
    sends in flight (the cuts' frame walks and copies; callgrind). Its decoder does not test
    each frame for a producer's send first."""

    __slots__ = ()
    server = False


@dataclass(frozen=True, slots=True)
class RemotingClientConfig:
    connect_timeout: float = 3.0
    #: Default request timeout (seconds) when a caller gives none (RocketMQ 3 s).
    request_timeout: float = 3.0
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    sweep_interval: float = 0.05
    #: Close connections idle this long (seconds); 0 disables (clients heartbeat anyway).
    idle_timeout: float = 0.0
    #: TLS for every connection (``useTLS``); None = plaintext. See ``transport.tls``.
    ssl: ssl.SSLContext | None = None


class RemotingClient:
    """A pool of one connection per ``host:port``."""

    def __init__(
        self,
        config: RemotingClientConfig | None = None,
        *,
        hooks: list[RPCHook] | None = None,
        before_hooks: Sequence[BeforeHook] = (),
    ) -> None:
        self.config = config or RemotingClientConfig()
        self.hooks: list[RPCHook] = hooks or []
        #: run on every request just before it is written (ACL signing), on the fast path too
        self.before_hooks: list[BeforeHook] = list(before_hooks)
        self.dispatcher = ProcessorDispatcher()
        self._conns: dict[str, RemotingConnection] = {}
        self._connecting: dict[str, asyncio.Future[RemotingConnection]] = {}
        self._opaque = 0
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False

    def register(self, code: int, handler: Handler) -> None:
        """Handle a request code the *server* sends to us over our connection."""
        self.dispatcher.register(code, handler)

    # ------------------------------------------------------------------------ connections
    async def get_connection(self, addr: str) -> RemotingConnection:
        conn = self._conns.get(addr)
        if conn is not None and conn.is_active:
            return conn
        if self._closed:
            raise RemotingConnectError("remoting client is closed")
        waiter = self._connecting.get(addr)
        if waiter is None:
            waiter = asyncio.ensure_future(self._connect(addr))
            self._connecting[addr] = waiter
            waiter.add_done_callback(lambda _f: self._connecting.pop(addr, None))
        return await asyncio.shield(waiter)

    async def _connect(self, addr: str) -> RemotingConnection:
        host, _, port_s = addr.rpartition(":")
        try:
            port = int(port_s)
        except ValueError:
            raise RemotingConnectError(f"invalid address {addr!r}") from None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.config.connect_timeout):
                _, proto = await loop.create_connection(
                    lambda: ReplyConnection(
                        self.dispatcher, max_frame_size=self.config.max_frame_size, loop=loop
                    ),
                    host.strip("[]"),
                    port,
                    ssl=self.config.ssl,
                )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError (a refused certificate) is an OSError
            raise RemotingConnectError(f"connect to {addr} failed: {exc}") from exc
        self._conns[addr] = proto
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="remoting-client-sweeper")
        return proto

    def close_connection(self, addr: str) -> None:
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    @property
    def addresses(self) -> list[str]:
        return [addr for addr, conn in self._conns.items() if conn.is_active]

    # ---------------------------------------------------------------------------- calls
    def _next_opaque(self) -> int:
        self._opaque = (self._opaque + 1) & 0x7FFFFFFF
        return self._opaque

    def invoke(
        self, addr: str, request: RemotingCommand, timeout: float | None = None
    ) -> Awaitable[RemotingCommand]:
        """Send ``request`` to ``addr``; await the result to get the reply, whatever its code.

        The common case (connection open, no RPC hooks) returns the reply future itself, with
        no coroutine in between: this is the hottest call of every client.

        Raises (when awaited):
            RemotingConnectError: cannot connect, or the connection broke before the reply.
            RemotingTimeoutError: no reply within ``timeout`` seconds.
        """
        conn = self._conns.get(addr)
        if conn is None or conn.transport is None or self.hooks or not conn.can_write:
            return self._invoke_slow(addr, request, timeout)
        self._opaque = request.opaque = (self._opaque + 1) & 0x7FFFFFFF
        if self.before_hooks:
            for before in self.before_hooks:
                before(addr, request)
        try:
            return conn.request(request, self.config.request_timeout if timeout is None else timeout)
        except RemotingConnectError:
            return self._invoke_slow(addr, request, timeout)

    def invoke_into(
        self, addr: str, request: RemotingCommand, timeout: float, waiter: ReplyWaiter, alone: bool = False
    ) -> bool:
        """:meth:`invoke` whose reply goes to ``waiter`` instead of a future: the connection
        calls ``waiter.set_result(reply)`` as it reads the reply, or ``set_exception`` (timeout,
        connection lost), with no future, done callback or loop turn in between (a producer's
        ``send_async``). Only on :meth:`invoke`'s fast path; False: nothing was written (no open
        connection, RPC hooks, a full write buffer), use :meth:`invoke`. ``alone``: see
        :meth:`RemotingConnection.request`.

        Raises:
            RemotingTooMuchRequestError: too many requests pending on the connection.
            LocalProtocolError: the request is too large to encode.
        """
        conn = self._conns.get(addr)
        if conn is None or conn.transport is None or self.hooks or not conn.can_write:
            return False
        self._opaque = request.opaque = (self._opaque + 1) & 0x7FFFFFFF
        if self.before_hooks:
            for before in self.before_hooks:
                before(addr, request)
        try:
            conn.request(request, timeout, waiter, alone)
        except RemotingConnectError:
            return False
        return True

    async def _invoke_slow(
        self, addr: str, request: RemotingCommand, timeout: float | None
    ) -> RemotingCommand:
        conn = self._conns.get(addr)
        if conn is None or conn.transport is None:
            conn = await self.get_connection(addr)
        request.opaque = self._next_opaque()
        for before in self.before_hooks:
            before(addr, request)
        hooks = self.hooks
        for hook in hooks:
            hook.before_request(addr, request)
        if not conn.can_write:
            await conn.drain()
        response = await conn.request(request, self.config.request_timeout if timeout is None else timeout)
        for hook in hooks:
            hook.after_response(addr, request, response)
        return response

    def writable(self, addr: str) -> bool:
        """Whether :meth:`oneway_now` would write to ``addr`` now: an open connection, no RPC
        hooks."""
        conn = self._conns.get(addr)
        return not (
            conn is None or self.hooks or (transport := conn.transport) is None or transport.is_closing()
        )

    def oneway_now(self, addr: str, request: RemotingCommand, frames: int = 1) -> bool:
        """:meth:`invoke_oneway` without a coroutine when the connection is open and no RPC
        hooks run (a producer's END_TRANSACTIONs of a loop turn); False: nothing was written,
        call :meth:`invoke_oneway`. True: the frame was encoded before the return and nothing
        keeps ``request`` (the caller may reuse it). ``frames``: how many frames ``request``
        encodes, the first with ``request.opaque``, each next one with the next opaque (they
        are taken from the client's sequence).

        Raises:
            RemotingConnectError: the connection is closed.
        """
        conn = self._conns.get(addr)
        # (inline of RemotingConnection.is_active: a property is called from C, a frame of its own)
        if conn is None or self.hooks or (transport := conn.transport) is None or transport.is_closing():
            return False
        opaque = self._opaque
        request.opaque = (opaque + 1) & 0x7FFFFFFF
        self._opaque = (opaque + frames) & 0x7FFFFFFF
        if self.before_hooks:  # (no iterator made for an empty list)
            for before in self.before_hooks:
                before(addr, request)
        # (inline of RemotingConnection.oneway: one Python frame less per END_TRANSACTION); a
        # request with the bit alone (a reused END_TRANSACTION's) is not or-ed again (an int
        # compare, not a bitwise op of two ints in C)
        if request.flag != _RPC_ONEWAY:
            request.flag |= _RPC_ONEWAY
        conn.send(request)
        return True

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Write ``request`` with the oneway bit and do not wait for anything but the connection."""
        conn = await self.get_connection(addr)
        request.opaque = self._next_opaque()
        for before in self.before_hooks:
            before(addr, request)
        for hook in self.hooks:
            hook.before_request(addr, request)
        conn.oneway(request)

    async def _sweep(self) -> None:
        interval = self.config.sweep_interval
        idle = self.config.idle_timeout
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for addr, conn in list(self._conns.items()):
                if conn.pending:
                    conn.expire(now)
                elif idle and now - max(conn.last_read, conn.last_write) > idle:
                    self.close_connection(addr)
                if conn.transport is None and self._conns.get(addr) is conn:
                    del self._conns[addr]

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait(self._sweeper)
        self._sweeper = None
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await conn.wait_closed()
        await self.dispatcher.close()


__all__ = [
    "ReplyConnection",
    "RemotingClient",
    "RemotingClientConfig",
    "ReplyWaiter",
    "RemotingConnectError",
    "RemotingTimeoutError",
]
