"""Concurrent consumption (Java ``ConsumeMessageConcurrentlyService``).

``consume_thread_max`` worker tasks take consume requests (a batch of one queue's messages)
from one queue and call the listener. While one of them waits idle, a plain (not ``async def``)
listener is called at once in the pull's read instead (no wake-up, no loop turn before it,
``_consume_now``); what cannot end there (an awaitable it returned, failed messages to send
back) goes to that worker's task. A coroutine is never stepped outside a task: an ``async
def`` listener is always called by a worker (``asyncio.current_task()``, ``asyncio.timeout``
and its context variables hold as in any task). Rules:

* retried messages (topic ``%RETRY%group``) are shown under their original topic;
* a call running past ``consume_timeout`` minutes is cancelled by a sweeper (no per-call
  timer, docs/development.md, hot paths) and counts as RECONSUME_LATER; exceptions and ``None`` count too;
* failed messages of a clustering group are sent back to the broker (CONSUMER_SEND_MSG_BACK →
  ``%RETRY%group`` with a growing delay, DLQ after ``max_reconsume_times``); when the send-back
  itself fails they are consumed again locally after 5 s with ``reconsume_times + 1``, so nothing
  is acknowledged unprocessed; broadcasting consumers drop them with a warning (as Java);
* then the batch leaves the process queue and the queue's offset advances to the smallest
  offset still in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections import deque
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from pocketmq.client.config import MessageModel
from pocketmq.client.consumer.listener import (
    ConcurrentListener,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
)
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.send_back import reset_retry_topic
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.common.service import TaskSet, wake_first
from pocketmq.remoting.protocol.message import MessageExt

if TYPE_CHECKING:
    from pocketmq.client.config import PushConsumerConfig
    from pocketmq.client.consumer.offset_store import OffsetStore
    from pocketmq.client.consumer.rebalance_impl import RebalanceImpl
    from pocketmq.client.consumer.stats import ConsumeStats
    from pocketmq.client.instance import MQClientInstance

logger = logging.getLogger(__name__)

RETRY_LOCALLY_DELAY_MS = 5000
# Enum members as module names: ``Enum.MEMBER`` is a metaclass lookup (~80 ns on CPython 3.11)
# and every consumed batch tests these.
_CONSUME_SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
_RECONSUME_LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
_BROADCASTING = MessageModel.BROADCASTING
_NOT_CALLED: Any = object()  # ``_consume``: the listener is still to be called

L = TypeVar("L")


class ConsumeHost(Protocol):
    """What the consume services need from their push consumer."""

    group: str
    retry_topic: str
    stats: ConsumeStats

    @property
    def config(self) -> PushConsumerConfig: ...

    @property
    def instance(self) -> MQClientInstance: ...

    @property
    def offset_store(self) -> OffsetStore: ...

    @property
    def rebalance(self) -> RebalanceImpl: ...

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool: ...


Batch = tuple[list[MessageExt], ProcessQueue, MessageQueue]


class _Slot:
    __slots__ = ("deadline", "task", "timed_out")

    def __init__(self) -> None:
        self.deadline = 0.0
        self.timed_out = False
        self.task: asyncio.Task[None] | None = None


class _Handed:
    """The rest of a listener call made in a pull's read (``_consume_now``): ``coro``, not yet
    started, is awaited by a worker (in its task); ``slot`` (None: the worker's own) carries the
    consume timeout of an awaitable the listener returned."""

    __slots__ = ("coro", "slot")

    def __init__(self, coro: Coroutine[Any, Any, None], slot: _Slot | None) -> None:
        self.coro = coro
        self.slot = slot


Item = Batch | _Handed


class Batches:
    """The consume requests waiting for a worker: ``asyncio.Queue``'s ``put_nowait`` / ``get``
    (unbounded, FIFO, a cancelled getter passes its wake-up on) without its loop check per
    blocking ``get`` (``_get_loop``: a ``get_running_loop``, one ``getpid`` syscall on CPython
    3.11, per consumed batch when workers wait) and its ``while``/``try`` layers."""

    __slots__ = ("_getters", "_items", "_loop")

    def __init__(self) -> None:
        self._items: deque[Item] = deque()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None

    def qsize(self) -> int:
        return len(self._items)

    def idle(self) -> bool:
        """Whether a getter waits and nothing is queued ahead (a worker is free)."""
        return not self._items and bool(self._getters)

    def put_nowait(self, item: Item) -> None:
        self._items.append(item)
        if self._getters:
            wake_first(self._getters)

    def put_first(self, item: Item) -> None:
        self._items.appendleft(item)
        if self._getters:
            wake_first(self._getters)

    async def get(self) -> Item:
        items = self._items
        while not items:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            getter = loop.create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                if items and not getter.cancelled():  # woken, then cancelled: wake another
                    wake_first(self._getters)
                raise
        return items.popleft()


class ConsumeServiceBase(Generic[L]):
    """What both consume services hold: their consumer, its listener, the batch size and the
    listener timeout of its configuration, and the task set :meth:`stop` cancels."""

    def __init__(self, consumer: ConsumeHost, listener: L, tasks_name: str) -> None:
        self.consumer = consumer
        self.listener = listener
        cfg = consumer.config
        self.batch_size = cfg.consume_message_batch_max_size
        self.timeout = cfg.consume_timeout * 60.0
        self._tasks = TaskSet(tasks_name)
        # graceful stop: listener calls in progress, and the future stop() waits on for them
        self._running = 0
        self._closing = False
        self._drained: asyncio.Future[None] | None = None

    async def stop(self, grace: float = 0.0) -> None:
        """Take no new batches; wait up to ``grace`` seconds for the listener calls in progress
        (their results, offsets included, are processed); then cancel what is left."""
        self._closing = True
        if grace > 0 and self._running:
            self._drained = asyncio.get_running_loop().create_future()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self._drained
        await self._tasks.cancel_all(timeout=1.0)

    def _check_drained(self) -> None:
        drained = self._drained
        if drained is not None and not self._running and not drained.done():
            drained.set_result(None)


class ConsumeMessageConcurrentlyService(ConsumeServiceBase[ConcurrentListener]):
    def __init__(self, consumer: ConsumeHost, listener: ConcurrentListener) -> None:
        super().__init__(consumer, listener, "consume-concurrently")
        cfg = consumer.config
        self._queue = Batches()
        self._slots = [_Slot() for _ in range(cfg.consume_thread_max)]
        self._spare = _Slot()  # the slot of an awaitable a call in a read returned (``_consume_now``)
        self._is_coro = inspect.iscoroutinefunction(listener)

    def start(self) -> None:
        for i, slot in enumerate(self._slots):
            slot.task = self._tasks.spawn(self._worker(i), name=f"consume-worker-{i}")
        self._tasks.spawn(self._sweep(), name="consume-timeout-sweeper")

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool) -> bool:
        """Consume ``msgs`` in requests of ``consume_message_batch_max_size``: while a worker is
        free, a plain listener's call runs here (``_consume_now``), else the request waits for
        a worker. True when every request ended here (its offset is in the offset store)."""
        size = self.batch_size
        queue = self._queue
        if self._is_coro:  # never stepped outside a task: to a worker
            if len(msgs) <= size:
                queue.put_nowait((msgs, pq, mq))
                return False
            for i in range(0, len(msgs), size):
                queue.put_nowait((msgs[i : i + size], pq, mq))
            return False
        if len(msgs) <= size:
            if queue.idle():
                return self._consume_now(msgs, pq, mq)
            queue.put_nowait((msgs, pq, mq))
            return False
        ended = True
        for i in range(0, len(msgs), size):
            part = msgs[i : i + size]
            if queue.idle():
                ended = self._consume_now(part, pq, mq) and ended
            else:
                queue.put_nowait((part, pq, mq))
                ended = False
        return ended

    def _consume_now(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> bool:
        """Call a plain listener here (in the pull's read) while a worker waits idle, instead of
        waking that worker for the next loop turn; True when the request ended here (most). What
        must await goes first in the queue, to that idle worker, and counts in the
        ``consume_thread_max`` bound as its call: an awaitable the listener returned (awaited
        unstepped in the worker's task, under a slot whose consume timeout runs from here), or
        the send-back of failed messages (``_process_result``)."""
        if pq.dropped or self._closing:
            return True
        ctx = self._context(msgs, mq)
        try:
            status: Any = self.listener(msgs, ctx)
        except Exception:
            self._raised(msgs, mq)
            status = _RECONSUME_LATER
        if inspect.isawaitable(status):
            slot = self._spare
            self._spare = _Slot()  # ``slot`` goes with the call
            slot.deadline = time.monotonic() + self.timeout
            self._running += 1
            self._queue.put_first(_Handed(self._consume(slot, msgs, pq, mq, ctx, status), slot))
            return False
        failed = self._settle(status, ctx, msgs, pq, mq)
        if failed is None:
            return True
        self._running += 1
        self._queue.put_first(_Handed(self._process_result(failed, ctx, msgs, pq, mq), None))
        return False

    def _done(self) -> None:
        self._running -= 1
        if self._drained is not None:
            self._check_drained()

    def submit_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        self.consumer.instance.pull_service.call_later(
            RETRY_LOCALLY_DELAY_MS, lambda: None if pq.dropped else self.submit(msgs, pq, mq, True)
        )

    @property
    def backlog(self) -> int:
        return self._queue.qsize()

    async def _sweep(self) -> None:
        interval = min(1.0, max(self.timeout / 4, 0.01))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for slot in self._slots:
                if slot.deadline and now > slot.deadline and not slot.timed_out and slot.task is not None:
                    slot.timed_out = True
                    slot.task.cancel()

    async def _worker(self, i: int) -> None:
        slots = self._slots
        slot = slots[i]
        get = self._queue.get
        while True:
            item = await get()
            if item.__class__ is _Handed:  # the rest of a call made in a read
                assert isinstance(item, _Handed)
                handed = item.slot
                if handed is not None:  # (the sweeper times it out through this worker)
                    handed.task = slot.task
                    slots[i] = handed
                try:
                    await item.coro
                finally:
                    if handed is not None:
                        slots[i] = slot
                        handed.task = None
                    self._done()
                continue
            msgs, pq, mq = cast(Batch, item)
            if pq.dropped or self._closing:
                continue
            self._running += 1
            try:
                await self._consume(slot, msgs, pq, mq)
            finally:
                self._done()

    async def _consume(
        self, slot: _Slot, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
        ctx: ConsumeConcurrentlyContext | None = None, status: Any = None,
    ) -> None:  # fmt: skip
        """A worker's listener call, or (``ctx`` given) the awaitable ``status`` a call in a
        read returned, awaited here."""
        if ctx is None:
            ctx = self._context(msgs, mq)
            slot.deadline = time.monotonic() + self.timeout
            status = _NOT_CALLED
        # (the listener call inline, not a coroutine of its own: one frame and await less a batch)
        try:
            if status is _NOT_CALLED:
                status = self.listener(msgs, ctx)
            if self._is_coro or inspect.isawaitable(status):
                status = await status
        except asyncio.CancelledError:
            if not slot.timed_out:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            logger.warning(
                "%s: listener exceeded consume_timeout (%.0fs) on %d message(s) of %s; cancelled, reconsume later",
                self.consumer.group, self.timeout, len(msgs), mq,
            )  # fmt: skip
            status = _RECONSUME_LATER
        except Exception:
            self._raised(msgs, mq)
            status = _RECONSUME_LATER
        finally:
            slot.deadline = 0.0
            slot.timed_out = False
        failed = self._settle(status, ctx, msgs, pq, mq)
        if failed is not None:
            await self._process_result(failed, ctx, msgs, pq, mq)

    def _context(self, msgs: list[MessageExt], mq: MessageQueue) -> ConsumeConcurrentlyContext:
        if mq.topic == self.consumer.retry_topic:  # a batch comes from one queue: one topic
            reset_retry_topic(msgs, mq.topic)
        return ConsumeConcurrentlyContext(mq)

    def _raised(self, msgs: list[MessageExt], mq: MessageQueue) -> None:
        logger.exception("%s: listener raised on %d message(s) of %s", self.consumer.group, len(msgs), mq)

    def _settle(
        self, status: Any, ctx: ConsumeConcurrentlyContext, msgs: list[MessageExt], pq: ProcessQueue,
        mq: MessageQueue,
    ) -> ConsumeConcurrentlyStatus | None:  # fmt: skip
        """A listener's result: counted, and when every message is acknowledged (the common
        case) the batch leaves the process queue and the offset advances here, without
        ``_process_result``'s coroutine (it awaits only to send failed messages back). Returns
        the status ``_process_result`` must handle, else None."""
        consumer = self.consumer
        if not isinstance(status, ConsumeConcurrentlyStatus):
            if status is not None:
                logger.warning("%s: listener returned %r; treated as RECONSUME_LATER", consumer.group, status)
            status = _RECONSUME_LATER
        pq.last_consume_timestamp = time.monotonic_ns() // 1_000_000
        consumer.stats.record(len(msgs), status is _CONSUME_SUCCESS)
        if pq.dropped:
            logger.info("%s: %s dropped while consuming; result discarded", consumer.group, mq)
            return None
        if status is _CONSUME_SUCCESS and ctx.ack_index >= len(msgs) - 1:
            offset = pq.remove_messages(msgs)
            if offset >= 0:
                consumer.offset_store.update_offset(mq, offset, increase_only=True)
            return None
        return cast(ConsumeConcurrentlyStatus, status)

    async def _process_result(
        self, status: ConsumeConcurrentlyStatus, ctx: ConsumeConcurrentlyContext, msgs: list[MessageExt],
        pq: ProcessQueue, mq: MessageQueue,
    ) -> None:  # fmt: skip
        ack = min(ctx.ack_index, len(msgs) - 1) if status is _CONSUME_SUCCESS else -1
        failed = msgs[ack + 1 :]
        done = msgs
        if failed:
            if self.consumer.config.message_model is _BROADCASTING:
                for msg in failed:
                    logger.warning(
                        "%s: BROADCASTING consume failed, message dropped: %s",
                        self.consumer.group,
                        msg.msg_id,
                    )
            else:
                back_failed = []
                for msg in failed:
                    if not await self.consumer.send_message_back(
                        msg, ctx.delay_level_when_next_consume, mq.broker_name
                    ):
                        msg.reconsume_times += 1
                        back_failed.append(msg)
                if back_failed:
                    keep = {m.queue_offset for m in back_failed}
                    done = [m for m in msgs if m.queue_offset not in keep]
                    self.submit_later(back_failed, pq, mq)
        offset = pq.remove_messages(done)
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, offset, increase_only=True)
