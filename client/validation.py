"""Client-side name checks (Java client ``Validators``): raise :class:`MessageValidationError`
before a request leaves the process.

The rules themselves (character set, length limits, reserved topics) are the protocol's
(:mod:`pocketmq.remoting.protocol.topics`); this module only words them as client errors.
"""

from __future__ import annotations

from pocketmq.client.errors import MessageValidationError
from pocketmq.remoting.protocol.topics import (
    DEFAULT_TOPIC,
    GROUP_MAX_LENGTH,
    TOPIC_MAX_LENGTH,
    is_not_allowed_send_topic,
    is_topic_or_group_illegal,
)


def check_topic(topic: str) -> None:
    """Raise :class:`MessageValidationError` unless ``topic`` is a legal topic name."""
    if not topic or not topic.strip():
        raise MessageValidationError("the specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MessageValidationError(f"the specified topic is longer than {TOPIC_MAX_LENGTH} characters")
    if is_topic_or_group_illegal(topic):
        raise MessageValidationError(
            f"the specified topic {topic!r} contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )


def check_send_topic(topic: str) -> None:
    """:func:`check_topic` plus the topics producers may not write."""
    check_topic(topic)
    if topic == DEFAULT_TOPIC:
        raise MessageValidationError(f"the topic[{topic}] is the default topic and conflicts with the system")
    if is_not_allowed_send_topic(topic):
        raise MessageValidationError(f"sending message to topic[{topic}] is forbidden")


def check_group(group: str) -> None:
    """Raise :class:`MessageValidationError` unless ``group`` is a legal group name."""
    if not group or not group.strip():
        raise MessageValidationError("the specified group is blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise MessageValidationError(f"the specified group is longer than {GROUP_MAX_LENGTH} characters")
    if is_topic_or_group_illegal(group):
        raise MessageValidationError(
            f"the specified group {group!r} contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )
