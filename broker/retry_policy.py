"""The retry / dead-letter policy: one place for the send and send-back processors (pure).

A message a consumer failed on comes back either as CONSUMER_SEND_MSG_BACK
(:mod:`pocketmq.broker.processor.send_back`) or, from newer clients, as a send to
``%RETRY%<group>`` (:mod:`pocketmq.broker.processor.send`). Both decide the same way:

1. ``max`` = the group's ``retryMaxTimes`` (16), or the request header's
   ``maxReconsumeTimes`` when the request's version is ≥ ``VERSION_MAX_RECONSUME_HEADER``
   (Java 3.4.9+ and ali-ons send it; the C++ 1.x client sends version 63 without it):
   :func:`max_reconsume_times`.
2. ``reconsumeTimes >= max`` (or, for a send-back, ``delayLevel < 0``) → ``%DLQ%<group>``:
   :func:`goes_to_dlq`. The DLQ topic has :data:`DLQ_NUMS_PER_GROUP` queue(s) and is created
   ``PERM_WRITE`` only, as RocketMQ 4.x: not pullable until an admin grants read
   (:func:`ensure_dlq_topic`); the message goes to a random one of its queues
   (:func:`dlq_queue_id`) without a delay.
3. Otherwise a send-back is retried with ``delayLevel``, or ``3 + reconsumeTimes`` when the
   consumer left the level to the broker (0): :func:`retry_delay_level`.

The names (``%RETRY%``, ``%DLQ%``) are the protocol's: :mod:`pocketmq.remoting.protocol.route`.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from pocketmq.remoting.protocol.codes import VERSION_MAX_RECONSUME_HEADER
from pocketmq.remoting.protocol.route import PermName, TopicConfig, dlq_topic

if TYPE_CHECKING:
    from pocketmq.broker.topic_config import TopicConfigManager

__all__ = [
    "BASE_RETRY_DELAY_LEVEL",
    "DLQ_NUMS_PER_GROUP",
    "dlq_queue_id",
    "ensure_dlq_topic",
    "goes_to_dlq",
    "max_reconsume_times",
    "retry_delay_level",
]

#: Java ``MixAll``/``SendMessageProcessor`` ``DLQ_NUMS_PER_GROUP``
DLQ_NUMS_PER_GROUP = 1
#: Java ``delayLevel = 3 + reconsumeTimes`` when the consumer leaves the level to the broker.
BASE_RETRY_DELAY_LEVEL = 3


def max_reconsume_times(group_max: int, request_version: int, header_max: int | None) -> int:
    """The group's ``retryMaxTimes``, or the header's value from a client new enough to send it."""
    if request_version >= VERSION_MAX_RECONSUME_HEADER and header_max is not None:
        return header_max
    return group_max


def goes_to_dlq(reconsume_times: int, max_times: int, delay_level: int = 0) -> bool:
    """Whether the message goes to ``%DLQ%<group>`` instead of being retried."""
    return reconsume_times >= max_times or delay_level < 0


def retry_delay_level(delay_level: int, reconsume_times: int) -> int:
    """A send-back's delay level: the consumer's, or ``3 + reconsumeTimes`` when it sent 0."""
    return BASE_RETRY_DELAY_LEVEL + reconsume_times if delay_level == 0 else delay_level


def dlq_queue_id(rng: random.Random) -> int:
    """A random queue of the DLQ topic (Java ``nextInt(99999999) % DLQ_NUMS_PER_GROUP``)."""
    return rng.randrange(99999999) % DLQ_NUMS_PER_GROUP


def ensure_dlq_topic(topics: TopicConfigManager, group: str) -> TopicConfig:
    """``%DLQ%<group>``'s config, created write-only with :data:`DLQ_NUMS_PER_GROUP` queues."""
    return topics.create_topic_in_send_message_back_method(
        dlq_topic(group), DLQ_NUMS_PER_GROUP, PermName.PERM_WRITE, 0
    )
