"""``QueueOps``: the queue-level operations a consumer composes: routes, direct pulls, offset
queries and the start offset of a newly assigned queue.

``pull`` is the plain request/response pull the Spark source builds on: no process queue,
no offset bookkeeping, the caller passes the offset and gets a :class:`PullResult` with
decoded, tag-filtered messages and the next offset.

A consumer holds one ``QueueOps`` and hands it itself as the :class:`QueueOpsHost` (the client
instance while running, the offset store, the group and its configuration), as
:class:`~pocketmq.client.consumer.rebalance_impl.RebalanceImpl` takes its host.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from pocketmq.client.api import decode_pull_result
from pocketmq.client.config import ConsumeFromWhere, ConsumerConfig
from pocketmq.client.consumer.offset_store import ReadOffsetType
from pocketmq.client.consumer.subscription import SubscriptionData, new_subscription
from pocketmq.client.errors import BrokerNotFoundError, MessageValidationError, TopicRouteNotFoundError
from pocketmq.client.message import MessageQueue, PullResult
from pocketmq.client.route import to_subscribe_info
from pocketmq.remoting.protocol.codes import pull_sys_flag
from pocketmq.remoting.protocol.headers import PullMessageRequestHeader
from pocketmq.remoting.protocol.heartbeat import ConsumerData, ConsumeType
from pocketmq.remoting.protocol.topics import MASTER_ID, is_retry_topic

if TYPE_CHECKING:
    from pocketmq.client.consumer.offset_store import OffsetStore
    from pocketmq.client.instance import MQClientInstance

logger = logging.getLogger(__name__)

__all__ = ["QueueOps", "QueueOpsHost", "consume_timestamp_ms"]


class QueueOpsHost(Protocol):
    """What :class:`QueueOps` needs from its consumer."""

    group: str

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def instance(self) -> MQClientInstance:
        """The shared client instance. Raises ClientClosedError when the consumer is not running."""
        ...

    @property
    def offset_store(self) -> OffsetStore: ...


class QueueOps:
    def __init__(self, host: QueueOpsHost) -> None:
        self.host = host
        #: broker id the last pull reply of each queue suggested (lite pulls and ``pull``)
        self.suggest: dict[MessageQueue, int] = {}

    def public_api(
        self,
    ) -> tuple[
        Callable[[str], Coroutine[Any, Any, set[MessageQueue]]],
        Callable[[MessageQueue], Coroutine[Any, Any, int]],
        Callable[[MessageQueue], Coroutine[Any, Any, int]],
        Callable[[MessageQueue, int], Coroutine[Any, Any, int]],
        Callable[..., Coroutine[Any, Any, PullResult]],
    ]:
        """The operations consumers offer their users as their own methods: fetch_message_queues,
        min_offset, max_offset, offset_for_timestamp, pull."""
        return (
            self.fetch_message_queues,
            self.min_offset,
            self.max_offset,
            self.offset_for_timestamp,
            self.pull,
        )

    def consumer_data(self, consume_type: ConsumeType, subscriptions: list[SubscriptionData]) -> ConsumerData:
        """The consumer's entry in a HEART_BEAT body's consumerDataSet."""
        cfg = self.host.config
        return ConsumerData(
            self.host.group, consume_type, cfg.message_model, cfg.consume_from_where, tuple(subscriptions)
        )

    # ------------------------------------------------------------------------------ routes
    async def refresh_route(self, topic: str) -> None:
        """Refresh ``topic``'s route; failures are logged (the periodic refresh retries)."""
        try:
            await self.host.instance.update_topic_route(topic)
        except TopicRouteNotFoundError:
            if not is_retry_topic(topic):
                logger.warning("%s: topic %s has no route yet", self.host.group, topic)
        except Exception as exc:
            logger.warning("%s: route of %s: %s", self.host.group, topic, exc)

    async def refresh_route_and_rebalance(self, topic: str) -> None:
        """A topic subscribed while running: route, heartbeat (brokers learn the subscription),
        then rebalance at once instead of at the next period."""
        await self.refresh_route(topic)
        inst = self.host.instance
        await inst.send_heartbeat_to_all_brokers()
        inst.wakeup_rebalance()

    async def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        """The topic's readable queues, from a fresh name server route.

        Raises:
            TopicRouteNotFoundError: unknown topic.
        """
        inst = self.host.instance
        route = await inst.api.get_topic_route(topic)
        for bd in route.broker_datas:
            inst.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
        return to_subscribe_info(topic, route)

    # ----------------------------------------------------------------------------- offsets
    async def _master_addr(self, mq: MessageQueue) -> str:
        return await self.host.instance.find_broker_addr_for_offsets(mq.broker_name)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.host.instance.api.get_min_offset(await self._master_addr(mq), mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.host.instance.api.get_max_offset(await self._master_addr(mq), mq)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.host.instance.api.search_offset(await self._master_addr(mq), mq, timestamp_ms)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Start offset of a newly assigned queue: the stored offset, else per consume_from_where.

        Returns -1 when it cannot be decided now (the broker was unreachable): never guesses.
        """
        host = self.host
        last = await host.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        if last != -1:
            return -1
        cfw = host.config.consume_from_where
        try:
            if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
                return 0
            from_last = cfw is not ConsumeFromWhere.CONSUME_FROM_TIMESTAMP  # deprecated ones act as LAST
            if is_retry_topic(mq.topic) and from_last:
                return 0
            if from_last or is_retry_topic(mq.topic):
                return await self.max_offset(mq)
            return await self.offset_for_timestamp(mq, consume_timestamp_ms(host.config.consume_timestamp))
        except Exception as exc:
            logger.warning("%s: computing start offset of %s failed: %s", host.group, mq, exc)
            return -1

    # ------------------------------------------------------------------------------- pulls
    async def pull_raw(
        self,
        mq: MessageQueue,
        sub: SubscriptionData,
        offset: int,
        max_nums: int,
        *,
        suspend_ms: int,
        timeout: float,
    ) -> PullResult:
        """One PULL_MESSAGE (no commit offset), body not decoded; follows the broker's
        suggestion of which broker id to pull from next."""
        inst = self.host.instance
        suggest = self.suggest
        found = inst.find_broker_addr_in_subscribe(mq.broker_name, suggest.get(mq, MASTER_ID), False)
        if found is None:
            try:
                await inst.update_topic_route(mq.topic)
            except TopicRouteNotFoundError:
                pass
            found = inst.find_broker_addr_in_subscribe(mq.broker_name, suggest.get(mq, MASTER_ID), False)
            if found is None:
                raise BrokerNotFoundError(mq.broker_name)
        header = PullMessageRequestHeader(
            consumer_group=self.host.group,
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
        result = await self.pull_raw(mq, sub, offset, max_nums, suspend_ms=block_ms, timeout=timeout)
        decode_pull_result(result, sub)
        return result


def consume_timestamp_ms(value: str | None) -> int:
    """``yyyyMMddHHmmss`` (local time) → epoch ms; default: 30 minutes ago (Java default)."""
    if not value:
        return time.time_ns() // 1_000_000 - 30 * 60 * 1000
    try:
        dt = datetime.datetime.strptime(value, "%Y%m%d%H%M%S")
    except ValueError as exc:
        raise MessageValidationError(f"consume_timestamp {value!r} is not yyyyMMddHHmmss") from exc
    return int(dt.timestamp() * 1000)
