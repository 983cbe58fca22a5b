"""RocketMQ namespaces (``ClientConfig.namespace``, Java ``NamespaceUtil``).

A client with ``namespace="ns"`` works on ``ns%<topic>`` and ``ns%<group>`` on the wire while
its user sees the plain names: producers wrap the group and every message's topic (a send
result's queue shows the plain topic again), consumers wrap the group and the subscribed or
assigned topics and hand out messages with the plain topic, the admin client wraps the topic
and group arguments. Retry and DLQ names keep their prefix first (``%RETRY%ns%group``).
System topics and groups (``TBW102``, ``SCHEDULE_TOPIC_XXXX``, ``CID_RMQ_SYS_*`` ...) and names
that already carry the namespace are left alone. Two namespaces on one cluster therefore never
see each other's topics or offsets.

Nothing here runs per message when ``namespace`` is unset: the clients test it once per call.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.message import MessageExt
from pocketmq.remoting.protocol.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_sys_consumer_group,
    is_system_topic,
)

SEPARATOR = "%"
T = TypeVar("T")


def _split_prefix(resource: str) -> tuple[str, str]:
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix, resource[len(prefix) :]
    return "", resource


def wrap(namespace: str | None, resource: str) -> str:
    """``ns%resource`` (after a retry/DLQ prefix); unchanged without a namespace, for system
    resources and for names that already carry the namespace."""
    if not namespace or not resource:
        return resource
    prefix, name = _split_prefix(resource)
    if is_system_topic(name) or is_sys_consumer_group(name) or name.startswith(namespace + SEPARATOR):
        return resource
    return f"{prefix}{namespace}{SEPARATOR}{name}"


def unwrap(namespace: str | None, resource: str) -> str:
    """The name without ``ns%`` (a retry/DLQ prefix stays)."""
    if not namespace or not resource:
        return resource
    prefix, name = _split_prefix(resource)
    head = namespace + SEPARATOR
    return prefix + name[len(head) :] if name.startswith(head) else resource


def wrap_queue(namespace: str | None, mq: MessageQueue) -> MessageQueue:
    return MessageQueue(wrap(namespace, mq.topic), mq.broker_name, mq.queue_id) if namespace else mq


def unwrap_queue(namespace: str | None, mq: MessageQueue) -> MessageQueue:
    return MessageQueue(unwrap(namespace, mq.topic), mq.broker_name, mq.queue_id) if namespace else mq


def unwrap_messages(namespace: str, msgs: Iterable[MessageExt]) -> None:
    for m in msgs:
        m.topic = unwrap(namespace, m.topic)


def plain_topic_listener(namespace: str, listener: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """A push listener that sees plain topics; the consumer gets the messages back unchanged
    (redelivery and offsets work on the wire names)."""

    async def call(msgs: list[MessageExt], ctx: Any) -> Any:
        wire = [m.topic for m in msgs]
        unwrap_messages(namespace, msgs)
        try:
            result = listener(msgs, ctx)
            return await result if inspect.isawaitable(result) else result
        finally:
            for m, topic in zip(msgs, wire, strict=True):
                m.topic = topic

    return call
