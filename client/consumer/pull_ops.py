"""Queue-level operations shared by the consumers: direct pulls, offsets, queue discovery.

``pull`` is the plain request/response pull the Spark source builds on: no process queue,
no offset bookkeeping, the caller passes the offset and gets a :class:`PullResult` with
decoded, tag-filtered messages and the next offset.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from pocketmq.client._hdr import make
from pocketmq.client.api import decode_pull_result
from pocketmq.client.config import ConsumeFromWhere
from pocketmq.client.consumer.offset_store import ReadOffsetType
from pocketmq.client.consumer.subscription import SubscriptionData, new_subscription
from pocketmq.client.errors import BrokerNotFoundError, TopicRouteNotFoundError
from pocketmq.client.message import MessageQueue, PullResult
from pocketmq.client.route import to_subscribe_info
from pocketmq.remoting.protocol.codes import pull_sys_flag
from pocketmq.remoting.protocol.headers import PullMessageRequestHeader
from pocketmq.remoting.protocol.heartbeat import ConsumerData, ConsumeType
from pocketmq.remoting.protocol.topics import MASTER_ID, is_retry_topic

if TYPE_CHECKING:
    from pocketmq.client.config import ConsumerConfig
    from pocketmq.client.consumer.offset_store import OffsetStore
    from pocketmq.client.consumer.rebalance_impl import RebalanceImpl
    from pocketmq.client.instance import MQClientInstance

logger = logging.getLogger(__name__)


class PullOps(ABC):
    group: str
    config: ConsumerConfig
    _suggest_ops: dict[MessageQueue, int]
    _rebalance: RebalanceImpl | None
    #: heartbeat consumeType: CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (pull)
    CONSUME_TYPE = ConsumeType.CONSUME_ACTIVELY

    @abstractmethod
    def subscriptions(self) -> list[SubscriptionData]:
        """What the consumer subscribes to (heartbeat subscriptionDataSet)."""

    def consumer_data(self) -> ConsumerData:
        """This consumer's entry in a HEART_BEAT body's consumerDataSet."""
        return ConsumerData(
            self.group,
            self.CONSUME_TYPE,
            self.config.message_model,
            self.config.consume_from_where,
            tuple(self.subscriptions()),
        )

    async def refresh_route(self, topic: str) -> None:
        """Refresh ``topic``'s route; failures are logged (the periodic refresh retries)."""
        try:
            await self.instance.update_topic_route(topic)
        except TopicRouteNotFoundError:
            if not is_retry_topic(topic):
                logger.warning("%s: topic %s has no route yet", self.group, topic)
        except Exception as exc:
            logger.warning("%s: route of %s: %s", self.group, topic, exc)

    async def refresh_route_and_rebalance(self, topic: str) -> None:
        """A topic subscribed while running: route, heartbeat (brokers learn the subscription),
        then rebalance at once instead of at the next period."""
        await self.refresh_route(topic)
        await self.instance.send_heartbeat_to_all_brokers()
        self.instance.wakeup_rebalance()

    def subscribe_info_needs_update(self, topic: str) -> bool:
        """True for a subscribed topic whose queues the rebalance has not seen yet."""
        rb = self._rebalance
        return rb is not None and topic in rb.subscriptions and topic not in rb.topic_subscribe_info

    @property
    @abstractmethod
    def instance(self) -> MQClientInstance:
        """The shared client instance (routes, connections, heartbeats)."""

    @property
    @abstractmethod
    def offset_store(self) -> OffsetStore:
        """Where consumed offsets are kept (broker or local file)."""

    async def _master_addr(self, mq: MessageQueue) -> str:
        return await self.instance.find_broker_addr_for_offsets(mq.broker_name)

    async def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        """The topic's readable queues, from a fresh name server route.

        Raises:
            TopicRouteNotFoundError: unknown topic.
        """
        route = await self.instance.api.get_topic_route(topic)
        for bd in route.broker_datas:
            self.instance.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
        return to_subscribe_info(topic, route)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.instance.api.get_min_offset(await self._master_addr(mq), mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.instance.api.get_max_offset(await self._master_addr(mq), mq)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.instance.api.search_offset(await self._master_addr(mq), mq, timestamp_ms)

    async def _pull_raw(
        self,
        mq: MessageQueue,
        sub: SubscriptionData,
        offset: int,
        max_nums: int,
        *,
        suspend_ms: int,
        timeout: float,
    ) -> PullResult:
        inst = self.instance
        suggest = getattr(self, "_suggest_ops", None)
        if suggest is None:
            suggest = self._suggest_ops = {}
        found = inst.find_broker_addr_in_subscribe(mq.broker_name, suggest.get(mq, MASTER_ID), False)
        if found is None:
            try:
                await inst.update_topic_route(mq.topic)
            except TopicRouteNotFoundError:
                pass
            found = inst.find_broker_addr_in_subscribe(mq.broker_name, suggest.get(mq, MASTER_ID), False)
            if found is None:
                raise BrokerNotFoundError(mq.broker_name)
        header = make(
            PullMessageRequestHeader,
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=pull_sys_flag(False, suspend_ms > 0, True, lite=True),
            commit_offset=0,
            suspend_timeout_millis=suspend_ms,
            subscription=sub.sub_string,
            sub_version=sub.sub_version,
            expression_type=sub.expression_type,
        )
        result = await inst.api.pull_message(found[0], header, timeout)
        suggest[mq] = result.suggest_which_broker_id
        return result

    async def pull(
        self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*", *,
        timeout: float = 10.0, block_ms: int = 0,
    ) -> PullResult:  # fmt: skip
        """One PULL_MESSAGE from ``offset`` (``block_ms`` > 0: long-poll that long).

        Raises:
            ResponseError / RemotingTimeoutError / RemotingConnectError: the pull failed.
            MessageDecodeError: the body was not valid records.
        """
        sub = new_subscription(mq.topic, expression)
        result = await self._pull_raw(mq, sub, offset, max_nums, suspend_ms=block_ms, timeout=timeout)
        decode_pull_result(result, sub)
        return result

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Start offset of a newly assigned queue: the stored offset, else per consume_from_where.

        Returns -1 when it cannot be decided now (the broker was unreachable): never guesses.
        """
        last = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        if last != -1:
            return -1
        cfw = self.config.consume_from_where
        try:
            if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
                return 0
            from_last = cfw is not ConsumeFromWhere.CONSUME_FROM_TIMESTAMP  # deprecated ones act as LAST
            if is_retry_topic(mq.topic) and from_last:
                return 0
            if from_last or is_retry_topic(mq.topic):
                return await self.max_offset(mq)
            return await self.offset_for_timestamp(mq, consume_timestamp_ms(self.config.consume_timestamp))
        except Exception as exc:
            logger.warning("%s: computing start offset of %s failed: %s", self.group, mq, exc)
            return -1


def consume_timestamp_ms(value: str | None) -> int:
    """``yyyyMMddHHmmss`` (local time) → epoch ms; default: 30 minutes ago (Java default)."""
    import datetime
    import time

    from pocketmq.client.errors import MessageValidationError

    if not value:
        return time.time_ns() // 1_000_000 - 30 * 60 * 1000
    try:
        dt = datetime.datetime.strptime(value, "%Y%m%d%H%M%S")
    except ValueError as exc:
        raise MessageValidationError(f"consume_timestamp {value!r} is not yyyyMMddHHmmss") from exc
    return int(dt.timestamp() * 1000)


__all__ = ["PullOps", "consume_timestamp_ms"]
_ = Any
