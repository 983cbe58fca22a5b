"""Orderly consumption (Java ``ConsumeMessageOrderlyService``).

Rules:

* one consume loop per queue at a time, guarded by a local per-queue ``asyncio.Lock``; in a
  clustering group the loop also needs the broker lock of the queue (taken at rebalance,
  renewed for all queues every ``lock_interval`` = 20 s, considered lost after 30 s without
  renewal). Without it the loop stops and retries the lock later;
* messages are taken in offset order, ``consume_message_batch_max_size`` at a time; SUCCESS
  commits them (offset = last + 1); SUSPEND_CURRENT_QUEUE_A_MOMENT (also: exception, ``None``,
  timeout) puts them back and pauses the queue for ``suspend_current_queue_time_millis``;
  a message that failed ``max_reconsume_times`` times (unbounded by default, as Java) goes to
  the DLQ (send-back with delay level -1) and is committed;
* a loop yields after 60 s of continuous consumption so other queues get the listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from typing import TYPE_CHECKING

from pocketmq.client.config import MessageModel
from pocketmq.client.consumer.consume_service import ConsumeServiceBase
from pocketmq.client.consumer.listener import ConsumeOrderlyContext, ConsumeOrderlyStatus, OrderlyListener
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.send_back import reset_retry_topic
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.message import MessageExt

if TYPE_CHECKING:
    from pocketmq.client.consumer.consume_service import ConsumeHost

logger = logging.getLogger(__name__)

MAX_TIME_CONSUME_CONTINUOUSLY = 60.0


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ConsumeMessageOrderlyService(ConsumeServiceBase[OrderlyListener]):
    def __init__(self, consumer: ConsumeHost, listener: OrderlyListener) -> None:
        super().__init__(consumer, listener, "consume-orderly")
        cfg = consumer.config
        self.clustering = cfg.message_model is MessageModel.CLUSTERING
        self.max_reconsume = (1 << 31) - 1 if cfg.max_reconsume_times == -1 else cfg.max_reconsume_times
        self.locks: dict[MessageQueue, asyncio.Lock] = {}
        self._sem = asyncio.Semaphore(cfg.consume_thread_max)
        self._stopped = False

    def start(self) -> None:
        if self.clustering:
            self._tasks.spawn(self._lock_renewal(), name="orderly-lock-renewal")

    async def stop(self, grace: float = 0.0) -> None:
        """Take no new batches; wait up to ``grace`` seconds for the batches in progress (each
        runs under its queue lock, and its result, offset included, is applied before the lock
        is released); then cancel what is left."""
        self._stopped = True
        if grace > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    for lock in list(self.locks.values()):
                        async with lock:
                            pass
        await super().stop()

    @property
    def backlog(self) -> int:
        return 0

    def queue_lock(self, mq: MessageQueue) -> asyncio.Lock:
        lock = self.locks.get(mq)
        if lock is None:
            lock = self.locks[mq] = asyncio.Lock()
        return lock

    async def _lock_renewal(self) -> None:
        await asyncio.sleep(1.0)
        while True:
            try:
                await self.consumer.rebalance.lock_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("%s: lock renewal failed", self.consumer.group)
            await asyncio.sleep(self.consumer.config.lock_interval / 1000)

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool) -> None:
        if dispatch and not self._stopped:
            self._tasks.spawn(self._run(pq, mq), name=f"orderly:{mq.broker_name}:{mq.queue_id}")

    def submit_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        if self._stopped:  # shutting down: the batch is consumed again by the queue's next owner
            return
        self.consumer.instance.pull_service.call_later(
            delay_ms, lambda: None if pq.dropped else self.submit([], pq, mq, True)
        )

    def _try_lock_later(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        async def relock() -> None:
            await asyncio.sleep(0.1)
            locked = await self.consumer.rebalance.lock(mq)
            self.submit_later(pq, mq, 10 if locked else 3000)

        if not self._stopped:
            self._tasks.spawn(relock(), name=f"orderly-relock:{mq.queue_id}")

    def _lock_ok(self, pq: ProcessQueue) -> bool:
        return not self.clustering or (pq.locked and not pq.is_lock_expired(_now_ms()))

    async def _run(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        if pq.dropped:
            return
        async with self.queue_lock(mq):
            if not self._lock_ok(pq):
                if not pq.dropped:
                    self._try_lock_later(pq, mq)
                return
            begin = time.monotonic()
            while not pq.dropped and not self._stopped:
                if not self._lock_ok(pq):
                    self._try_lock_later(pq, mq)
                    return
                if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY:
                    self.submit_later(pq, mq, 10)
                    return
                msgs = pq.take_messages(self.batch_size)
                if not msgs:
                    return
                reset_retry_topic(msgs, self.consumer.retry_topic)
                ctx = ConsumeOrderlyContext(mq)
                status = await self._call_listener(msgs, ctx)
                pq.last_consume_timestamp = _now_ms()
                self.consumer.stats.record(len(msgs), status is ConsumeOrderlyStatus.SUCCESS)
                if pq.dropped:
                    # The rebalance that dropped the queue waits for this queue lock before it
                    # persists the offset and unlocks the queue at the broker, so a batch the
                    # listener consumed is committed now: otherwise the next owner reads the old
                    # offset and consumes the batch a second time.
                    if status is ConsumeOrderlyStatus.SUCCESS:
                        offset = pq.commit()
                        if offset >= 0:
                            self.consumer.offset_store.update_offset(mq, offset)
                    logger.info("%s: %s dropped while consuming orderly", self.consumer.group, mq)
                    return
                if not await self._process_result(msgs, status, ctx, pq, mq):
                    return

    async def _call_listener(
        self, msgs: list[MessageExt], ctx: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus:
        try:
            async with self._sem, asyncio.timeout(self.timeout):
                result = self.listener(msgs, ctx)
                if inspect.isawaitable(result):
                    result = await result
        except TimeoutError:
            logger.warning(
                "%s: orderly listener exceeded consume_timeout on %s; suspending",
                self.consumer.group,
                ctx.message_queue,
            )
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        except Exception:
            logger.exception("%s: orderly listener raised on %s", self.consumer.group, ctx.message_queue)
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if not isinstance(result, ConsumeOrderlyStatus):
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return result

    async def _process_result(
        self, msgs: list[MessageExt], status: ConsumeOrderlyStatus, ctx: ConsumeOrderlyContext,
        pq: ProcessQueue, mq: MessageQueue,
    ) -> bool:  # fmt: skip
        """Apply the listener's verdict; returns whether the loop may go on."""
        if status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT and await self._to_dlq_if_exhausted(
            msgs, mq
        ):
            pq.make_consume_again(msgs)
            delay = ctx.suspend_current_queue_time_millis
            if delay < 0:
                delay = self.consumer.config.suspend_current_queue_time_millis
            if not pq.dropped:
                self.submit_later(pq, mq, delay)
            return False
        offset = pq.commit()
        if offset >= 0:
            self.consumer.offset_store.update_offset(mq, offset)
        return True

    async def _to_dlq_if_exhausted(self, msgs: list[MessageExt], mq: MessageQueue) -> bool:
        """Send exhausted messages to the DLQ; True if the batch must be consumed again."""
        suspend = False
        for msg in msgs:
            if msg.reconsume_times >= self.max_reconsume:
                if not await self.consumer.send_message_back(msg, -1, mq.broker_name):
                    suspend = True
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend
