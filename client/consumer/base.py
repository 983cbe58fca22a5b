"""``ConsumerBase``: what the push and the lite pull consumer share: the group and its retry
topic, the lifecycle, the client instance while running, the offset store and rebalancer a start
creates, the composed :class:`~pocketmq.client.consumer.queue_ops.QueueOps` with the public queue
operations it offers, and the parts of the ``ConsumerInner`` / ``RebalanceHost`` protocols that
do not depend on how a consumer pulls.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from pocketmq.client.config import ConsumerConfig, MessageModel
from pocketmq.client.consumer.offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from pocketmq.client.consumer.queue_ops import QueueOps
from pocketmq.client.consumer.rebalance import AllocateStrategy
from pocketmq.client.consumer.rebalance_impl import RebalanceImpl
from pocketmq.client.consumer.subscription import SubscriptionData
from pocketmq.client.instance import MQClientInstance
from pocketmq.client.lifecycle import RUNNING, SHUTDOWN, AsyncClient, Lifecycle
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.heartbeat import ConsumerData, ConsumeType, ExpressionType
from pocketmq.remoting.protocol.topics import retry_topic

__all__ = ["ConsumerBase"]


class ConsumerBase(AsyncClient):
    #: how this consumer reports itself in heartbeats and running info
    CONSUME_TYPE: ClassVar[ConsumeType]

    def __init__(self, config: ConsumerConfig, allocate_strategy: AllocateStrategy) -> None:
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
        # the public queue operations (fetch_message_queues, min/max_offset, ..., pull)
        (self.fetch_message_queues, self.min_offset, self.max_offset, self.offset_for_timestamp,
         self.pull) = self.queue_ops.public_api()  # fmt: skip

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
        if self._life.state is not RUNNING:
            self._life.move(SHUTDOWN)
            return None
        inst = self.instance
        self._life.move(SHUTDOWN)
        return inst

    @abstractmethod
    def subscriptions(self) -> list[SubscriptionData]: ...

    # ------------------------------------------------------------------ ConsumerInner protocol
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
