"""``ProcessorDispatcher``: the map from request codes to handlers, and the turn of every handler
outcome into a reply on the connection the request came from.

A connection hands it each request it decodes (:class:`~pocketmq.remoting.transport.connection.Dispatcher`);
the server's processors and a client's handlers for server-initiated requests
(CHECK_TRANSACTION_STATE) are registered here. Its hot path (a synchronous reply) works on the
connection's own open batch and loop (``conn._out``, ``conn._write_batch``): the two modules are one
unit split by responsibility, framing and writing there, dispatch here.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import types
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pocketmq.remoting.protocol.codes import (
    RPC_ONEWAY,
    RPC_TYPE_RESPONSE,
    RequestCode,
    ResponseCode,
    code_name,
)
from pocketmq.remoting.protocol.command import EncodedReply, RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingConnectError, ResponseError
from pocketmq.remoting.transport.hooks import BeforeHook, RPCHook, safe_call
from pocketmq.remoting.transport.wire_io import MAX_BATCH_PARTS

if TYPE_CHECKING:  # (connection imports this module: the types only)
    from pocketmq.remoting.transport.connection import Handler, RemotingConnection

__all__ = ["ProcessorDispatcher"]

logger = logging.getLogger(__name__)

# Plain names for what every request touches (a module attribute or enum read costs ~20-80 ns).
_RPC_TYPE_RESPONSE = int(RPC_TYPE_RESPONSE)
_RPC_ONEWAY = int(RPC_ONEWAY)
_current_task = asyncio.current_task
_CoroutineType = types.CoroutineType
_monotonic = time.monotonic
_SENDS = frozenset(
    int(c) for c in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
)

#: Seconds of one loop turn (from its read, or its slice's start: ``conn._batch_time``) after
#: which the rest of a read's commands wait for the next turn, checked after a request heavier
#: than a send (a reply other than a send's pre-rendered one, e.g. a pull's 32 messages): the
#: connection's ``PER_TURN`` commands a turn bound a send burst (~0.4 ms), not one of pulls
#: (32 pulls of 32 x 1 KiB held the loop 2.5 ms of CPU, /tmp/lag24/burst.py). A send's
#: SEND_OK (an EncodedReply) and a reply left for later (None: SYNC_FLUSH, a held pull) pay no
#: clock read.
TURN_BUDGET = 0.0005


class ProcessorDispatcher:
    """Maps request codes to handlers and turns handler outcomes into replies.

    * unknown code → REQUEST_CODE_NOT_SUPPORTED (3), remark ``" request type N not supported"``;
    * ``ResponseError`` raised → a reply with its code and remark;
    * any other exception → SYSTEM_ERROR (1) with the exception text, logged once here;
    * a request with the oneway bit gets no reply (C++/ali-ons never set it, so they get one).
    """

    def __init__(self, *, hooks: list[RPCHook] | None = None) -> None:
        self.handlers: dict[int, Handler] = {}
        self.default_handler: Handler | None = None
        self.hooks: list[RPCHook] = hooks or []
        #: Checks run on every request before its handler, with no after part (ACL): unlike
        #: ``hooks`` they keep the synchronous-reply fast path. One may raise ``ResponseError``.
        self.before_hooks: list[BeforeHook] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self.on_connect: list[Callable[[RemotingConnection], None]] = []
        self.on_close: list[Callable[[RemotingConnection], None]] = []
        self.connections: set[RemotingConnection] = set()

    def register(self, code: int, handler: Handler) -> None:
        self.handlers[int(code)] = handler

    # Dispatcher protocol -------------------------------------------------------------------
    def connection_made(self, conn: RemotingConnection) -> None:
        self.connections.add(conn)
        for cb in self.on_connect:
            safe_call(cb, conn)

    def connection_lost(self, conn: RemotingConnection) -> None:
        self.connections.discard(conn)
        for cb in self.on_close:
            safe_call(cb, conn)

    def dispatch(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        handler = self.handlers.get(request.code, self.default_handler)
        if handler is None:  # as RocketMQ: answered before any RPC hook runs
            if conn.is_active:
                remark = f" request type {request.code} not supported"
                conn.send(
                    RemotingCommand.response_to(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark)
                )
            return
        hooks = self.hooks
        try:
            if self.before_hooks:
                for check in self.before_hooks:
                    check(conn.remote_addr, request)
            if hooks:
                for hook in hooks:
                    hook.before_request(conn.remote_addr, request)
            result = handler(conn, request)
        except Exception as exc:  # the server boundary: every failure becomes a reply
            self._reply(conn, request, self._error_reply(conn, request, exc))
            return
        self._finish(conn, request, result)

    def dispatch_all(
        self, conn: RemotingConnection, commands: list[RemotingCommand]
    ) -> RemotingCommand | None:
        """Handle the commands of one read (or slice) of ``conn`` in order, as ``dispatch`` each
        request and ``conn._resolve`` each response; returns the command after which the
        connection's write buffer passed its high-water mark, or the turn's ``TURN_BUDGET`` ran
        out (the rest wait: ``conn._stall``), None when all were handled.

        Why a loop here and not a ``dispatch`` call per frame: the send path's ~34 frames a read
        each paid a Python call, three attribute reads (handler map, both hook lists) and the
        batch read that are the same for the whole read. Hooks are read once a read (they are
        registered at start-up).
        """
        began = conn._batch_time
        if self.hooks or self.before_hooks:
            dispatch = self.dispatch
            for request in commands:
                if request.flag & _RPC_TYPE_RESPONSE:
                    conn._resolve(request)
                else:
                    dispatch(conn, request)
                    # (not for a lost connection's commands: ``_serve_lost`` slices them itself
                    # and takes a None as all handled)
                    if request.code not in _SENDS and _monotonic() - began > TURN_BUDGET and conn.transport:
                        return request
                if not conn.can_write and conn.transport is not None:
                    return request
            return None
        handlers, default, out = self.handlers, self.default_handler, conn._out
        for request in commands:
            # (the flag tested for zero before its bits: a request's is 0 but for oneways, and
            # 3.11 does not specialize &, ~0.1k instructions a test)
            flag = request.flag
            if flag and flag & _RPC_TYPE_RESPONSE:
                conn._resolve(request)
            elif (handler := handlers.get(request.code, default)) is None:
                self.dispatch(conn, request)  # REQUEST_CODE_NOT_SUPPORTED
            else:
                try:
                    result = handler(conn, request)
                except Exception as exc:  # the server boundary: every failure becomes a reply
                    self._reply(conn, request, self._error_reply(conn, request, exc))
                else:
                    if (
                        type(result) is EncodedReply
                        and result.head_opaque == request.opaque
                        and out is not None
                        and not ((flag and flag & _RPC_ONEWAY) or conn._closing)
                    ):
                        # the hottest path (SEND_OK): the reply joins the read's open batch
                        out.append(result.head)
                        if len(out) >= MAX_BATCH_PARTS:
                            conn._write_batch(out)
                    else:
                        self._finish(conn, request, result)
                        # (as above)
                        if result is not None and _monotonic() - began > TURN_BUDGET and conn.transport:
                            return request
            if not conn.can_write and conn.transport is not None:
                return request
        return None

    def _finish(self, conn: RemotingConnection, request: RemotingCommand, result: Any) -> None:
        """Turn a handler's ``result`` for ``request`` into the reply on ``conn`` (or a task
        that awaits it and replies)."""
        hooks = self.hooks
        out = conn._out
        if type(result) is EncodedReply and result.head_opaque == request.opaque and out is not None:
            # The hottest path: a pre-rendered reply (SEND_OK) with this opaque joins the read's
            # open batch (inline of _reply and send: the same checks)
            if not (hooks or request.flag & _RPC_ONEWAY or conn._closing):
                out.append(result.head)
                if len(out) >= MAX_BATCH_PARTS:
                    conn._write_batch(out)
            elif hooks:
                self._reply(conn, request, result)
        elif (type(result) is RemotingCommand or type(result) is EncodedReply) and not hooks:
            # The hot path (a synchronous reply, no hooks); test_transport compares the two.
            # inline of dispatch.ProcessorDispatcher._reply
            if request.flag & _RPC_ONEWAY:
                return
            result.opaque = request.opaque
            result.flag |= _RPC_TYPE_RESPONSE
            try:
                conn.send(result)
            except RemotingConnectError:
                pass  # the peer is gone: nobody to answer
            except Exception:  # (the frame is too large to encode)
                logger.warning(
                    "could not reply to %s (code %d)", conn.remote_addr, request.code, exc_info=True
                )
        elif result is None:
            # nothing to write (a oneway request's, END_TRANSACTION's, or a held pull's): with
            # no hooks to run _reply would only test that (~0.9k instructions a call)
            if hooks:
                self._reply(conn, request, None)
        elif isinstance(result, RemotingCommand):
            self._reply(conn, request, result)
        elif type(result) is _CoroutineType or inspect.isawaitable(result):
            # One task that awaits the handler and replies itself: no done-callback round
            # through the loop and no closure per request.
            task = conn._loop.create_task(self._complete(conn, request, result))
            self._tasks.add(task)
        else:  # pragma: no cover - a handler bug
            self._reply(
                conn, request, self._error_reply(conn, request, TypeError(f"handler returned {result!r}"))
            )

    async def _complete(
        self,
        conn: RemotingConnection,
        request: RemotingCommand,
        pending: Awaitable[RemotingCommand | None],
    ) -> None:
        """Await an asynchronous handler's outcome and reply (cancelled: no reply)."""
        try:
            try:
                reply = await pending
            except Exception as exc:
                reply = self._error_reply(conn, request, exc)
            self._reply(conn, request, reply)
        finally:
            self._tasks.discard(_current_task())  # type: ignore[arg-type,unused-ignore]

    def _error_reply(
        self, conn: RemotingConnection, request: RemotingCommand, exc: BaseException
    ) -> RemotingCommand:
        if isinstance(exc, ResponseError):
            return RemotingCommand.response_to(request, exc.response_code, exc.remark)
        name = code_name(request.code, response=False)
        logger.error("request code=%s from %s failed", name, conn.remote_addr, exc_info=exc)
        return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    def _reply(
        self, conn: RemotingConnection, request: RemotingCommand, reply: RemotingCommand | None
    ) -> None:
        for hook in self.hooks:
            try:
                hook.after_response(conn.remote_addr, request, reply)
            except Exception:
                logger.exception("rpc hook after_response failed")
        if reply is None or request.flag & _RPC_ONEWAY or conn._closing:
            return
        reply.opaque = request.opaque
        reply.flag |= _RPC_TYPE_RESPONSE
        try:
            conn.send(reply)
        except RemotingConnectError:
            pass  # the peer is gone: nobody to answer
        except Exception:
            logger.warning("could not reply to %s (code %d)", conn.remote_addr, request.code, exc_info=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
