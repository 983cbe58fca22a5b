"""Listener types of the push consumer (Java ``MessageListenerConcurrently`` / ``...Orderly``).

A listener is an ``async`` function (a plain function works too) receiving a list of messages
(at most ``consume_message_batch_max_size``) and a context, returning a status. Raising an
exception, returning ``None`` or running past ``consume_timeout`` counts as a failure:
RECONSUME_LATER for concurrent listeners, SUSPEND_CURRENT_QUEUE_A_MOMENT for orderly ones.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.message import MessageExt


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


CONSUME_SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
RECONSUME_LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
SUCCESS = ConsumeOrderlyStatus.SUCCESS
SUSPEND_CURRENT_QUEUE_A_MOMENT = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    message_queue: MessageQueue
    #: 0: let the broker pick (3 + reconsume times); -1: straight to the DLQ; n: that level.
    delay_level_when_next_consume: int = 0
    #: With CONSUME_SUCCESS, messages after this index are treated as failed.
    ack_index: int = 1 << 30


@dataclass(slots=True)
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    #: ms to wait before a suspended queue is consumed again; -1 uses the consumer setting.
    suspend_current_queue_time_millis: int = -1


ConcurrentListener = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext],
    Awaitable[ConsumeConcurrentlyStatus | None] | ConsumeConcurrentlyStatus | None,
]
OrderlyListener = Callable[
    [list[MessageExt], ConsumeOrderlyContext],
    Awaitable[ConsumeOrderlyStatus | None] | ConsumeOrderlyStatus | None,
]
