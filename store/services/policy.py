"""``PutPolicy``: what a put waits for after its append (Java ``handleDiskFlush`` + ``handleHA``).

SYNC_FLUSH waits for the group-commit round covering the put's end offset (``syncFlushTimeout``
→ FLUSH_DISK_TIMEOUT); before the services run there is no group commit and the CommitLog is
flushed in place. SYNC_MASTER waits on the store's ``ReplicationWaiter`` (the HA seam), whose
status wins over the flush's. ASYNC_FLUSH on an ASYNC_MASTER waits for nothing. The façade
(``MessageStore.put_*_async``) keeps the no-wait test and the plain SYNC_FLUSH wait inline (one
coroutine frame per put) and hands every other case here.
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.store.listener import ReplicationWaiter
from pocketmq.store.results import PutMessageStatus, PutResult
from pocketmq.store.services.flush import GroupCommitService, RoundFuture

__all__ = ["PutPolicy"]

_PUT_OK = PutMessageStatus.PUT_OK
_FLUSH_DISK_TIMEOUT = PutMessageStatus.FLUSH_DISK_TIMEOUT


class PutPolicy:
    """The flush and replication waits of one store.

    Args:
        sync_flush: ``flushDiskType`` is SYNC_FLUSH.
        sync_master: ``brokerRole`` is SYNC_MASTER.
        flush_now: the blocking CommitLog flush used while no group commit runs.
    """

    def __init__(self, *, sync_flush: bool, sync_master: bool, flush_now: Callable[[], object]) -> None:
        self.sync_flush = sync_flush
        self.sync_master = sync_master
        self._flush_now = flush_now
        #: the running group commit (SYNC_FLUSH with the services started), else None
        self.group_commit: GroupCommitService | None = None

    def flush_waiter(self, result: PutResult) -> RoundFuture | None:
        """The shared group-commit future covering ``result``'s end offset, or None when no
        flush wait applies (ASYNC_FLUSH, services not started, failed put)."""
        append = result.append
        gc = self.group_commit
        if append is None or gc is None:
            return None
        return gc.wait_flushed(append.wrote_offset + append.wrote_bytes)

    async def wait(self, result: PutResult, replication: ReplicationWaiter | None) -> PutResult:
        """``result`` once the flush and replication policies are met, or with the failing
        status (FLUSH_DISK_TIMEOUT, or the replication waiter's) and the same append."""
        append = result.append
        assert append is not None
        end = append.wrote_offset + append.wrote_bytes
        status = _PUT_OK
        if self.sync_flush:
            gc = self.group_commit
            if gc is None:
                self._flush_now()
            elif not await gc.wait_flushed(end):
                status = _FLUSH_DISK_TIMEOUT
        if self.sync_master and replication is not None:
            repl = await replication.wait_replicated(end)
            if repl is not _PUT_OK:
                status = repl
        if status is _PUT_OK:
            return result
        return PutResult(status, append)
