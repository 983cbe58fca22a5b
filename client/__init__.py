"""pocketmq.client: a pure-Python asyncio SDK for RocketMQ 4.x (pocketmq or Apache brokers).

Quick start::

    import asyncio
    from pocketmq.client import CONSUME_SUCCESS, Message, Producer, PushConsumer

    async def main() -> None:
        async with Producer("PG", namesrv="127.0.0.1:9876") as producer:
            result = await producer.send(Message("TopicTest", b"hello", tags="TagA"))
            print(result.msg_id, result.message_queue, result.queue_offset)

        async def listener(msgs, ctx):
            for m in msgs:
                print(m.topic, m.tags, m.body)
            return CONSUME_SUCCESS

        consumer = PushConsumer("CG", namesrv="127.0.0.1:9876", listener=listener)
        consumer.subscribe("TopicTest", "TagA || TagB")
        async with consumer:
            await asyncio.sleep(10)

    asyncio.run(main())

Blocking code uses :mod:`pocketmq.client.sync`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin
    from pocketmq.client.admin.base import MQAdminError
    from pocketmq.client.config import (
        ClientConfig,
        ConsumeFromWhere,
        ConsumerConfig,
        LitePullConsumerConfig,
        MessageModel,
        ProducerConfig,
        PushConsumerConfig,
    )
    from pocketmq.client.consumer.listener import (
        CONSUME_SUCCESS,
        RECONSUME_LATER,
        SUCCESS,
        SUSPEND_CURRENT_QUEUE_A_MOMENT,
        ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus,
        ConsumeOrderlyContext,
        ConsumeOrderlyStatus,
    )
    from pocketmq.client.consumer.lite_pull import LitePullConsumer
    from pocketmq.client.consumer.push import PushConsumer
    from pocketmq.client.consumer.rebalance import (
        AllocateStrategy,
        allocate_averagely,
        allocate_averagely_by_circle,
        allocate_consistent_hash,
        config_strategy,
        consistent_hash_strategy,
    )
    from pocketmq.client.consumer.subscription import MessageSelector
    from pocketmq.client.errors import (
        BrokerNotFoundError,
        ClientClosedError,
        ClientStateError,
        ConsumeTimeoutError,
        MessageValidationError,
        MQClientError,
        RemotingConnectError,
        RemotingError,
        RemotingTimeoutError,
        ResponseError,
        SendFailedError,
        TopicRouteNotFoundError,
    )
    from pocketmq.client.hooks import (
        ConsumeMessageContext,
        ConsumeMessageHook,
        SendMessageContext,
        SendMessageHook,
    )
    from pocketmq.client.instance import MQClientInstance
    from pocketmq.client.message import (
        CONTENT_TYPE_PROPERTY,
        MSGPACK_CONTENT_TYPE,
        Message,
        MessageExt,
        MessageQueue,
        PullResult,
        PullStatus,
        SendResult,
        SendStatus,
        unpack_body,
    )
    from pocketmq.client.producer.producer import Producer
    from pocketmq.client.producer.selector import MessageQueueSelector, select_by_hash, select_by_random
    from pocketmq.client.producer.transaction import TransactionState

# Public names resolve lazily (PEP 562): `import pocketmq.client` stays cheap, so `mqadmin` and
# other command-line tools start fast; the first use of a name imports its module.
_LAZY: dict[str, str] = {
    "AllocateStrategy": "pocketmq.client.consumer.rebalance",
    "BrokerNotFoundError": "pocketmq.client.errors",
    "CONSUME_SUCCESS": "pocketmq.client.consumer.listener",
    "CONTENT_TYPE_PROPERTY": "pocketmq.client.message",
    "ClientClosedError": "pocketmq.client.errors",
    "ClientConfig": "pocketmq.client.config",
    "ClientStateError": "pocketmq.client.errors",
    "ConsumeConcurrentlyContext": "pocketmq.client.consumer.listener",
    "ConsumeConcurrentlyStatus": "pocketmq.client.consumer.listener",
    "ConsumeFromWhere": "pocketmq.client.config",
    "ConsumeMessageContext": "pocketmq.client.hooks",
    "ConsumeMessageHook": "pocketmq.client.hooks",
    "ConsumeOrderlyContext": "pocketmq.client.consumer.listener",
    "ConsumeOrderlyStatus": "pocketmq.client.consumer.listener",
    "ConsumeTimeoutError": "pocketmq.client.errors",
    "ConsumerConfig": "pocketmq.client.config",
    "LitePullConsumer": "pocketmq.client.consumer.lite_pull",
    "LitePullConsumerConfig": "pocketmq.client.config",
    "MQAdmin": "pocketmq.client.admin.admin",
    "MQAdminError": "pocketmq.client.admin.base",
    "MQClientError": "pocketmq.client.errors",
    "MQClientInstance": "pocketmq.client.instance",
    "MSGPACK_CONTENT_TYPE": "pocketmq.client.message",
    "Message": "pocketmq.client.message",
    "MessageExt": "pocketmq.client.message",
    "MessageModel": "pocketmq.client.config",
    "MessageQueue": "pocketmq.client.message",
    "MessageQueueSelector": "pocketmq.client.producer.selector",
    "MessageSelector": "pocketmq.client.consumer.subscription",
    "MessageValidationError": "pocketmq.client.errors",
    "Producer": "pocketmq.client.producer.producer",
    "ProducerConfig": "pocketmq.client.config",
    "PullResult": "pocketmq.client.message",
    "PullStatus": "pocketmq.client.message",
    "PushConsumer": "pocketmq.client.consumer.push",
    "PushConsumerConfig": "pocketmq.client.config",
    "RECONSUME_LATER": "pocketmq.client.consumer.listener",
    "RemotingConnectError": "pocketmq.client.errors",
    "RemotingError": "pocketmq.client.errors",
    "RemotingTimeoutError": "pocketmq.client.errors",
    "ResponseError": "pocketmq.client.errors",
    "SUCCESS": "pocketmq.client.consumer.listener",
    "SUSPEND_CURRENT_QUEUE_A_MOMENT": "pocketmq.client.consumer.listener",
    "SendFailedError": "pocketmq.client.errors",
    "SendMessageContext": "pocketmq.client.hooks",
    "SendMessageHook": "pocketmq.client.hooks",
    "SendResult": "pocketmq.client.message",
    "SendStatus": "pocketmq.client.message",
    "TopicRouteNotFoundError": "pocketmq.client.errors",
    "TransactionState": "pocketmq.client.producer.transaction",
    "allocate_averagely": "pocketmq.client.consumer.rebalance",
    "allocate_averagely_by_circle": "pocketmq.client.consumer.rebalance",
    "allocate_consistent_hash": "pocketmq.client.consumer.rebalance",
    "config_strategy": "pocketmq.client.consumer.rebalance",
    "consistent_hash_strategy": "pocketmq.client.consumer.rebalance",
    "select_by_hash": "pocketmq.client.producer.selector",
    "select_by_random": "pocketmq.client.producer.selector",
    "unpack_body": "pocketmq.client.message",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CONSUME_SUCCESS",
    "CONTENT_TYPE_PROPERTY",
    "MSGPACK_CONTENT_TYPE",
    "RECONSUME_LATER",
    "SUCCESS",
    "SUSPEND_CURRENT_QUEUE_A_MOMENT",
    "AllocateStrategy",
    "BrokerNotFoundError",
    "ClientClosedError",
    "ClientConfig",
    "ClientStateError",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeMessageContext",
    "ConsumeMessageHook",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeTimeoutError",
    "ConsumerConfig",
    "LitePullConsumer",
    "LitePullConsumerConfig",
    "MQAdmin",
    "MQAdminError",
    "MQClientError",
    "MQClientInstance",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageSelector",
    "MessageValidationError",
    "Producer",
    "ProducerConfig",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "PushConsumerConfig",
    "RemotingConnectError",
    "RemotingError",
    "RemotingTimeoutError",
    "ResponseError",
    "SendFailedError",
    "SendMessageContext",
    "SendMessageHook",
    "SendResult",
    "SendStatus",
    "TopicRouteNotFoundError",
    "TransactionState",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "allocate_consistent_hash",
    "config_strategy",
    "consistent_hash_strategy",
    "select_by_hash",
    "select_by_random",
    "unpack_body",
]
