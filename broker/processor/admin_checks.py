"""The admin processors' validation (pure): what UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP and UPDATE_BROKER_CONFIG refuse, with Java's remarks.

Each function returns the SYSTEM_ERROR remark to reply with (None: accepted), or the accepted
value; the handlers in ``admin_topic``/``admin_group``/``admin_broker`` turn that into replies.

=======================================  ==========================================================
check                                    remark
=======================================  ==========================================================
topic name (:func:`topic_name_error`)    TopicValidator's remark; a system topic: ``The topic[T] is
                                         conflict with system topic.``
topic config (:func:`topic_config_of`)   ``readQueueNums N is out of range [0, 65535]`` (likewise
                                         writeQueueNums); ``perm P is not a PermName bit set
                                         (0-15)``; ``No enum constant TopicFilterType.X ...``
group name (:func:`group_name_error`)    TopicValidator's group remark
broker config keys (:func:`refused_keys`)  keys in ``configBlackList`` → 16 NO_PERMISSION
=======================================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pocketmq.remoting.protocol.route import TopicConfig, TopicFilterType, group_error, topic_error

if TYPE_CHECKING:
    from pocketmq.remoting.protocol.headers import CreateTopicRequestHeader

__all__ = [
    "CONFIG_BLACK_LIST",
    "MAX_QUEUE_NUMS",
    "group_name_error",
    "refused_keys",
    "topic_config_of",
    "topic_name_error",
]

MAX_QUEUE_NUMS = 65535
#: Java ``BrokerConfig.configBlackList`` default.
CONFIG_BLACK_LIST = frozenset(
    {"brokerConfigPath", "configBlackList", "broker_config_path", "config_black_list"}
)


def topic_name_error(topic: str, is_system_topic: bool) -> str | None:
    """A topic an admin may not create or delete: invalid name, or a system topic."""
    err = topic_error(topic)
    if err is not None:
        return err
    if is_system_topic:
        return f"The topic[{topic}] is conflict with system topic."
    return None


def topic_config_of(h: CreateTopicRequestHeader) -> TopicConfig | str:
    """The config UPDATE_AND_CREATE_TOPIC stores, or the remark refusing it (name checked apart)."""
    for name, value in (("readQueueNums", h.read_queue_nums), ("writeQueueNums", h.write_queue_nums)):
        if not 0 <= value <= MAX_QUEUE_NUMS:
            return f"{name} {value} is out of range [0, {MAX_QUEUE_NUMS}]"
    if not 0 <= h.perm <= 15:
        return f"perm {h.perm} is not a PermName bit set (0-15)"
    try:
        filter_type = TopicFilterType(h.topic_filter_type or TopicFilterType.SINGLE_TAG.value)
    except ValueError:
        return f"No enum constant TopicFilterType.{h.topic_filter_type} (SINGLE_TAG or MULTI_TAG)"
    return TopicConfig(
        h.topic,
        h.read_queue_nums,
        h.write_queue_nums,
        h.perm,
        filter_type,
        h.topic_sys_flag or 0,
        h.order,
    )


def group_name_error(group: str) -> str | None:
    """A subscription group name an admin may not create."""
    return group_error(group)


def refused_keys(updates: Iterable[str]) -> list[str]:
    """The UPDATE_BROKER_CONFIG keys in the black list, sorted (empty: none)."""
    return sorted(k for k in updates if k in CONFIG_BLACK_LIST)
