"""``RebalanceLockManager``: per-queue locks of orderly consumers (LOCK/UNLOCK_BATCH_MQ).

A queue is granted to a client id when it is unlocked, already held by that client (the lock is
renewed), or its holder has not renewed for ``lock_max_live_ms`` (60 s, RocketMQ's REBALANCE_LOCK_MAX_LIVE_TIME).
:meth:`unlock_all` releases a client's locks in a group (used when it unregisters from the group).
Pure: time is an argument.
"""

from __future__ import annotations

from collections.abc import Iterable

from pocketmq.remoting.protocol.bodies import MessageQueue

REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000


class RebalanceLockManager:
    def __init__(self, lock_max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS) -> None:
        self.lock_max_live_ms = lock_max_live_ms
        #: group → queue → (client id, last update ms)
        self.table: dict[str, dict[MessageQueue, tuple[str, int]]] = {}

    def _holds(self, group: str, mq: MessageQueue, client_id: str, now_ms: int) -> bool:
        entry = self.table.get(group, {}).get(mq)
        return entry is not None and entry[0] == client_id and now_ms - entry[1] <= self.lock_max_live_ms

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str, now_ms: int
    ) -> list[MessageQueue]:
        """Lock what can be locked; returns the queues ``client_id`` now holds."""
        locks = self.table.setdefault(group, {})
        granted: list[MessageQueue] = []
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None or entry[0] == client_id or now_ms - entry[1] > self.lock_max_live_ms:
                locks[mq] = (client_id, now_ms)
                granted.append(mq)
        return granted

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        locks = self.table.get(group)
        if not locks:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry[0] == client_id:
                del locks[mq]
        if not locks:
            del self.table[group]

    def unlock_all(self, group: str, client_id: str) -> int:
        """Release every lock ``client_id`` holds in ``group``; returns how many."""
        locks = self.table.get(group)
        if not locks:
            return 0
        mine = [mq for mq, entry in locks.items() if entry[0] == client_id]
        for mq in mine:
            del locks[mq]
        if not locks:
            del self.table[group]
        return len(mine)

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now_ms: int) -> bool:
        return self._holds(group, mq, client_id, now_ms)
