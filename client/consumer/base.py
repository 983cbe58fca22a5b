"""``ConsumerBase``: what the push and the lite pull consumer share: the group and its retry
topic, the lifecycle, the client instance while running, the offset store and rebalancer a start
creates, the composed :class:`~pocketmq.client.consumer.queue_ops.QueueOps` with the public queue
operations it offers, and the parts of the ``ConsumerInner`` / ``RebalanceHost`` protocols that
do not depend on how a consumer pulls.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, ClassVar

from pocketmq.client.config import ConsumerConfig, MessageModel
from pocketmq.client.consumer.offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from pocketmq.client.consumer.queue_ops import QueueOps
from pocketmq.client.consumer.rebalance import AllocateStrategy
from pocketmq.client.consumer.rebalance_impl import RebalanceImpl
from pocketmq.client.consumer.subscription import SubscriptionData
from pocketmq.client.instance import MQClientInstance
from pocketmq.client.lifecycle import RUNNING, SHUTDOWN, AsyncClient, Lifecycle
from pocketmq.client.message import MessageQueue
from pocketmq.client.namespace import unwrap, unwrap_messages, unwrap_queue, wrap, wrap_queue
from pocketmq.remoting.protocol.heartbeat import ConsumerData, ConsumeType, ExpressionType
from pocketmq.remoting.protocol.topics import retry_topic

__all__ = ["ConsumerBase"]


logger = logging.getLogger(__name__)


class ConsumerBase(AsyncClient):
    #: how this consumer reports itself in heartbeats and running info
    CONSUME_TYPE: ClassVar[ConsumeType]

    def __init__(self, config: ConsumerConfig, allocate_strategy: AllocateStrategy) -> None:
        #: RocketMQ namespace: the group and topics on the wire are 'ns%name' (client/namespace.py)
        self.namespace = config.namespace or None
        if self.namespace:
            config = config.model_copy(update={"consumer_group": wrap(self.namespace, config.consumer_group)})
        self.config = config
        self.group = config.consumer_group
        self.retry_topic = retry_topic(self.group)
        self.allocate_strategy = allocate_strategy
        self._subs: dict[str, SubscriptionData] = {}
        self._life = Lifecycle("consumer", self.group)
        self._instance: MQClientInstance | None = None
        self._offset_store: OffsetStore | None = None
        self._rebalance: RebalanceImpl | None = None
        # Set once the brokers know this consumer (first heartbeat sent): a rebalance before
        # that asks a broker for the group's members and gets "no consumer for this group".
        self._announced = False
        self.queue_ops = QueueOps(self)
        self._assign_waiters: list[asyncio.Future[set[MessageQueue]]] = []
        # set when a rebalance (or assign) has finished with queues of every subscribed topic:
        # a rebalance adds its queues one by one, so the live table may be half done
        self._assign_settled = False
        # the public queue operations (fetch_message_queues, min/max_offset, ..., pull)
        (self.fetch_message_queues, self.min_offset, self.max_offset, self.offset_for_timestamp,
         self.pull) = self.queue_ops.public_api()  # fmt: skip
        if self.namespace:
            self._namespace_queue_api(self.namespace)

    def _namespace_queue_api(self, ns: str) -> None:
        """The public queue operations take and return plain topics and queues."""
        fetch, lo, hi, by_time, pull = (
            self.fetch_message_queues, self.min_offset, self.max_offset, self.offset_for_timestamp, self.pull
        )  # fmt: skip

        async def fetch_message_queues(topic: str) -> set[MessageQueue]:
            return {unwrap_queue(ns, mq) for mq in await fetch(wrap(ns, topic))}

        async def min_offset(mq: MessageQueue) -> int:
            return await lo(wrap_queue(ns, mq))

        async def max_offset(mq: MessageQueue) -> int:
            return await hi(wrap_queue(ns, mq))

        async def offset_for_timestamp(mq: MessageQueue, timestamp_ms: int) -> int:
            return await by_time(wrap_queue(ns, mq), timestamp_ms)

        async def pull_plain(mq: MessageQueue, *args: Any, **kwargs: Any) -> Any:
            result = await pull(wrap_queue(ns, mq), *args, **kwargs)
            unwrap_messages(ns, result.msgs)
            return result

        self.fetch_message_queues, self.min_offset, self.max_offset = (
            fetch_message_queues,
            min_offset,
            max_offset,
        )
        self.offset_for_timestamp, self.pull = offset_for_timestamp, pull_plain

    @property
    def instance(self) -> MQClientInstance:
        if self._instance is None or self._life.state is not RUNNING:
            raise self._life.closed_error()
        return self._instance

    @property
    @abstractmethod
    def offset_store(self) -> OffsetStore: ...

    async def _attach(self) -> MQClientInstance:
        """Start's first steps: join the shared client instance and load this group's offsets
        (from the brokers in a clustering group, from a local file when broadcasting)."""
        cfg = self.config
        inst = await MQClientInstance.acquire(cfg)
        self._instance = inst
        if cfg.message_model is MessageModel.CLUSTERING:
            self._offset_store = RemoteBrokerOffsetStore(inst, self.group)
        else:
            self._offset_store = LocalFileOffsetStore(cfg.local_offset_store_dir, inst.client_id, self.group)
        await self._offset_store.load()
        return inst

    async def _check_client_in_broker(self) -> None:
        """Java ``MQClientInstance.checkClientInBroker``, after the routes are known: a broker of
        each SQL92 subscription's topic compiles it (CHECK_CLIENT_CONFIG). Raises the broker's
        error (RemoteSystemError: ``enablePropertyFilter`` is off; SubscriptionParseFailedError:
        the expression does not compile), after shutting this consumer down."""
        inst = self.instance
        try:
            for sub in self.subscriptions():
                if sub.expression_type == ExpressionType.TAG.value:
                    continue
                route = inst.topic_routes.get(sub.topic)
                for bd in route.broker_datas if route is not None else ():
                    addr = inst.find_broker_addr_in_subscribe(bd.broker_name)
                    if addr is not None:
                        await inst.api.check_client_in_broker(addr[0], self.group, inst.client_id, sub)
                        break  # RocketMQ asks one broker: the cluster's brokers share their config
        except BaseException:
            await self.shutdown()
            raise

    def _enter_shutdown(self) -> MQClientInstance | None:
        """Move to SHUTDOWN; returns the instance to leave when the consumer was running, else
        None (nothing to stop)."""
        waiters, self._assign_waiters = self._assign_waiters, []
        for fut in waiters:  # wait_assigned callers: no queue will come any more
            if not fut.done():
                fut.set_exception(self._life.closed_error())
        if self._life.state is not RUNNING:
            self._life.move(SHUTDOWN)
            return None
        inst = self.instance
        self._life.move(SHUTDOWN)
        return inst

    @abstractmethod
    def subscriptions(self) -> list[SubscriptionData]: ...

    # ------------------------------------------------------------------ rebalance listener
    #: RocketMQ's ``MessageQueueListener``: called as ``listener(topic, mq_all, mq_divided)``
    #: (plain function or coroutine function) after a rebalance changed this consumer's queues
    #: of ``topic``: every queue of the topic and the ones now assigned here. Set it before or
    #: after start: ``consumer.rebalance_listener = on_change``. Errors are logged.
    rebalance_listener: Callable[[str, set[MessageQueue], set[MessageQueue]], Any] | None = None

    @abstractmethod
    def _held_queues(self) -> Iterable[MessageQueue]:
        """The queues this consumer pulls now, as on the wire (namespaced, retry topic included)."""

    def _ready_assignment(self) -> set[MessageQueue] | None:
        """The held queues of the subscribed topics once every one of them has at least one;
        None before."""
        subs = self._subs
        held = [mq for mq in self._held_queues() if mq.topic in subs]
        if not subs or len({mq.topic for mq in held}) < len(subs):
            return None
        return {unwrap_queue(self.namespace, mq) for mq in held}

    async def wait_assigned(self, timeout: float | None = None) -> set[MessageQueue]:
        """Wait until this consumer holds at least one queue of every topic it subscribed (after
        the rebalance that gives it some, or ``assign``) and return its queues of those topics;
        at once when it holds them already. A consumer gets its first queues one rebalance after
        start; sends made before that are not seen by a consumer that starts from the last offset.

        Raises:
            TimeoutError: not within ``timeout`` seconds (e.g. more consumers in the group
                than queues, or a topic without a route yet).
            ClientClosedError: the consumer is shut down (or shuts down while waiting).
        """
        if self._life.state is SHUTDOWN:
            raise self._life.closed_error()
        queues = self._ready_assignment() if self._assign_settled else None
        if queues is not None:
            return queues
        fut: asyncio.Future[set[MessageQueue]] = asyncio.get_running_loop().create_future()
        self._assign_waiters.append(fut)
        try:
            async with asyncio.timeout(timeout):
                return await fut
        finally:
            if fut in self._assign_waiters:
                self._assign_waiters.remove(fut)

    def _wake_assigned(self) -> None:
        """After a rebalance (or assign) changed the assignment: resolve :meth:`wait_assigned`
        callers once it is ready."""
        queues = self._ready_assignment()
        self._assign_settled = queues is not None
        if queues is not None and self._assign_waiters:
            waiters, self._assign_waiters = self._assign_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(set(queues))

    def _notify_rebalance(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        self._wake_assigned()
        listener = self.rebalance_listener
        if listener is None:
            return
        ns = self.namespace
        if ns:
            topic = unwrap(ns, topic)
            mq_all = {unwrap_queue(ns, q) for q in mq_all}
            mq_divided = {unwrap_queue(ns, q) for q in mq_divided}
        try:
            result = listener(topic, mq_all, mq_divided)
        except Exception:
            logger.exception("%s: rebalance listener failed for %s", self.group, topic)
            return
        if inspect.isawaitable(result):
            self.instance.tasks.spawn(_logged(self.group, topic, result), name=f"rebalance-listener:{topic}")

    # ------------------------------------------------------------------ ConsumerInner protocol
    def route_topics(self) -> set[str]:
        """Topics whose routes the client instance refreshes for this consumer."""
        return {s.topic for s in self.subscriptions()}

    def consumer_data(self) -> ConsumerData:
        return self.queue_ops.consumer_data(self.CONSUME_TYPE, self.subscriptions())

    def subscribe_info_needs_update(self, topic: str) -> bool:
        rb = self._rebalance
        return rb is not None and rb.subscribe_info_missing(topic)

    # -------------------------------------------------------------------- RebalanceHost protocol
    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        return await self.queue_ops.compute_pull_from_where(mq)

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        self.offset_store.remove_offset(mq)


async def _logged(group: str, topic: str, result: Awaitable[Any]) -> None:
    try:
        await result
    except Exception:
        logger.exception("%s: rebalance listener failed for %s", group, topic)
