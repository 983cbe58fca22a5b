"""``LitePullConsumer``: poll-style consumer (Java ``DefaultLitePullConsumer``).

Two modes: ``subscribe`` (queues assigned by rebalance, as for push consumers) or ``assign``
(the caller names the queues; no rebalance). One pull task per assigned queue long-polls the
broker and appends batches to a poll cache; :meth:`poll` hands out one batch at a time.

Offsets: each queue tracks the *consume offset* (next offset not yet returned by ``poll``).
``commit_sync`` writes these offsets to the offset store and waits for the broker;
``auto_commit`` (default) copies them to the store on every ``poll`` and the client instance
persists them every 5 s and on shutdown. After a restart a queue starts at its committed
offset (or ``consume_from_where`` when none). ``seek`` moves both the pull and the consume
offset, discards cached batches and restarts that queue's pull; ``pause``/``resume`` stop and
restart pulling of queues. Flow control: a queue stops pulling while it caches more than
``pull_threshold_for_queue`` messages or spans more than ``consume_max_span``; all queues stop
while ``pull_threshold_for_all`` messages wait in the poll cache.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from pocketmq.client.api import decode_pull_result
from pocketmq.client.config import LitePullConsumerConfig, MessageModel, resolve_config
from pocketmq.client.consumer.base import ConsumerBase
from pocketmq.client.consumer.offset_store import OffsetStore
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.rebalance import AllocateStrategy, allocate_averagely
from pocketmq.client.consumer.rebalance_impl import RebalanceImpl, now_ms
from pocketmq.client.consumer.send_back import reset_retry_topic
from pocketmq.client.consumer.subscription import MessageSelector, SubscriptionData, new_subscription
from pocketmq.client.errors import ClientClosedError, ClientStateError, MessageValidationError
from pocketmq.client.lifecycle import RUNNING
from pocketmq.client.message import MessageQueue, PullStatus
from pocketmq.client.namespace import unwrap_messages, unwrap_queue, wrap, wrap_queue
from pocketmq.client.validation import check_topic
from pocketmq.remoting.common.service import TaskSet
from pocketmq.remoting.protocol.errors import FlowControlError
from pocketmq.remoting.protocol.heartbeat import ConsumeType
from pocketmq.remoting.protocol.message import MessageExt

logger = logging.getLogger(__name__)
MIB = 1024 * 1024


# Enum members as module names: ``Enum.MEMBER`` is a metaclass lookup (~80 ns on CPython 3.11)
# and the pull/consume paths test these on every batch.
_FOUND = PullStatus.FOUND
_OFFSET_ILLEGAL = PullStatus.OFFSET_ILLEGAL


class _QueueState:
    __slots__ = ("consume_offset", "generation", "paused", "pq", "pull_offset", "task")

    def __init__(self, pq: ProcessQueue, pull_offset: int) -> None:
        self.pq = pq
        self.pull_offset = pull_offset  # -1: compute from the offset store on first pull
        self.consume_offset = pull_offset
        self.generation = 0
        self.paused = False
        self.task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class _Batch:
    mq: MessageQueue
    generation: int
    msgs: list[MessageExt]


class LitePullConsumer(ConsumerBase):
    """A poll-style consumer; ``async with LitePullConsumer("CG", namesrv=...) as c``.

    Raises (from the methods): :class:`ClientClosedError` when not running,
    :class:`ClientStateError` for mixing subscribe and assign, :class:`MessageValidationError`
    for bad topics/offsets.
    """

    config: LitePullConsumerConfig
    CONSUME_TYPE = ConsumeType.CONSUME_ACTIVELY

    def __init__(
        self,
        group: str = "DEFAULT_CONSUMER",
        namesrv: str | None = None,
        *,
        allocate_strategy: AllocateStrategy = allocate_averagely,
        config: LitePullConsumerConfig | None = None,
        **options: Any,
    ) -> None:
        config = resolve_config(LitePullConsumerConfig, config, "consumer_group", group, namesrv, options)
        super().__init__(config, allocate_strategy)
        self.rebalance_interval = config.rebalance_interval / 1000
        self._assigned_mode: bool | None = None
        self._queues: dict[MessageQueue, _QueueState] = {}
        self._cache: asyncio.Queue[_Batch] = asyncio.Queue()
        self._cached = 0
        self._tasks = TaskSet("lite-pull")
        self._last_commit = time.monotonic()

    # ------------------------------------------------------------------------ configuration
    def subscribe(
        self, topic: str, expression: str | MessageSelector = "*", expression_type: str = "TAG"
    ) -> None:
        """Subscribe to ``topic`` (tag expression, SQL92 with ``expression_type="SQL92"``, or a
        :class:`MessageSelector`); raises MessageValidationError."""
        if self._assigned_mode:
            raise ClientStateError("subscribe and assign are mutually exclusive")
        check_topic(topic)
        topic = wrap(self.namespace, topic)
        self._assigned_mode = False
        self._subs[topic] = new_subscription(topic, expression, expression_type)
        if self._rebalance is not None:
            self._rebalance.subscriptions[topic] = self._subs[topic]
            self.instance.tasks.spawn(
                self.queue_ops.refresh_route_and_rebalance(topic), name=f"lite-subscribe:{topic}"
            )

    def assign(self, mqs: Iterable[MessageQueue], expression: str | MessageSelector = "*") -> None:
        """Consume exactly these queues (no rebalance); replaces the previous assignment."""
        if self._assigned_mode is False:
            raise ClientStateError("subscribe and assign are mutually exclusive")
        wanted = {wrap_queue(self.namespace, mq) for mq in mqs}
        new_topics: set[str] = set()
        for mq in wanted:
            check_topic(mq.topic)
            if mq.topic not in self._subs:
                self._subs[mq.topic] = new_subscription(mq.topic, expression)
                new_topics.add(mq.topic)
        self._assigned_mode = True
        for mq in [m for m in self._queues if m not in wanted]:
            self._drop_queue(mq)
        # after start, a topic new to this consumer needs its route before its queues can pull
        late = bool(new_topics) and self._life.state is RUNNING
        for mq in wanted:
            if mq not in self._queues:
                self._add_queue(mq, ProcessQueue(now_ms()), -1, pull=not (late and mq.topic in new_topics))
        if late:
            self.instance.tasks.spawn(self._route_then_pull(new_topics), name="lite-assign-route")
        self._wake_assigned()

    async def _route_then_pull(self, topics: set[str]) -> None:
        for topic in topics:
            await self.queue_ops.refresh_route(topic)
        for mq, st in list(self._queues.items()):
            if mq.topic in topics and self._life.state is RUNNING and not st.paused:
                self._start_pull(mq, st)

    def route_topics(self) -> set[str]:
        """Topics whose routes the client instance keeps fresh: subscribed and assigned ones."""
        return set(self._subs)

    @property
    def running(self) -> bool:
        return self._life.state is RUNNING

    def assignment(self) -> set[MessageQueue]:
        return {unwrap_queue(self.namespace, mq) for mq in self._queues}

    def _held_queues(self) -> list[MessageQueue]:
        return list(self._queues)

    @property
    def offset_store(self) -> OffsetStore:
        if self._offset_store is None:
            raise ClientClosedError(f"consumer {self.group} is not started")
        return self._offset_store

    # ---------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        self._life.check(RUNNING)
        cfg = self.config
        inst = await self._attach()
        self._rebalance = RebalanceImpl(
            self, inst, self.group, cfg.message_model, self.allocate_strategy, pull_expire_recycle=False
        )
        if not self._assigned_mode:
            self._rebalance.subscriptions.update(self._subs)
        try:
            inst.register_consumer(self)
        except BaseException:
            await inst.release()
            raise
        self._life.move(RUNNING)
        for topic in list(self._subs):
            await self.queue_ops.refresh_route(topic)
        await self._check_client_in_broker()
        await inst.send_heartbeat_to_all_brokers()
        self._announced = True
        for mq, st in self._queues.items():
            self._start_pull(mq, st)
        if not self._assigned_mode:
            inst.wakeup_rebalance()

    async def shutdown(self) -> None:
        """Stop pulling; commit (auto-commit mode) and persist offsets; leave the instance."""
        inst = self._enter_shutdown()
        if inst is None:
            return
        await self._tasks.cancel_all(timeout=1.0)
        if self.config.auto_commit:
            self._update_store_offsets()
        try:
            await self.offset_store.persist_all(list(self._queues))
        except Exception:
            logger.exception("%s: final offset persist failed", self.group)
        for st in self._queues.values():
            st.pq.dropped = True
        await inst.release(consumer_group=self.group)
        self._instance = None

    # --------------------------------------------------------------------------- queues
    def _add_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int, *, pull: bool = True) -> None:
        st = _QueueState(pq, offset)
        self._queues[mq] = st
        if pull and self._life.state is RUNNING:
            self._start_pull(mq, st)

    def _start_pull(self, mq: MessageQueue, st: _QueueState) -> None:
        if st.task is None or st.task.done():
            st.task = self._tasks.spawn(
                self._pull_loop(mq, st), name=f"lite-pull:{mq.broker_name}:{mq.queue_id}"
            )

    def _drop_queue(self, mq: MessageQueue) -> None:
        st = self._queues.pop(mq, None)
        if st is not None:
            st.pq.dropped = True
            if st.task is not None:
                st.task.cancel()

    def _restart(self, mq: MessageQueue, st: _QueueState) -> None:
        """Discard what was pulled for ``mq`` and pull again from ``st.pull_offset``."""
        st.generation += 1
        st.pq.clear()
        if st.task is not None:
            st.task.cancel()
            st.task = None
        if self._life.state is RUNNING and not st.paused:
            self._start_pull(mq, st)

    async def _pull_loop(self, mq: MessageQueue, st: _QueueState) -> None:
        cfg = self.config
        pq = st.pq
        while self._life.state is RUNNING and not pq.dropped:
            if st.paused:
                st.task = None
                return
            if (
                self._cached > cfg.pull_threshold_for_all
                or pq.msg_count > cfg.pull_threshold_for_queue
                or pq.msg_size > cfg.pull_threshold_size_for_queue * MIB
                or pq.max_span() > cfg.consume_max_span
            ):
                await asyncio.sleep(0.05)
                continue
            if st.pull_offset < 0:
                offset = await self.queue_ops.compute_pull_from_where(mq)
                if offset < 0:
                    await asyncio.sleep(3.0)
                    continue
                st.pull_offset = st.consume_offset = offset
            gen = st.generation
            sub = self._subs.get(mq.topic) or new_subscription(mq.topic, "*")
            try:
                result = await self.queue_ops.pull_raw(
                    mq, sub, st.pull_offset, cfg.pull_batch_size, suspend_ms=cfg.broker_suspend_max_time_millis,
                    timeout=cfg.consumer_timeout_millis_when_suspend / 1000,
                )  # fmt: skip
                msgs = decode_pull_result(result, sub) if result.status is _FOUND else []
            except FlowControlError:
                await asyncio.sleep(0.02)
                continue
            except (OSError, ValueError, LookupError) as exc:
                logger.warning("%s: pull %s at %d failed: %s", self.group, mq, st.pull_offset, exc)
                await asyncio.sleep(3.0)
                continue
            except Exception as exc:
                logger.warning("%s: pull %s at %d failed: %s", self.group, mq, st.pull_offset, exc)
                await asyncio.sleep(3.0)
                continue
            if gen != st.generation or pq.dropped:
                continue
            if result.status is _OFFSET_ILLEGAL:
                logger.warning(
                    "%s: offset %d of %s illegal, moving to %d",
                    self.group,
                    st.pull_offset,
                    mq,
                    result.next_begin_offset,
                )
            if msgs:
                pq.put_messages(msgs)
                self._cached += len(msgs)
                self._cache.put_nowait(_Batch(mq, gen, msgs))
            st.pull_offset = result.next_begin_offset
            if not msgs and pq.msg_count == 0 and result.status is not _OFFSET_ILLEGAL:
                st.consume_offset = max(st.consume_offset, result.next_begin_offset)

    # -------------------------------------------------------------------------------- poll
    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """Next batch of messages, or ``[]`` after ``timeout`` seconds (default poll_timeout_millis).

        Raises:
            ClientClosedError: the consumer is not running.
        """
        self._life.check_running()
        wait = self.config.poll_timeout_millis / 1000 if timeout is None else timeout
        deadline = time.monotonic() + wait
        cache = self._cache
        while True:
            if cache.empty():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._maybe_auto_commit()
                    return []
                try:
                    async with asyncio.timeout(remaining):
                        batch = await cache.get()
                except TimeoutError:
                    self._maybe_auto_commit()
                    return []
            else:
                batch = cache.get_nowait()
            self._cached -= len(batch.msgs)
            st = self._queues.get(batch.mq)
            if st is None or st.generation != batch.generation or st.pq.dropped:
                continue
            offset = st.pq.remove_messages(batch.msgs)
            st.consume_offset = max(st.consume_offset, offset)
            if batch.mq.topic == self.retry_topic:  # a batch comes from one queue: one topic
                reset_retry_topic(batch.msgs, self.retry_topic)
            self._maybe_auto_commit()
            if self.namespace:
                unwrap_messages(self.namespace, batch.msgs)
            return batch.msgs

    def __aiter__(self) -> AsyncIterator[MessageExt]:
        """``async for msg in consumer``: one message at a time, in poll order, until the
        consumer shuts down (offsets advance as with :meth:`poll`)."""
        return self._messages()

    async def _messages(self) -> AsyncIterator[MessageExt]:
        while self._life.state is RUNNING:
            try:
                msgs = await self.poll()
            except ClientClosedError:
                return
            for msg in msgs:
                yield msg

    def _maybe_auto_commit(self) -> None:
        if self.config.auto_commit:
            self._update_store_offsets()
            now = time.monotonic()
            if (
                self.config.message_model is MessageModel.BROADCASTING
                and now - self._last_commit > self.config.auto_commit_interval_millis / 1000
            ):
                self._last_commit = now
                self.instance.tasks.spawn(
                    self.offset_store.persist_all(list(self._queues)), name="lite-auto-commit"
                )

    def _update_store_offsets(self) -> None:
        store = self.offset_store
        for mq, st in self._queues.items():
            if st.consume_offset >= 0:
                store.update_offset(mq, st.consume_offset)

    async def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit consume offsets (all assigned queues, or ``offsets``) and wait for the store."""
        store = self.offset_store
        if offsets is None:
            self._update_store_offsets()
            mqs = list(self._queues)
        else:
            offsets = {wrap_queue(self.namespace, mq): off for mq, off in offsets.items()}
            for mq, off in offsets.items():
                store.update_offset(mq, off)
            mqs = list(offsets)
        await store.persist_all(mqs, prune=offsets is None)

    commit = commit_sync

    async def committed(self, mq: MessageQueue) -> int:
        """The offset stored for ``mq`` (broker or file), -1 if none."""
        from pocketmq.client.consumer.offset_store import ReadOffsetType

        return await self.offset_store.read_offset(
            wrap_queue(self.namespace, mq), ReadOffsetType.READ_FROM_STORE
        )

    # --------------------------------------------------------------------- seek and pause
    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Next ``poll`` of ``mq`` starts at ``offset`` (must be within [min, max] offsets).

        Raises:
            MessageValidationError: ``mq`` is not assigned or the offset is out of range.
        """
        mq = wrap_queue(self.namespace, mq)
        st = self._queues.get(mq)
        if st is None:
            raise MessageValidationError(f"{mq} is not assigned to this consumer")
        lo, hi = await self.min_offset(mq), await self.max_offset(mq)
        if not lo <= offset <= hi:
            raise MessageValidationError(f"seek offset {offset} of {mq} is outside [{lo}, {hi}]")
        st.pull_offset = st.consume_offset = offset
        self._restart(mq, st)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.max_offset(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            st = self._queues.get(wrap_queue(self.namespace, mq))
            if st is not None:
                st.paused = True

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            mq = wrap_queue(self.namespace, mq)
            st = self._queues.get(mq)
            if st is not None and st.paused:
                st.paused = False
                if self._life.state is RUNNING:
                    self._start_pull(mq, st)

    def is_paused(self, mq: MessageQueue) -> bool:
        st = self._queues.get(wrap_queue(self.namespace, mq))
        return st is not None and st.paused

    # ------------------------------------------------------------------ ConsumerInner protocol
    def subscriptions(self) -> list[SubscriptionData]:
        return [] if self._assigned_mode else list(self._subs.values())

    def update_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        rb = self._rebalance
        if rb is not None and topic in self._subs:
            rb.topic_subscribe_info[topic] = mqs

    async def do_rebalance(self) -> None:
        if (
            self._life.state is RUNNING
            and self._announced
            and self._rebalance is not None
            and not self._assigned_mode
        ):
            await self._rebalance.do_rebalance(False)

    async def persist_consumer_offset(self) -> None:
        if self._life.state is RUNNING:
            await self.offset_store.persist_all(list(self._queues), oneway=True)

    def offset_table(self, topic: str) -> dict[MessageQueue, int]:
        return self.offset_store.clone_offset_table(topic)

    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None:
        for mq, off in table.items():
            st = self._queues.get(mq)
            if st is not None and mq.topic == topic:
                self.offset_store.update_offset(mq, off)
                st.pull_offset = st.consume_offset = off
                self._restart(mq, st)

    def running_info(self) -> dict[str, Any]:
        return {
            "jstack": "",
            "mqTable": {mq: st.pq.info() for mq, st in self._queues.items()},
            "properties": {
                "PROP_CONSUME_TYPE": self.CONSUME_TYPE.value,
                "consumerGroup": self.group,
            },
            "statusTable": {},
            "subscriptionSet": [s.to_json() for s in self.subscriptions()],
        }

    async def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> dict[str, Any]:
        return {"autoCommit": True, "consumeResult": "CR_THROW_EXCEPTION", "order": False,
                "remark": "lite pull consumers have no listener", "spentTimeMills": 0}  # fmt: skip

    # -------------------------------------------------------------------- RebalanceHost protocol
    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        st = self._queues.get(mq)
        if st is not None and self.config.auto_commit and st.consume_offset >= 0:
            self.offset_store.update_offset(mq, st.consume_offset)
        await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)
        self._drop_queue(mq)
        return True

    def dispatch_pull(self, mq: MessageQueue, pq: ProcessQueue, offset: int, locked: bool) -> None:
        self._add_queue(mq, pq, offset)

    def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        for mq in [m for m in self._queues if m.topic == topic and m not in mq_divided]:
            self._drop_queue(mq)
        self._notify_rebalance(topic, mq_all, mq_divided)
