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
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeTimeoutError",
    "ConsumerConfig",
    "LitePullConsumer",
    "LitePullConsumerConfig",
    "MQClientError",
    "MQClientInstance",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
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
