"""SYNC_MASTER send replies, answered from the slave's acknowledgement instead of one task per send.

How a SYNC_MASTER send (``WAIT`` true, ASYNC_FLUSH) is answered:

1. the send processor puts the message synchronously and hands the put here (:meth:`add`);
2. the store's ``replicate_then`` decides at once when it can (the slave already holds the
   bytes → SUCCESS; no slave, or one ``haSlaveFallbehindMax`` behind → SLAVE_NOT_AVAILABLE, 11),
   and the reply is returned as usual;
3. otherwise the handler returns no reply (as a held pull) and the put waits in the store's one
   FIFO of waiters (``GroupTransfer``); the acknowledgement that covers it answers SUCCESS, the
   ``slaveTimeout`` timer FLUSH_SLAVE_TIMEOUT (12). Nothing is sent for a oneway request or on a
   closed connection.

SYNC_MASTER with SYNC_FLUSH waits for both and keeps the store's ``put_*_async`` path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pocketmq.remoting.protocol.codes import RPC_ONEWAY
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.store import PutMessageStatus, PutResult

if TYPE_CHECKING:
    from pocketmq.remoting.transport.connection import RemotingConnection

__all__ = ["ReplicationReplies"]

logger = logging.getLogger(__name__)

_PUT_OK = PutMessageStatus.PUT_OK
#: renders a send's reply (no stats): (request, put result, queue id) -> reply
RenderFn = Callable[[RemotingCommand, PutResult, int], RemotingCommand]
#: one waiting send: (connection, request, put result, queue id, its reply once acknowledged)
Waiter = tuple[Any, RemotingCommand, PutResult, int, RemotingCommand]


class Replicator(Protocol):
    """The store's seam (``MessageStore.replicate_then``)."""

    def replicate_then(
        self, result: PutResult, resolve: Callable[[Any, PutMessageStatus], None], arg: Any
    ) -> PutMessageStatus | None: ...


class ReplicationReplies:
    def __init__(self, render: RenderFn) -> None:
        #: the reply of a put the slave did not take (SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT)
        self._render = render

    def add(
        self,
        store: Replicator,
        conn: RemotingConnection,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        reply: RemotingCommand,
    ) -> RemotingCommand | None:
        """The reply now, or None when the acknowledgement (or the timeout) will answer; for a
        stored put (``result.append`` set) whose SEND_OK ``reply`` was rendered (and its stats
        counted) when it was put, so the rendering is the send processor's alone."""
        status = store.replicate_then(result, self._answer, (conn, request, result, queue_id, reply))
        if status is None:
            return None
        if status is _PUT_OK:
            return reply
        return self._render(request, PutResult(status, result.append), queue_id)

    def _answer(self, waiter: Waiter, status: PutMessageStatus) -> None:
        conn, request, result, queue_id, reply = waiter
        if request.flag & RPC_ONEWAY or not conn.is_active:
            return
        try:
            if status is not _PUT_OK:
                reply = self._render(request, PutResult(status, result.append), queue_id)
            conn.send_response(reply)
        except Exception:  # one peer's failure must not cost the others their reply
            logger.warning("could not answer a replicated send from %s", conn.remote_addr, exc_info=True)
