"""What the client instance needs from producers and consumers (typing seams only)."""

from __future__ import annotations

from typing import Any, Protocol

from pocketmq.client.consumer.subscription import SubscriptionData
from pocketmq.client.message import MessageQueue
from pocketmq.client.route import TopicPublishInfo
from pocketmq.remoting.protocol.headers import CheckTransactionStateRequestHeader
from pocketmq.remoting.protocol.heartbeat import ConsumerData
from pocketmq.remoting.protocol.message import MessageExt


class ProducerInner(Protocol):
    group: str

    def publish_topics(self) -> set[str]: ...

    def publish_info_needs_update(self, topic: str) -> bool: ...

    def update_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...

    def detach(self) -> None:
        """Mark shut down without touching the instance (the instance is closing itself)."""

    async def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None: ...


class ConsumerInner(Protocol):
    group: str
    rebalance_interval: float

    def subscriptions(self) -> list[SubscriptionData]: ...

    def route_topics(self) -> set[str]: ...

    def consumer_data(self) -> ConsumerData: ...

    def subscribe_info_needs_update(self, topic: str) -> bool: ...

    def update_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None: ...

    async def do_rebalance(self) -> None: ...

    async def persist_consumer_offset(self) -> None: ...

    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None: ...

    def offset_table(self, topic: str) -> dict[MessageQueue, int]: ...

    def running_info(self) -> dict[str, Any]: ...

    async def consume_message_directly(self, msg: MessageExt, broker_name: str | None) -> dict[str, Any]: ...
