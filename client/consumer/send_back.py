"""Sending failed messages back for redelivery, and showing redelivered ones under their
original topic.

Send-back (Java ``DefaultMQPushConsumerImpl.sendMessageBack``): CONSUMER_SEND_MSG_BACK asks the
broker to re-store the message in ``%RETRY%group`` (or the DLQ); when that request fails, the
message is re-sent to ``%RETRY%group`` by the client instance's inner producer (group
CLIENT_INNER_PRODUCER) with RECONSUME_TIME / MAX_RECONSUME_TIMES properties (Java's fallback).
:func:`send_message_back` returns False only when both fail; the caller then retries locally.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pocketmq.client.config import ClientConfig, ProducerConfig
from pocketmq.client.instance import MQClientInstance
from pocketmq.client.message import Message
from pocketmq.client.producer.producer import Producer
from pocketmq.remoting.protocol.message import MessageConst, MessageExt
from pocketmq.remoting.protocol.topics import CLIENT_INNER_PRODUCER_GROUP

logger = logging.getLogger(__name__)

__all__ = ["inner_producer", "reset_retry_topic", "send_message_back"]


def reset_retry_topic(msgs: Sequence[MessageExt], retry_topic: str) -> None:
    """Show messages redelivered through ``retry_topic`` under their original topic."""
    for msg in msgs:
        if msg.topic == retry_topic:
            real = msg.get_property(MessageConst.RETRY_TOPIC)
            if real:
                msg.topic = real


async def inner_producer(inst: MQClientInstance) -> Producer:
    """The instance's own producer (group CLIENT_INNER_PRODUCER), started on first use; the
    instance detaches it when its last client leaves."""
    producer = inst.producers.get(CLIENT_INNER_PRODUCER_GROUP)
    if isinstance(producer, Producer):
        return producer
    fields = inst.config.model_dump(include=set(ClientConfig.model_fields))
    producer = Producer(config=ProducerConfig(**fields, producer_group=CLIENT_INNER_PRODUCER_GROUP))
    await producer.start()
    return producer


async def send_message_back(
    inst: MQClientInstance,
    group: str,
    retry_topic: str,
    max_reconsume_times: int,
    msg: MessageExt,
    delay_level: int,
    broker_name: str,
) -> bool:
    """CONSUMER_SEND_MSG_BACK; on failure re-send to ``retry_topic`` ourselves (as Java)."""
    addr = inst.find_broker_addr_in_publish(broker_name) or f"{msg.store_host[0]}:{msg.store_host[1]}"
    try:
        await inst.api.consumer_send_message_back(
            addr, msg, group, delay_level, max_reconsume_times, timeout=5.0
        )
        return True
    except Exception as exc:
        logger.warning(
            "%s: send back of %s failed (%s); re-sending to %s", group, msg.msg_id, exc, retry_topic
        )
    try:
        props = dict(msg.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
        props[MessageConst.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        # The broker's send path sends a %RETRY% message to the DLQ once its *new* reconsume
        # count reaches the max; send-back compares the *consumed* count. Max + 1 keeps the
        # number of deliveries the same on both paths (1 + max_reconsume_times).
        props[MessageConst.MAX_RECONSUME_TIMES] = str(max_reconsume_times + 1)
        props.pop(MessageConst.DELAY, None)
        for key in (MessageConst.TAGS, MessageConst.KEYS):
            props.pop(key, None)
        props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, msg.msg_id)
        retry = Message(retry_topic, msg.body, tags=msg.tags, keys=msg.keys, flag=msg.flag, properties=props)
        if delay_level > 0:
            retry.delay_level = delay_level
        elif delay_level == 0:
            retry.delay_level = 3 + msg.reconsume_times
        else:  # straight to the DLQ: the broker reroutes once reconsume times reach the max
            props[MessageConst.RECONSUME_TIME] = str(max_reconsume_times + 1)
        producer = await inner_producer(inst)
        await producer.send(retry)
        return True
    except Exception as exc:
        logger.warning("%s: re-sending %s to %s failed: %s", group, msg.msg_id, retry_topic, exc)
        return False
