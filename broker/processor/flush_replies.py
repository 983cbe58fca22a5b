"""SYNC_FLUSH send replies, answered per group-commit round instead of one task per send.

How a SYNC_FLUSH send (``WAIT`` true, no SYNC_MASTER replication) is answered:

1. the send processor puts the message synchronously and hands the put here (:meth:`add`);
   the handler returns no reply, as a held pull does;
2. the puts of one loop turn (every request decoded from the reads of that turn) are
   registered with the store's group commit together (``MessageStore.flush_waiter``), once,
   for the turn's highest end offset, by a callback run right after the turn. Registering
   each put as it happened would let the first one start an fsync that covers only itself,
   splitting the turn's sends over two fsyncs;
3. one callback per round, run by the group commit in the call that resolves the round (no
   loop turn between the fsync's end and the replies), answers every send the round covers,
   in arrival order:
   SUCCESS when flushed, FLUSH_DISK_TIMEOUT when the round timed out (``syncFlushTimeout``),
   SYSTEM_ERROR if the store failed the round; nothing when it was cancelled (store shutdown),
   for a oneway request, or on a closed connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pocketmq.remoting.protocol.codes import RPC_ONEWAY, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.store import PutMessageStatus, PutResult

if TYPE_CHECKING:
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)


#: one waiting send: (connection, request, put result, queue id, topic)
Waiter = tuple[Any, RemotingCommand, PutResult, int, str]
#: builds a send's reply: (request, put result, queue id, topic) -> reply
ReplyFn = Callable[[RemotingCommand, PutResult, int, str], RemotingCommand]


class FlushWaiter(Protocol):
    """The store's SYNC_FLUSH seam (``MessageStore.flush_waiter``): one shared future per
    group-commit round, True once flushed; None when no wait applies."""

    def flush_waiter(
        self, result: PutResult, direct: Callable[[asyncio.Future[bool]], None] | None = None
    ) -> asyncio.Future[bool] | None: ...


class FlushReplies:
    """Sends waiting for their flush: this loop turn's, then per round (module docstring)."""

    def __init__(self, reply: ReplyFn) -> None:
        self._reply = reply
        self._turn: list[Waiter] = []
        #: the turn's put with the highest end offset (one registration covers the turn)
        self._turn_last: PutResult | None = None
        self._turn_end = 0
        self._turn_store: FlushWaiter | None = None
        self._rounds: dict[asyncio.Future[bool], list[Waiter]] = {}

    def add(self, store: FlushWaiter, conn: RemotingConnection, request: RemotingCommand, result: PutResult, queue_id: int, topic: str) -> None:  # fmt: skip
        """Answer this successful put (``result.append`` set) once its bytes are flushed."""
        append = result.append
        assert append is not None
        turn = self._turn
        if not turn:
            self._turn_store = store
            asyncio.get_running_loop().call_soon(self._register_turn)
        turn.append((conn, request, result, queue_id, topic))
        end = append.wrote_offset + append.wrote_bytes
        if end > self._turn_end:
            self._turn_end = end
            self._turn_last = result

    @property
    def waiting(self) -> int:
        """Sends not answered yet (tests, diagnostics)."""
        return len(self._turn) + sum(len(w) for w in self._rounds.values())

    def _register_turn(self) -> None:
        waiters, self._turn = self._turn, []
        last, self._turn_last = self._turn_last, None
        self._turn_end = 0
        store, self._turn_store = self._turn_store, None
        if not waiters or store is None or last is None:
            return
        try:
            fut = store.flush_waiter(last, self._on_round_done)
        except Exception as exc:  # a store bug must still answer the senders
            logger.exception("group commit registration failed")
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(exc)
        if fut is None:  # no wait applies (the store stopped its services meanwhile)
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(True)
        if fut.done():
            self._answer(fut, waiters)
            return
        pending = self._rounds.get(fut)
        if pending is None:
            self._rounds[fut] = waiters
        else:
            pending += waiters

    def _on_round_done(self, fut: asyncio.Future[bool]) -> None:
        self._answer(fut, self._rounds.pop(fut, []))

    def _answer(self, fut: asyncio.Future[bool], waiters: list[Waiter]) -> None:
        if fut.cancelled():
            return  # the store is shutting down: as a cancelled handler task, no reply
        exc = fut.exception()
        flushed = exc is None and fut.result()
        for conn, request, result, queue_id, topic in waiters:
            if request.flag & RPC_ONEWAY or not conn.is_active:
                continue
            try:
                if exc is not None:
                    reply = RemotingCommand.response_to(
                        request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"
                    )
                else:
                    if not flushed:
                        result = PutResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, result.append)
                    reply = self._reply(request, result, queue_id, topic)
                conn.send_response(reply)
            except Exception:  # one peer's failure must not cost the others their reply
                logger.warning("could not answer a flushed send from %s", conn.remote_addr, exc_info=True)
