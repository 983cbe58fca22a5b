"""``ProcessQueue``: the messages of one queue that were pulled and not yet acknowledged.

Rules (Java ``ProcessQueue``):

* ``msg_tree`` holds messages by queue offset, ascending. Pulls of one queue are sequential, so
  inserts append at the end; an out-of-order insert (after an offset reset, or messages put
  back by the orderly service) re-sorts. ``OrderedDict`` keeps first/last lookups and any
  removal O(1).
* The offset that may be committed is the smallest offset still in flight, or
  ``queue_offset_max + 1`` when nothing is in flight: a slow message holds the commit back
  (no loss on crash, possible redelivery).
* Orderly consumption moves a batch from ``msg_tree`` to ``consuming_tree`` (``take``), then
  either commits it (offset = last taken + 1) or puts it back (``make_consume_again``).
* ``consuming`` is true while a consume request of this queue is scheduled or running; a put
  that finds it false returns ``True`` ("dispatch a consume request").
* ``dropped`` is set when the queue is rebalanced away or its offset became illegal; every
  loop that touches the queue checks it and stops.
* Times are monotonic milliseconds supplied by the caller.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable

from pocketmq.remoting.protocol.message import MessageExt

REBALANCE_LOCK_MAX_LIVE_TIME = 30_000
PULL_MAX_IDLE_TIME = 120_000


class ProcessQueue:
    __slots__ = (
        "consuming",
        "consuming_tree",
        "dropped",
        "last_consume_timestamp",
        "last_lock_timestamp",
        "last_pull_timestamp",
        "locked",
        "msg_acc_cnt",
        "msg_count",
        "msg_size",
        "msg_tree",
        "queue_offset_max",
        "try_unlock_times",
    )

    def __init__(self, now_ms: int = 0) -> None:
        self.msg_tree: OrderedDict[int, MessageExt] = OrderedDict()
        self.consuming_tree: OrderedDict[int, MessageExt] = OrderedDict()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.consuming = False
        self.dropped = False
        self.locked = False
        self.last_lock_timestamp = now_ms
        self.last_pull_timestamp = now_ms
        self.last_consume_timestamp = now_ms
        self.try_unlock_times = 0
        self.msg_acc_cnt = 0

    # ------------------------------------------------------------------------- pulling side
    def put_messages(self, msgs: Iterable[MessageExt]) -> bool:
        """Add pulled messages; returns True when a consume request should be dispatched."""
        tree = self.msg_tree
        added = 0
        size = 0
        resort = False
        last_key = next(reversed(tree)) if tree else -1
        consuming = self.consuming_tree
        # A pull's messages come in ascending offsets after everything cached: an offset above
        # every key cached (none being consumed in order) cannot be in either tree, and needs
        # no resort; only the others are looked up.
        fresh = not consuming
        for msg in msgs:
            off = msg.queue_offset
            if fresh and off > last_key:
                tree[off] = msg
                last_key = off
                added += 1
                size += len(msg.body)
                continue
            if off in tree or off in consuming:
                continue
            if off < last_key:
                resort = True
            tree[off] = msg
            last_key = off if off > last_key else last_key
            added += 1
            size += len(msg.body)
        if resort:
            self._resort()
        self.msg_count += added
        self.msg_size += size
        if tree:
            self.queue_offset_max = max(self.queue_offset_max, next(reversed(tree)))
        if tree and not self.consuming:
            self.consuming = True
            return True
        return False

    def _resort(self) -> None:
        self.msg_tree = OrderedDict(sorted(self.msg_tree.items()))

    def max_span(self) -> int:
        """Distance between the oldest and newest cached offsets (0 when empty)."""
        tree = self.msg_tree
        if not tree:
            return 0
        return next(reversed(tree)) - next(iter(tree))

    def min_offset(self) -> int:
        return next(iter(self.msg_tree)) if self.msg_tree else -1

    # -------------------------------------------------------------------- concurrent consume
    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Acknowledge consumed messages; returns the offset to commit, or -1 if none."""
        tree = self.msg_tree
        if not tree:
            return -1
        removed = 0
        size = 0
        for msg in msgs:
            if tree.pop(msg.queue_offset, None) is not None:
                removed += 1
                size += len(msg.body)
        self.msg_count -= removed
        self.msg_size -= size
        if tree:
            return next(iter(tree))
        return self.queue_offset_max + 1

    # ----------------------------------------------------------------------- orderly consume
    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` oldest messages into the consuming tree (orderly)."""
        out: list[MessageExt] = []
        tree = self.msg_tree
        while tree and len(out) < batch_size:
            off, msg = tree.popitem(last=False)
            self.consuming_tree[off] = msg
            out.append(msg)
        if not out:
            self.consuming = False
        return out

    def commit(self) -> int:
        """Acknowledge everything taken; returns the next offset to consume (-1 if none)."""
        ct = self.consuming_tree
        if not ct:
            return -1
        offset = next(reversed(ct)) + 1
        self.msg_count -= len(ct)
        self.msg_size -= sum(len(m.body) for m in ct.values())
        ct.clear()
        return offset

    def make_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Put taken messages back at the front, to be consumed again (orderly)."""
        for msg in msgs:
            self.consuming_tree.pop(msg.queue_offset, None)
            self.msg_tree[msg.queue_offset] = msg
        self._resort()

    def rollback(self) -> None:
        self.make_consume_again(list(self.consuming_tree.values()))

    def has_temp_message(self) -> bool:
        return bool(self.msg_tree)

    def clear(self) -> None:
        self.msg_tree.clear()
        self.consuming_tree.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0

    # ---------------------------------------------------------------------------- liveness
    def is_lock_expired(self, now_ms: int) -> bool:
        return now_ms - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME

    def is_pull_expired(self, now_ms: int) -> bool:
        return now_ms - self.last_pull_timestamp > PULL_MAX_IDLE_TIME

    def info(
        self, *, now_monotonic_ms: int | None = None, now_wall_ms: int | None = None
    ) -> dict[str, object]:
        """Java ``ProcessQueueInfo`` fields for ConsumerRunningInfo.

        Our timestamps are monotonic; Java reports epoch milliseconds, so they are shifted by
        the current wall-minus-monotonic difference (tools print them as dates).
        """
        mono = time.monotonic_ns() // 1_000_000 if now_monotonic_ms is None else now_monotonic_ms
        wall = time.time_ns() // 1_000_000 if now_wall_ms is None else now_wall_ms
        shift = wall - mono
        tree = self.msg_tree
        return {
            "cachedMsgCount": self.msg_count,
            "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024),
            "cachedMsgMinOffset": next(iter(tree)) if tree else 0,
            "cachedMsgMaxOffset": next(reversed(tree)) if tree else 0,
            "commitOffset": 0,
            "droped": self.dropped,
            "locked": self.locked,
            "lastLockTimestamp": self.last_lock_timestamp + shift if self.last_lock_timestamp else 0,
            "lastPullTimestamp": self.last_pull_timestamp + shift,
            "lastConsumeTimestamp": self.last_consume_timestamp + shift,
            "transactionMsgCount": len(self.consuming_tree),
            "tryUnlockTimes": self.try_unlock_times,
        }
