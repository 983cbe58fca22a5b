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


def _check_name(kind: str, name: str, max_length: int) -> None:
    if not name or not name.strip():
        raise MessageValidationError(f"the specified {kind} is blank")
    if len(name) > max_length:
        raise MessageValidationError(f"the specified {kind} is longer than {max_length} characters")
    if is_topic_or_group_illegal(name):
        raise MessageValidationError(
            f"the specified {kind} {name!r} contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )


def check_topic(topic: str) -> None:
    """Raise :class:`MessageValidationError` unless ``topic`` is a legal topic name."""
    _check_name("topic", topic, TOPIC_MAX_LENGTH)


def check_send_topic(topic: str) -> None:
    """:func:`check_topic` plus the topics producers may not write."""
    check_topic(topic)
    if topic == DEFAULT_TOPIC:
        raise MessageValidationError(f"the topic[{topic}] is the default topic and conflicts with the system")
    if is_not_allowed_send_topic(topic):
        raise MessageValidationError(f"sending message to topic[{topic}] is forbidden")


def check_group(group: str) -> None:
    """Raise :class:`MessageValidationError` unless ``group`` is a legal group name."""
    _check_name("group", group, GROUP_MAX_LENGTH)
