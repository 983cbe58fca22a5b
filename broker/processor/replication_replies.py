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
#: builds a send's reply: (request, put result, queue id, topic) -> reply
ReplyFn = Callable[[RemotingCommand, PutResult, int, str], RemotingCommand]


class Replicator(Protocol):
    """The store's seam (``MessageStore.replicate_then``)."""

    def replicate_then(
        self, result: PutResult, resolve: Callable[[Any, PutMessageStatus], None], arg: Any
    ) -> PutMessageStatus | None: ...


class ReplicationReplies:
    def __init__(self, reply: ReplyFn) -> None:
        self._reply = reply

    def add(
        self,
        store: Replicator,
        conn: RemotingConnection,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        topic: str,
    ) -> RemotingCommand | None:
        """The reply now, or None when the acknowledgement (or the timeout) will answer."""
        if result.append is None:
            return self._reply(request, result, queue_id, topic)
        status = store.replicate_then(result, self._answer, (conn, request, result, queue_id, topic))
        if status is None:
            return None
        if status is not _PUT_OK:
            result = PutResult(status, result.append)
        return self._reply(request, result, queue_id, topic)

    def _answer(
        self, waiter: tuple[Any, RemotingCommand, PutResult, int, str], status: PutMessageStatus
    ) -> None:
        conn, request, result, queue_id, topic = waiter
        if request.flag & RPC_ONEWAY or not conn.is_active:
            return
        try:
            if status is not _PUT_OK:
                result = PutResult(status, result.append)
            conn.send_response(self._reply(request, result, queue_id, topic))
        except Exception:  # one peer's failure must not cost the others their reply
            logger.warning("could not answer a replicated send from %s", conn.remote_addr, exc_info=True)
