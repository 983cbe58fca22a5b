"""SYNC_FLUSH send replies, answered per group-commit round instead of one task per send.

How a SYNC_FLUSH send (``WAIT`` true, no SYNC_MASTER replication) is answered:

1. the send processor puts the message synchronously and hands the put here (:meth:`add`);
   the handler returns no reply, as a held pull does;
2. the puts of one loop turn (every request decoded from the reads of that turn) are
   registered with the store's group commit together (``MessageStore.flush_waiter``), for
   the turn's highest end offset and its first put's, by a callback run right after the turn.
   Registering each put as it happened would let the first one start an fsync that covers
   only itself, splitting the turn's sends over two fsyncs. When an fsync started during the
   turn (the last one ended mid-turn, and the next started at once for the puts so far), the
   two land in different rounds: the puts it covers ride it, the rest wait for the next;
   the boundary is found by bisection (``_split``, a registration per probe);
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
from pocketmq.store import AppendResult, PutMessageStatus, PutResult

if TYPE_CHECKING:
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)


#: one waiting send: (connection, request, put result, queue id, its reply once flushed)
Waiter = tuple[Any, RemotingCommand, PutResult, int, RemotingCommand]
#: renders a send's reply (no stats): (request, put result, queue id) -> reply
RenderFn = Callable[[RemotingCommand, PutResult, int], RemotingCommand]


class FlushWaiter(Protocol):
    """The store's SYNC_FLUSH seam (``MessageStore.flush_waiter``): one shared future per
    group-commit round, True once flushed; None when no wait applies."""

    def flush_waiter(
        self, result: PutResult, direct: Callable[[asyncio.Future[bool]], None] | None = None
    ) -> asyncio.Future[bool] | None: ...


class FlushReplies:
    """Sends waiting for their flush: this loop turn's, then per round (module docstring)."""

    def __init__(self, render: RenderFn) -> None:
        #: the reply of a round that timed out (FLUSH_DISK_TIMEOUT)
        self._render = render
        self._turn: list[Waiter] = []
        #: the turn's put with the highest end offset (one registration covers the turn)
        self._turn_last: PutResult | None = None
        self._turn_end = 0
        self._turn_store: FlushWaiter | None = None
        self._rounds: dict[asyncio.Future[bool], list[Waiter]] = {}
        #: the loop the turn's registration is scheduled on, kept: ``asyncio.get_running_loop``
        #: is a getpid syscall per call in CPython 3.11 (two per send at one in flight with the
        #: group commit's, ``perf trace``)
        self._loop: asyncio.AbstractEventLoop | None = None

    def add(self, store: FlushWaiter, conn: RemotingConnection, request: RemotingCommand, result: PutResult, queue_id: int, reply: RemotingCommand) -> None:  # fmt: skip
        """Answer this successful put (``result.append`` set) once its bytes are flushed:
        ``reply``, its SEND_OK rendered (and its stats counted) when it was put, so the
        rendering is the send processor's alone; a timed-out round's is rendered then."""
        append = result if result.__class__ is AppendResult else result.append  # (no property call)
        assert append is not None
        turn = self._turn
        if not turn:
            self._turn_store = store
            loop = self._loop
            if loop is None or loop.is_closed():
                loop = self._loop = asyncio.get_running_loop()
            loop.call_soon(self._register_turn)
        turn.append((conn, request, result, queue_id, reply))
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
            if fut is not None and not fut.done() and len(waiters) > 1:
                first = store.flush_waiter(waiters[0][2], self._on_round_done)
                if first is not None and first is not fut:
                    for part_fut, part in self._split(store, waiters, first, fut):
                        self._pend(part_fut, part)
                    return
        except Exception as exc:  # a store bug must still answer the senders
            logger.exception("group commit registration failed")
            fut = asyncio.get_running_loop().create_future()
            fut.set_exception(exc)
        if fut is None:  # no wait applies (the store stopped its services meanwhile)
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(True)
        self._pend(fut, waiters)

    def _pend(self, fut: asyncio.Future[bool], waiters: list[Waiter]) -> None:
        if fut.done():
            self._answer(fut, waiters)
            return
        pending = self._rounds.get(fut)
        if pending is None:
            self._rounds[fut] = waiters
        else:
            pending += waiters

    def _split(
        self,
        store: FlushWaiter,
        waiters: list[Waiter],
        first: asyncio.Future[bool],
        last: asyncio.Future[bool],
    ) -> list[tuple[asyncio.Future[bool], list[Waiter]]]:
        """The turn's first and last puts are in different rounds: an fsync started mid-turn
        covers a prefix, which rides it instead of waiting for the next one. Each run of
        waiters sharing a round (ends ascend, so rounds are contiguous) is found by bisection,
        one registration per probe."""
        parts = []
        i, n = 0, len(waiters)
        cur = first
        while cur is not last:
            lo, hi, nxt = i, n - 1, last  # waiters[lo] is in ``cur``, waiters[hi] in ``nxt``
            while hi - lo > 1:
                mid = (lo + hi) // 2
                f = store.flush_waiter(waiters[mid][2], self._on_round_done)
                if f is None or f is cur:
                    lo = mid
                else:
                    hi, nxt = mid, f
            parts.append((cur, waiters[i:hi]))
            i, cur = hi, nxt
        parts.append((last, waiters[i:]))
        return parts

    def _on_round_done(self, fut: asyncio.Future[bool]) -> None:
        self._answer(fut, self._rounds.pop(fut, []))

    def _answer(self, fut: asyncio.Future[bool], waiters: list[Waiter]) -> None:
        if fut.cancelled():
            return  # the store is shutting down: as a cancelled handler task, no reply
        exc = fut.exception()
        flushed = exc is None and fut.result()
        # a round's waiters come in runs from one connection (a turn's reads): its state is
        # read once per run, and again after a failed reply
        last: Any = None
        active = False
        for conn, request, result, queue_id, reply in waiters:
            if conn is not last:
                last, active = conn, conn.is_active
            if request.flag & RPC_ONEWAY or not active:
                continue
            try:
                if exc is not None:
                    reply = RemotingCommand.response_to(
                        request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"
                    )
                elif not flushed:
                    timeout = PutResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, result.append)
                    reply = self._render(request, timeout, queue_id)
                conn.send_response(reply)
            except Exception:  # one peer's failure must not cost the others their reply
                last = None
                logger.warning("could not answer a flushed send from %s", conn.remote_addr, exc_info=True)
