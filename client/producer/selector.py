"""Queue selectors for ordered sends (Java ``MessageQueueSelector`` and its stock impls).

A selector is any callable ``(queues, message, arg) -> MessageQueue``. Messages that must stay
in order share an ``arg`` (e.g. an order id) and therefore a queue, as long as the topic's
queue count does not change.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

from pocketmq.client.message import Message, MessageQueue
from pocketmq.remoting.protocol.message import java_string_hash


class MessageQueueSelector(Protocol):
    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue: ...


def java_hash(value: Any) -> int:
    """Java ``hashCode`` of strings and ints (so Java and Python producers agree on queues)."""
    if isinstance(value, str):
        return java_string_hash(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return value
        v = value & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int)(v ^ (v >>> 32))
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    return hash(value)


def select_by_hash(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """Java ``SelectMessageQueueByHash``: ``abs(arg.hashCode()) % size``."""
    return mqs[abs(java_hash(arg)) % len(mqs)]


def select_by_random(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    return random.choice(list(mqs))
