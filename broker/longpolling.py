"""Long polling: pulls that found nothing wait here until a message arrives or they time out.

Rules (RocketMQ ``PullRequestHoldService``, event-driven instead of polled):

1. A pull that would be answered PULL_NOT_FOUND (19) with the SUSPEND flag set is *held*
   under ``(topic, queueId)`` with ``pull_from_offset`` = its queue offset and a deadline of
   ``suspendTimeoutMillis`` (``shortPollingTimeMills`` when long polling is disabled).
2. When reput dispatches a message to that queue the store calls
   :meth:`PullRequestHoldService.notify_message_arriving`; every held request whose offset is
   now below the queue's max offset and whose tag filter accepts the message's tagsCode is
   re-executed at once (never held again) and answered.
3. A held request whose deadline passes is re-executed and answered with whatever the queue
   has (normally 19 / NO_NEW_MSG). One timer, armed for the earliest deadline, does this; a
   slow safety sweep (5 s, or ``shortPollingTimeMills``) re-checks every queue's max offset.
4. At most ``max_per_queue`` requests are held per queue; beyond that the pull is answered at
   once. A closed connection's requests are dropped.

:class:`PullRequestTable` holds the decisions (no loop, no clock: times are arguments);
:class:`PullRequestHoldService` adds the timer and the re-execution callback.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, KeysView, Mapping
from typing import TYPE_CHECKING, Any

from pocketmq.remoting.common.service import cancel_and_wait
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.slots import SlotRecord
from pocketmq.store import MessageFilter

if TYPE_CHECKING:
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)

#: ``(topic, queue_id)``
QueueKey = tuple[str, int]
#: stale deadline-heap entries tolerated before a compaction is considered
COMPACT_MIN = 64


class HeldPull(SlotRecord):
    """One suspended PULL_MESSAGE request.

    No Python ``__init__``: the pull processor makes ``HeldPull()`` (type_call, object_init)
    and fills its slots, one per held pull, not a dataclass's generated ``__init__`` called
    through slot_tp_init (~1.5k instructions more, callgrind); :meth:`of` makes one from its
    fields. Compared by identity (a table's ``list.remove``).
    """

    __slots__ = (
        "conn",
        "deadline_ms",
        "done",
        "header",
        "message_filter",
        "pull_from_offset",
        "queue_id",
        "request",
        "topic",
    )
    conn: RemotingConnection
    request: RemotingCommand
    topic: str
    queue_id: int
    pull_from_offset: int
    deadline_ms: int
    #: the pull's filter (``is_matched_by_consume_queue``); ``None`` accepts everything.
    message_filter: MessageFilter | None
    #: the request's parsed header (re-used when the pull is woken); None: parse again
    header: Any
    #: woken, expired or dropped (its deadline-heap entry is then stale)
    done: bool

    @classmethod
    def of(
        cls,
        conn: RemotingConnection,
        request: RemotingCommand,
        topic: str,
        queue_id: int,
        pull_from_offset: int,
        deadline_ms: int,
        message_filter: MessageFilter | None = None,
        header: Any = None,
    ) -> HeldPull:
        """A HeldPull of these fields (not done)."""
        self = cls()
        self.conn, self.request, self.topic, self.queue_id = conn, request, topic, queue_id
        self.pull_from_offset, self.deadline_ms, self.message_filter = (
            pull_from_offset,
            deadline_ms,
            message_filter,
        )
        self.header, self.done = header, False
        return self

    def __repr__(self) -> str:
        return (
            f"HeldPull(conn={self.conn!r}, topic={self.topic!r}, queue_id={self.queue_id}, "
            f"pull_from_offset={self.pull_from_offset}, deadline_ms={self.deadline_ms})"
        )

    def matches(self, tags_code: int | None) -> bool:
        if tags_code is None or self.message_filter is None:
            return True
        return self.message_filter.is_matched_by_consume_queue(tags_code)


class PullRequestTable:
    """The held requests per queue, plus a deadline heap. Pure: callers pass the time."""

    def __init__(self, max_per_queue: int = 1024) -> None:
        self.max_per_queue = max_per_queue
        self._by_queue: dict[QueueKey, list[HeldPull]] = {}
        #: the same dict, read-only for the hold service's per-message emptiness check
        self.by_queue: Mapping[QueueKey, list[HeldPull]] = self._by_queue
        self._deadlines: list[tuple[int, int, HeldPull]] = []
        #: entries of ``_deadlines`` whose request is done (woken, dropped): compacted away once
        #: they are most of the heap (see ``_remove``)
        self._stale = 0
        self._seq = itertools.count()
        #: held requests per connection: a close of one holding none (every idle or producer
        #: connection) looks nothing up but this; it scanned every held pull (10,000 idle
        #: closes x thousands of held pulls was seconds of loop)
        self._per_conn: dict[RemotingConnection, int] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_queue.values())

    def __bool__(self) -> bool:
        return bool(self._by_queue)

    def queues(self) -> list[QueueKey]:
        return list(self._by_queue)

    def held(self, topic: str, queue_id: int) -> list[HeldPull]:
        return list(self._by_queue.get((topic, queue_id), ()))

    def hold(self, req: HeldPull) -> bool:
        """Hold ``req``; False (nothing held) when its queue already has ``max_per_queue``."""
        key = (req.topic, req.queue_id)
        lst = self._by_queue.get(key)
        if lst is None:
            lst = self._by_queue[key] = []
        elif len(lst) >= self.max_per_queue:
            return False
        lst.append(req)
        heapq.heappush(self._deadlines, (req.deadline_ms, next(self._seq), req))
        per_conn = self._per_conn
        per_conn[req.conn] = per_conn.get(req.conn, 0) + 1
        return True

    def _remove(self, req: HeldPull, in_heap: bool = True, in_list: bool = True) -> None:
        """Forget ``req``; ``in_heap``: its deadline-heap entry stays (now stale); ``in_list``:
        it is still in its queue's list (False: the caller dropped the list)."""
        req.done = True
        if in_heap:
            # One more heap entry is stale. A pull woken by a message leaves its entry in the
            # heap until its deadline (``suspendTimeoutMillis``, 15 s for the SDK): at 2,000
            # msg/s that was ~30,000 stale entries, which ``next_deadline`` then popped in one
            # loop turn when the first deadline came (a 74 ms stall measured in
            # ``bench/e2e_latency.py``). Rebuilt once stale entries are most of it: O(1)
            # amortized per removal, the heap stays small. (Inline: a call per woken pull.)
            self._stale += 1
            heap = self._deadlines
            if self._stale > COMPACT_MIN and self._stale * 2 > len(heap):
                heap[:] = [e for e in heap if not e[2].done]
                heapq.heapify(heap)
                self._stale = 0
        per_conn = self._per_conn
        left = per_conn.get(req.conn, 1) - 1
        if left > 0:
            per_conn[req.conn] = left
        else:
            per_conn.pop(req.conn, None)
        if not in_list:
            return
        key = (req.topic, req.queue_id)
        lst = self._by_queue.get(key)
        if lst is not None:
            try:
                lst.remove(req)
            except ValueError:
                pass
            if not lst:
                del self._by_queue[key]

    def take_arrived(
        self,
        topic: str,
        queue_id: int,
        max_offset: int,
        tags_code: int | None = None,
        current_max_offset: Callable[[str, int], int] | None = None,
    ) -> list[HeldPull]:
        """Remove and return the requests of this queue that the arrival satisfies.

        ``max_offset`` is the queue's max offset after the arrival (next offset to write);
        when a request is at or past it, ``current_max_offset`` (if given) is asked again,
        as Java does, in case the notification is older than the request.
        """
        key = (topic, queue_id)
        lst = self._by_queue.get(key)
        if not lst:
            return []
        ready: list[HeldPull] = []
        for req in lst:
            newest = max_offset
            if newest <= req.pull_from_offset and current_max_offset is not None:
                newest = current_max_offset(topic, queue_id)
            if newest > req.pull_from_offset:
                # (inline of ``req.matches``: a call per held request and message)
                f = req.message_filter
                if tags_code is None or f is None or f.is_matched_by_consume_queue(tags_code):
                    ready.append(req)
        if len(ready) == len(lst):
            # every request of the queue is answered (one held pull per queue and consumer, the
            # common case): the queue's list goes whole, no list lookup and remove per request
            del self._by_queue[key]
            for req in ready:
                self._remove(req, True, False)
        else:
            for req in ready:
                self._remove(req)
        return ready

    def take_expired(self, now_ms: int) -> list[HeldPull]:
        """Remove and return every request whose deadline is ``<= now_ms``."""
        out: list[HeldPull] = []
        heap = self._deadlines
        while heap and heap[0][0] <= now_ms:
            _, _, req = heapq.heappop(heap)
            if req.done:
                self._stale -= 1
            else:
                self._remove(req, in_heap=False)
                out.append(req)
        return out

    def next_deadline(self) -> int | None:
        heap = self._deadlines
        while heap and heap[0][2].done:
            heapq.heappop(heap)
            self._stale -= 1
        return heap[0][0] if heap else None

    def drop_connection(self, conn: RemotingConnection) -> int:
        """Forget every request of ``conn`` (closed); returns how many."""
        if conn not in self._per_conn:
            return 0
        dropped = [r for lst in self._by_queue.values() for r in lst if r.conn is conn]
        for req in dropped:
            self._remove(req)
        return len(dropped)

    def take_all(self) -> list[HeldPull]:
        out = [r for lst in self._by_queue.values() for r in lst]
        for req in out:
            self._remove(req, in_heap=False)
        self._deadlines.clear()
        self._stale = 0
        return out


class PullRequestHoldService:
    """The loop side of long polling: deadline timer, safety sweep, re-execution.

    Args:
        execute: re-runs a held pull *without* suspending and sends its reply (the pull
            processor's ``execute_when_wakeup``); must not raise. None: set :attr:`execute`
            before the first pull is held (the pull processor is built with this service).
        max_offset_of: ``(topic, queue_id) → max offset`` (the store).
        check_interval: seconds between safety sweeps over every held queue.
    """

    #: the store's arriving listener never reads properties (tag filtering uses tagsCode): the
    #: store may then skip building a lazy properties object per dispatched message
    needs_properties = False

    def __init__(
        self,
        execute: Callable[[HeldPull], None] | None,
        max_offset_of: Callable[[str, int], int],
        *,
        max_per_queue: int = 1024,
        check_interval: float = 5.0,
    ) -> None:
        self.table = PullRequestTable(max_per_queue)
        self._held = self.table.by_queue
        self.execute: Callable[[HeldPull], None] = execute or _unbound
        self._max_offset_of = max_offset_of
        self._check_interval = check_interval
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._sweeper = self._loop.create_task(self._sweep(), name="pull-hold-sweeper")

    async def stop(self) -> None:
        """Answer every held request now (they get their normal reply) and stop the timers."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await cancel_and_wait(self._sweeper)
        self._sweeper = None
        for req in self.table.take_all():
            self._run(req)

    @property
    def held_queues(self) -> KeysView[QueueKey]:
        """The ``(topic, queue_id)`` keys with held pulls: a live view (``key in`` is one C call).

        The send processor keeps it to decide, per put, whether to dispatch at once; it is
        :meth:`is_held`'s answer without a Python call.
        """
        return self._held.keys()

    def is_held(self, topic: str, queue_id: int) -> bool:
        """Whether a pull waits on ``topic:queue_id``."""
        return (topic, queue_id) in self._held

    def now_ms(self) -> int:
        loop = self._loop or asyncio.get_running_loop()
        return int(loop.time() * 1000)

    # -- holding ---------------------------------------------------------------------------------
    def suspend(self, req: HeldPull) -> bool:
        """Hold ``req`` (its ``deadline_ms`` on :meth:`now_ms`'s clock); False if the queue is full."""
        if not self.table.hold(req):
            return False
        self._arm(req.deadline_ms)
        return True

    def notify_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None
    ) -> None:
        """Wake the requests of ``topic:queue_id`` that a message with ``tags_code`` satisfies."""
        # (the held-request dict, not ``self.table``: its __bool__ is a Python call per message)
        if not self._held:
            return
        for req in self.table.take_arrived(topic, queue_id, max_offset, tags_code, self._max_offset_of):
            try:  # (inline of ``_run``)
                self.execute(req)
            except Exception:
                logger.exception("re-executing held pull %s:%d failed", req.topic, req.queue_id)

    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        store_timestamp: int,
        filter_bit_map: bytes | None,
        properties: Mapping[str, str],
    ) -> None:
        """The store's ``MessageArrivingListener``: called by reput for each dispatched message.
        (``notify_message_arriving`` inline: one call level less per delivered message.)"""
        # the held-request dict itself, not ``self.table`` (its __bool__ is a Python call per message)
        if self._held:
            for req in self.table.take_arrived(topic, queue_id, logic_offset, tags_code, self._max_offset_of):
                try:
                    self.execute(req)
                except Exception:
                    logger.exception("re-executing held pull %s:%d failed", req.topic, req.queue_id)

    def arriving_batch(
        self, topic: str, queue_id: int, first_offset: int, tags_codes: list[int], store_timestamp: int
    ) -> None:
        """``arriving`` for the records of one batch put (one call from the store, not one each)."""
        if self._held:
            for offset, code in enumerate(tags_codes, first_offset):
                self.notify_message_arriving(topic, queue_id, offset, code)

    def drop_connection(self, conn: RemotingConnection) -> None:
        self.table.drop_connection(conn)

    # -- timers ----------------------------------------------------------------------------------
    def _arm(self, deadline_ms: int) -> None:
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        at = deadline_ms / 1000
        if self._timer is not None and self._timer_at is not None and self._timer_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        for req in self.table.take_expired(self.now_ms()):
            self._run(req)
        nxt = self.table.next_deadline()
        if nxt is not None:
            self._arm(nxt)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self._check_interval)
            for topic, queue_id in self.table.queues():
                try:
                    max_offset = self._max_offset_of(topic, queue_id)
                except Exception:
                    logger.exception("max offset of %s:%d failed", topic, queue_id)
                    continue
                for req in self.table.take_arrived(topic, queue_id, max_offset):
                    self._run(req)

    def _run(self, req: HeldPull) -> None:
        try:
            self.execute(req)
        except Exception:
            logger.exception("re-executing held pull %s:%d failed", req.topic, req.queue_id)


def _unbound(req: HeldPull) -> None:
    raise RuntimeError("PullRequestHoldService.execute is not set")
