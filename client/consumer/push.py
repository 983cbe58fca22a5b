"""``PushConsumer``: long-polling consumer with listeners (Java ``DefaultMQPushConsumer``).

Lifecycle: ``subscribe`` topics, ``register_listener`` (concurrent or orderly), ``start``.
Every pull is a long poll (held up to 15 s by the broker); a reply feeds the queue's
:class:`ProcessQueue` and the consume service, then the next pull is issued at once. Pulls
pause (50 ms back-off) while a queue caches more than ``pull_threshold_for_queue`` messages or
``pull_threshold_size_for_queue`` MiB, or (concurrent mode) spans more than
``consume_concurrently_max_span`` offsets. Errors back off 3 s (FLOW_CONTROL: 20 ms).
Clustering groups commit offsets to the broker, broadcasting consumers to a local file.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from typing import Any

from pocketmq.client.api import decode_pull_result, pull_result
from pocketmq.client.config import MessageModel, PushConsumerConfig, resolve_config
from pocketmq.client.consumer.base import ConsumerBase
from pocketmq.client.consumer.consume_orderly import ConsumeMessageOrderlyService
from pocketmq.client.consumer.consume_service import ConsumeMessageConcurrentlyService
from pocketmq.client.consumer.listener import (
    ConcurrentListener,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    OrderlyListener,
)
from pocketmq.client.consumer.offset_store import (
    OffsetStore,
)
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_service import PullRequest
from pocketmq.client.consumer.rebalance import AllocateStrategy, allocate_averagely, strategy_name
from pocketmq.client.consumer.rebalance_impl import RebalanceImpl, now_ms
from pocketmq.client.consumer.send_back import send_message_back
from pocketmq.client.consumer.stats import ConsumeStats
from pocketmq.client.consumer.subscription import MessageSelector, SubscriptionData, new_subscription
from pocketmq.client.errors import (
    ClientStateError,
    MessageValidationError,
)
from pocketmq.client.hooks import ConsumeMessageHook, hooked_listener
from pocketmq.client.lifecycle import CREATED, RUNNING
from pocketmq.client.message import MessageQueue, PullResult, PullStatus
from pocketmq.client.namespace import plain_topic_listener, unwrap_queue, wrap
from pocketmq.client.trace import hook_consumer
from pocketmq.client.validation import check_topic
from pocketmq.remoting.protocol.codes import FLAG_COMMIT_OFFSET, pull_sys_flag
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import FlowControlError, ResponseError
from pocketmq.remoting.protocol.headers import PullMessageRequestHeader
from pocketmq.remoting.protocol.heartbeat import ConsumeType
from pocketmq.remoting.protocol.message import MessageDecodeError, MessageExt

logger = logging.getLogger(__name__)

MIB = 1024 * 1024
DELAY_FLOW_CONTROL_MS = 50
DELAY_EXCEPTION_MS = 3000
DELAY_BROKER_FLOW_CONTROL_MS = 20


# Enum members as module names: ``Enum.MEMBER`` is a metaclass lookup (~80 ns on CPython 3.11)
# and the pull/consume paths test these on every batch.
_FOUND = PullStatus.FOUND
_OFFSET_ILLEGAL = PullStatus.OFFSET_ILLEGAL
_CLUSTERING = MessageModel.CLUSTERING


class _PullReply:
    """The waiter of a queue's pulls (``RemotingClient.invoke_into``): a reply is handled as the
    connection reads it: its messages go to the process queue and the consume service. When
    every listener call of the batch ended in the read (a plain listener while a worker is
    free, ``ConsumeMessageConcurrentlyService.submit``), the queue's next pull is written with
    this same waiter, in the read. The pull task keeps awaiting ``future``: it is set when the
    next pull does not follow in the read (True: the task pulls again, after the consume worker
    woken first took the batch; False: it was scheduled or the queue is gone) or failed.

    The next pull is built after the listener call, not before it as RocketMQ's: it then
    carries the commit offset of the batch just consumed (a queue handed to another member
    resumes there; built before, the three-member test of tests/integration/test_client_basic
    consumed the last batch of two queues twice, every run). It leaves no later for that: the
    read's writes go out together at the end of the read's handling, after the listener call
    either way."""

    __slots__ = ("addr", "consumer", "future", "offset", "req", "sub")

    def __init__(
        self,
        consumer: PushConsumer,
        req: PullRequest,
        sub: SubscriptionData,
        addr: str,
        offset: int,
        future: asyncio.Future[bool],
    ) -> None:
        self.consumer = consumer
        self.req = req
        self.sub = sub
        self.addr = addr
        self.offset = offset  # the pull's queue offset
        self.future = future

    def set_result(self, reply: RemotingCommand) -> None:
        future = self.future
        if future.done():  # the pull task was cancelled (shutdown): the reply is dropped
            return
        try:
            again = self.consumer._on_result(
                self.req, self.sub, self.addr, pull_result(reply, self.offset, self.addr), self
            )
        except Exception as exc:  # FlowControlError, ResponseError, a bug: the task handles it
            future.set_exception(exc)
            return
        if again is not self:  # the next pull was not written with this waiter
            future.set_result(again is True)

    def set_exception(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)

    def done(self) -> bool:
        return self.future.done()


class PushConsumer(ConsumerBase):
    """A push consumer; ``async with PushConsumer("CG", namesrv=..., listener=fn) as c``.

    Args:
        group: consumer group.
        namesrv: name server list (default: env ``NAMESRV_ADDR``).
        listener: concurrent listener (or orderly with ``orderly=True``); see
            :mod:`pocketmq.client.consumer.listener`.
        allocate_strategy: one of :mod:`pocketmq.client.consumer.rebalance`'s strategies.
        **options: any :class:`PushConsumerConfig` field (``message_model=...``).
    """

    config: PushConsumerConfig
    CONSUME_TYPE = ConsumeType.CONSUME_PASSIVELY

    def __init__(
        self,
        group: str = "DEFAULT_CONSUMER",
        namesrv: str | None = None,
        *,
        listener: ConcurrentListener | OrderlyListener | None = None,
        orderly: bool = False,
        allocate_strategy: AllocateStrategy = allocate_averagely,
        config: PushConsumerConfig | None = None,
        **options: Any,
    ) -> None:
        config = resolve_config(PushConsumerConfig, config, "consumer_group", group, namesrv, options)
        super().__init__(config, allocate_strategy)
        self.rebalance_interval = config.rebalance_interval / 1000
        self.stats = ConsumeStats()
        self._listener: ConcurrentListener | OrderlyListener | None = None
        self._orderly = False
        self._service: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        self._paused = False
        self._suggest: dict[MessageQueue, int] = {}
        self._start_time = time.time_ns() // 1_000_000
        #: the loop the pulls run on (their reply futures), read once
        self._loop: asyncio.AbstractEventLoop | None = None
        if listener is not None:
            self.register_listener(listener, orderly=orderly)
        self._consume_hooks: list[ConsumeMessageHook] = []
        if config.enable_msg_trace:  # message traces: shadows start/shutdown (client/trace.py)
            hook_consumer(self)

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        """Call ``hook.consume_message_before(ctx)`` / ``consume_message_after(ctx)`` around every
        listener call (RocketMQ's ``registerConsumeMessageHook``; :mod:`pocketmq.client.hooks`).
        Register before :meth:`start`."""
        self._consume_hooks.append(hook)

    # ------------------------------------------------------------------------ configuration
    def subscribe(
        self, topic: str, expression: str | MessageSelector = "*", expression_type: str = "TAG"
    ) -> None:
        """Subscribe to ``topic`` with a tag expression (``"TagA || TagB"``, ``"*"``), an SQL92
        one (``expression_type="SQL92"``) or a :class:`MessageSelector`.

        Raises:
            MessageValidationError: invalid topic or expression.
        """
        check_topic(topic)
        topic = wrap(self.namespace, topic)
        self._subs[topic] = new_subscription(topic, expression, expression_type)
        if self._rebalance is not None:
            self._rebalance.subscriptions[topic] = self._subs[topic]
            self.instance.tasks.spawn(
                self.queue_ops.refresh_route_and_rebalance(topic), name=f"subscribe:{topic}"
            )

    def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)
        if self._rebalance is not None:
            self._rebalance.subscriptions.pop(topic, None)

    def register_listener(
        self, listener: ConcurrentListener | OrderlyListener, *, orderly: bool = False
    ) -> None:
        if self._life.state is not CREATED:
            raise ClientStateError("register the listener before start()")
        if not callable(listener):
            raise MessageValidationError("listener must be callable")
        if self.namespace:  # the listener sees plain topics
            listener = plain_topic_listener(self.namespace, listener)
        self._listener = listener
        self._orderly = orderly

    @property
    def orderly(self) -> bool:
        return self._orderly

    @property
    def rebalance(self) -> RebalanceImpl:
        assert self._rebalance is not None
        return self._rebalance

    @property
    def offset_store(self) -> OffsetStore:
        assert self._offset_store is not None
        return self._offset_store

    # ---------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start pulling. Raises ClientStateError without listener/subscription or if restarted."""
        self._life.check(RUNNING)
        if self._listener is None:
            raise ClientStateError("no message listener registered")
        if not self._subs:
            raise ClientStateError("no subscription: call subscribe() before start()")
        cfg = self.config
        inst = await self._attach()
        self._rebalance = RebalanceImpl(self, inst, self.group, cfg.message_model, self.allocate_strategy)
        self._rebalance.subscriptions.update(self._subs)
        if cfg.message_model is _CLUSTERING:
            self._rebalance.subscriptions[self.retry_topic] = new_subscription(self.retry_topic, "*")
        listener: Any = self._listener
        if self._consume_hooks:
            listener = hooked_listener(self.group, listener, self._consume_hooks)
        if self._orderly:
            self._service = ConsumeMessageOrderlyService(self, listener)
        else:
            self._service = ConsumeMessageConcurrentlyService(self, listener)
        self._service.start()
        try:
            inst.register_consumer(self)
        except BaseException:
            await self._service.stop()
            await inst.release()
            raise
        self._life.move(RUNNING)
        # RocketMQ's order: routes, a heartbeat to every broker, then the first rebalance.
        for topic in list(self._rebalance.subscriptions):
            await self.queue_ops.refresh_route(topic)
        await self._check_client_in_broker()
        await inst.send_heartbeat_to_all_brokers()
        self._announced = True
        inst.wakeup_rebalance()

    async def shutdown(self) -> None:
        """Stop consuming, persist offsets (waiting for the broker), release broker locks."""
        inst = self._enter_shutdown()
        if inst is None:
            return
        assert self._service is not None and self._rebalance is not None and self._offset_store is not None
        # Let a rebalance or offset reset under way finish first (they see SHUTDOWN and start
        # no pulls), so the final persist below covers the final table.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.mq_client_api_timeout / 1000):
                async with self._rebalance.table_lock:
                    pass
        await self._service.stop(self.config.await_termination_millis_when_shutdown / 1000)
        self._rebalance.drop_all()
        await inst.pull_service.cancel_group(self.group)
        mqs = list(self._rebalance.process_queue_table)
        try:
            await self._offset_store.persist_all(mqs)
        except Exception:
            logger.exception("%s: final offset persist failed", self.group)
        if self._orderly and self.config.message_model is _CLUSTERING:
            await self._rebalance.unlock_all()
        self._rebalance.process_queue_table.clear()
        await inst.release(consumer_group=self.group)
        self._instance = None

    def pause(self) -> None:
        """Stop pulling (in-flight consumption completes); :meth:`resume` restarts."""
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    # ------------------------------------------------------------------ ConsumerInner protocol
    def subscriptions(self) -> list[SubscriptionData]:
        if self._rebalance is None:
            return list(self._subs.values())
        return list(self._rebalance.subscriptions.values())

    def update_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        rb = self._rebalance
        if rb is not None and topic in rb.subscriptions:
            rb.topic_subscribe_info[topic] = mqs

    async def do_rebalance(self) -> None:
        if self._life.state is RUNNING and self._announced and self._rebalance is not None:
            await self._rebalance.do_rebalance(self._orderly)

    async def persist_consumer_offset(self) -> None:
        if self._life.state is RUNNING and self._rebalance is not None:
            await self.offset_store.persist_all(list(self._rebalance.process_queue_table), oneway=True)

    def offset_table(self, topic: str) -> dict[MessageQueue, int]:
        return self.offset_store.clone_offset_table(topic) if self._offset_store else {}

    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (:meth:`RebalanceImpl.reset_offsets`), then a rebalance
        re-creates the reset queues from the stored offsets."""
        await self.rebalance.reset_offsets(topic, table, self.offset_store)
        inst = self._instance
        if inst is not None:
            inst.wakeup_rebalance()

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO's body (Java ``ConsumerRunningInfo``)."""
        cfg = self.config
        rb = self._rebalance
        mq_table = {mq: pq.info() for mq, pq in (rb.process_queue_table.items() if rb else [])}
        return {
            "jstack": "",
            "mqTable": mq_table,
            "properties": {
                "PROP_CLIENT_VERSION": "V4_9_8",
                "PROP_CONSUMEORDERLY": str(self._orderly).lower(),
                "PROP_CONSUMER_START_TIMESTAMP": str(self._start_time),
                "PROP_CONSUME_TYPE": self.CONSUME_TYPE.value,
                "PROP_THREADPOOL_CORE_SIZE": str(cfg.consume_thread_max),
                "consumerGroup": self.group,
                "messageModel": cfg.message_model.value,
                "consumeFromWhere": cfg.consume_from_where.value,
                "allocateMessageQueueStrategy": strategy_name(self.allocate_strategy),
                "pullBatchSize": str(cfg.pull_batch_size),
                "consumeMessageBatchMaxSize": str(cfg.consume_message_batch_max_size),
                "maxReconsumeTimes": str(cfg.max_reconsume_times),
            },
            "statusTable": {topic: self.stats.snapshot() for topic in (rb.subscriptions if rb else {})},
            "subscriptionSet": [s.to_json() for s in self.subscriptions()],
        }

    async def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: run the listener on ``msg`` once (Java
        ``ConsumeMessageDirectlyResult``); offsets and send-back are not involved."""
        assert self._listener is not None
        begin = time.monotonic()
        mq = MessageQueue(msg.topic, broker_name or "", msg.queue_id)
        try:
            if self._orderly:
                res: Any = self._listener([msg], ConsumeOrderlyContext(mq))  # type: ignore[arg-type]
            else:
                res = self._listener([msg], ConsumeConcurrentlyContext(mq))  # type: ignore[arg-type]
            if inspect.isawaitable(res):
                res = await res
            ok = res in (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS)
            result, remark = ("CR_SUCCESS" if ok else "CR_LATER"), None
        except Exception as exc:
            result, remark = "CR_THROW_EXCEPTION", f"{type(exc).__name__}: {exc}"
        out: dict[str, Any] = {
            "autoCommit": True,
            "consumeResult": result,
            "order": self._orderly,
            "spentTimeMills": int((time.monotonic() - begin) * 1000),
        }
        if remark:
            out["remark"] = remark
        return out

    # -------------------------------------------------------------------- RebalanceHost protocol
    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        store = self.offset_store
        if self._orderly and self.config.message_model is _CLUSTERING:
            assert isinstance(self._service, ConsumeMessageOrderlyService)
            lock = self._service.queue_lock(mq)
            try:
                async with asyncio.timeout(1.0):
                    await lock.acquire()
            except TimeoutError:
                pq.try_unlock_times += 1
                logger.info("%s: %s is being consumed; unlock deferred", self.group, mq)
                return False
            try:
                await store.persist(mq)
                store.remove_offset(mq)
                await self.rebalance.unlock(mq, oneway=True)
            finally:
                lock.release()
            return True
        await store.persist(mq)
        store.remove_offset(mq)
        return True

    def dispatch_pull(self, mq: MessageQueue, pq: ProcessQueue, offset: int, locked: bool) -> None:
        if self._life.state is not RUNNING:  # a rebalance that was under way when shutdown began
            pq.dropped = True
            return
        req = PullRequest(self.group, mq, pq, offset, previously_locked=locked)
        self.instance.pull_service.execute_now(req)

    def _held_queues(self) -> list[MessageQueue]:
        rb = self._rebalance
        return [] if rb is None else list(rb.process_queue_table)

    def assignment(self) -> set[MessageQueue]:
        """The queues of the subscribed topics this consumer pulls now (the rebalance's result;
        its retry topic left out; plain topics when namespaced)."""
        return {unwrap_queue(self.namespace, mq) for mq in self._held_queues() if mq.topic in self._subs}

    def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        if self._life.state is not RUNNING:
            return
        # Heartbeat at once so brokers learn a new subscription version quickly.
        self.instance.tasks.spawn(
            self.instance.send_heartbeat_to_all_brokers(), name="heartbeat-after-rebalance"
        )
        self._notify_rebalance(topic, mq_all, mq_divided)

    # --------------------------------------------------------------------------------- pulls
    def _later(self, req: PullRequest, delay_ms: int) -> bool:
        if self._life.state is RUNNING:
            self.instance.pull_service.execute_later(req, delay_ms)
        return False

    def _again(self, req: PullRequest) -> bool:
        """Whether the next pull of ``req`` follows at once (else it is scheduled)."""
        if self._life.state is not RUNNING:
            return False
        if self.config.pull_interval > 0:
            self.instance.pull_service.execute_later(req, self.config.pull_interval)
            return False
        return True

    async def pull_message(self, req: PullRequest) -> None:
        """Pull ``req``'s queue until a pull has to wait; always ends by scheduling the next
        one (or dropping the queue).

        An immediate next pull runs in this same task rather than a new one per pull; while
        replies are handled as the connection reads them (:class:`_PullReply`) the next pull
        is written in the read, after the batch's listener call (so it carries the commit
        offset of what was just consumed), and this task only waits. A reply handled here
        yields once first (``_pull_awaited``): the consume worker takes the batch first.
        """
        try:
            while True:
                if not await self._pull_message(req):
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            # A bug must not end this queue's pull chain: log it and try again later.
            logger.exception("%s: pull of %s failed unexpectedly", self.group, req.message_queue)
            self._later(req, DELAY_EXCEPTION_MS)

    async def _pull_message(self, req: PullRequest) -> bool:
        """One pull (and those chained in the reads); True when the next one should follow at once."""
        try:
            step = self._pull_now(req, None)
            if step is None:
                return await self._pull_awaited(req)
            if step is True or step is False:
                return step
            return await step.future  # chained pulls handled as they are read (``_PullReply``)
        except FlowControlError:
            return self._later(req, DELAY_BROKER_FLOW_CONTROL_MS)
        except (ResponseError, OSError) as exc:
            if self._life.state is RUNNING and not req.process_queue.dropped:
                logger.warning(
                    "%s: pull %s at %d failed: %s", self.group, req.message_queue, req.next_offset, exc
                )
            return self._later(req, DELAY_EXCEPTION_MS)

    def _pull_now(self, req: PullRequest, waiter: _PullReply | None) -> _PullReply | bool | None:
        """The pull of ``req`` without an await: its checks, then the request written with
        ``waiter`` (a new one when None), which is returned. False: the pull was scheduled
        later or the queue is gone; None: it needs :meth:`_pull_awaited` (an orderly queue's
        first offset, a route to refresh, no open connection or RPC hooks)."""
        pq = req.process_queue
        if pq.dropped or self._life.state is not RUNNING:
            return False
        cfg = self.config
        mq = req.message_queue
        pq.last_pull_timestamp = now_ms()
        if self._paused:
            return self._later(req, 1000)
        if (
            pq.msg_count > cfg.pull_threshold_for_queue
            or pq.msg_size > cfg.pull_threshold_size_for_queue * MIB
        ):
            return self._later(req, DELAY_FLOW_CONTROL_MS)
        if self._orderly:
            if not pq.locked:
                return self._later(req, DELAY_EXCEPTION_MS)
            if not req.previously_locked:
                return None
        elif pq.max_span() > cfg.consume_concurrently_max_span:
            return self._later(req, DELAY_FLOW_CONTROL_MS)
        # (RUNNING: the rebalance and the instance are set; no property read)
        rb, inst = self._rebalance, self._instance
        assert rb is not None and inst is not None
        sub = rb.subscriptions.get(mq.topic)
        if sub is None:
            return self._later(req, DELAY_EXCEPTION_MS)
        found = inst.find_broker_addr_in_subscribe(mq.broker_name, self._suggest.get(mq, 0), False)
        if found is None:
            return None
        addr = found[0]
        if waiter is None:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            waiter = _PullReply(self, req, sub, addr, req.next_offset, loop.create_future())
        else:
            waiter.sub, waiter.addr, waiter.offset = sub, addr, req.next_offset
        timeout = cfg.consumer_timeout_millis_when_suspend / 1000
        if inst.api.pull_message_into(addr, self._pull_ext(req, sub, found[1]), timeout, waiter):
            return waiter
        return None

    def _pull_ext(self, req: PullRequest, sub: SubscriptionData, is_slave: bool) -> dict[str, str]:
        cfg = self.config
        commit_offset = 0
        if cfg.message_model is _CLUSTERING:
            commit_offset = self.offset_store.table.get(req.message_queue, 0)
        flag = pull_sys_flag(commit_offset > 0, True, cfg.post_subscription_when_pull)
        if is_slave:
            flag &= ~FLAG_COMMIT_OFFSET
        return req.ext_fields(
            sub, flag, commit_offset, cfg.pull_batch_size, cfg.broker_suspend_max_time_millis
        )

    async def _pull_awaited(self, req: PullRequest) -> bool:
        """A pull :meth:`_pull_now` could not write: an orderly queue's first offset or the
        route first, then the request through the awaited path (RPC hooks, a connection to
        open); its result is handled here."""
        mq = req.message_queue
        if self._orderly and not req.previously_locked:
            offset = await self.queue_ops.compute_pull_from_where(mq)
            if offset < 0:
                return self._later(req, DELAY_EXCEPTION_MS)
            req.previously_locked = True
            req.next_offset = offset
        inst = self.instance
        sub = self.rebalance.subscriptions.get(mq.topic)
        found = inst.find_broker_addr_in_subscribe(mq.broker_name, self._suggest.get(mq, 0), False)
        if found is None:
            await self.queue_ops.refresh_route(mq.topic)
            found = inst.find_broker_addr_in_subscribe(mq.broker_name, self._suggest.get(mq, 0), False)
        if found is None or sub is None:
            return self._later(req, DELAY_EXCEPTION_MS)
        addr, is_slave = found
        header = PullMessageRequestHeader.from_ext_fields(self._pull_ext(req, sub, is_slave))
        timeout = self.config.consumer_timeout_millis_when_suspend / 1000
        result = await inst.api.pull_message(addr, header, timeout)
        if self._on_result(req, sub, addr, result, None):
            await asyncio.sleep(0)  # one loop turn: the consume worker takes the batch first
            return True
        return False

    def _on_result(
        self,
        req: PullRequest,
        sub: SubscriptionData,
        addr: str,
        result: PullResult,
        waiter: _PullReply | None,
    ) -> _PullReply | bool:
        """A pull's result: messages to the process queue and the consume service, the next
        offset, then (``waiter`` given: in the read) the next pull written with ``waiter``.
        Returns ``waiter`` when it carries the next pull, else whether the next pull should
        follow at once (else it is scheduled)."""
        pq = req.process_queue
        mq = req.message_queue
        self._suggest[mq] = result.suggest_which_broker_id
        if pq.dropped:
            return False
        status = result.status
        if status is _FOUND:
            try:
                msgs = decode_pull_result(result, sub)
            except (MessageDecodeError, ValueError) as exc:
                logger.error("%s: undecodable pull body from %s for %s: %s", self.group, addr, mq, exc)
                return self._later(req, DELAY_EXCEPTION_MS)
            self.stats.record_pull(len(msgs))
            req.next_offset = result.next_begin_offset
            if not msgs:
                return self._next(req, waiter)
            dispatch = pq.put_messages(msgs)
            assert self._service is not None
            if self._service.submit(msgs, pq, mq, dispatch):  # every listener call ended in it
                return self._next(req, waiter)
            # a worker takes the batch (woken first): the pull task pulls again after it, so
            # the next pull carries the batch's commit offset when the call does not await
            return self._again(req)
        if status is _OFFSET_ILLEGAL:
            logger.warning(
                "%s: offset %d of %s is illegal, moving to %d",
                self.group,
                req.next_offset,
                mq,
                result.next_begin_offset,
            )
            req.next_offset = result.next_begin_offset
            pq.dropped = True
            self.instance.tasks.spawn(
                self._fix_illegal_offset(mq, result.next_begin_offset), name=f"offset-illegal:{mq.queue_id}"
            )
            return False
        req.next_offset = result.next_begin_offset
        if pq.msg_count == 0:
            self.offset_store.update_offset(mq, result.next_begin_offset, increase_only=True)
        return self._next(req, waiter)

    def _next(self, req: PullRequest, waiter: _PullReply | None) -> _PullReply | bool:
        """After a reply: ``waiter`` with the next pull written (in the read), or whether the
        pull task pulls again at once (``_again``)."""
        again = self._again(req)
        if waiter is None or not again:
            return again
        step = self._pull_now(req, waiter)
        return True if step is None else step

    async def _fix_illegal_offset(self, mq: MessageQueue, offset: int) -> None:
        await asyncio.sleep(1.0)
        self.offset_store.update_offset(mq, offset)
        await self.offset_store.persist(mq)
        self.rebalance.process_queue_table.pop(mq, None)
        self.instance.wakeup_rebalance()

    # ---------------------------------------------------------------------------- send back
    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool:
        """CONSUMER_SEND_MSG_BACK; on failure re-send to %RETRY%group ourselves (as Java)."""
        max_times = self.config.effective_max_reconsume_times
        return await send_message_back(
            self.instance, self.group, self.retry_topic, max_times, msg, delay_level, broker_name
        )
