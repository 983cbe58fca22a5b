"""Topic and group names, permissions and flags: RocketMQ's ``PermName``, ``TopicSysFlag``,
``TopicFilterType``, ``MixAll`` and ``TopicValidator`` facts (names, limits, system topics).

Re-exported by :mod:`pocketmq.remoting.protocol.route`, where they were first defined.
"""

from __future__ import annotations

import enum
import re

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "CID_ONSAPI_OWNER_GROUP",
    "CID_ONSAPI_PERMISSION_GROUP",
    "CID_ONSAPI_PULL_GROUP",
    "CID_RMQ_SYS_PREFIX",
    "CID_SYS_RMQ_TRANS",
    "CLIENT_INNER_PRODUCER_GROUP",
    "DEFAULT_CLUSTER",
    "DEFAULT_CONSUMER_GROUP",
    "DEFAULT_PRODUCER_GROUP",
    "DEFAULT_TOPIC",
    "DLQ_GROUP_TOPIC_PREFIX",
    "FILTERSRV_CONSUMER_GROUP",
    "GROUP_MAX_LENGTH",
    "LMQ_PREFIX",
    "MASTER_ID",
    "MONITOR_CONSUMER_GROUP",
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "NOT_ALLOWED_SEND_TOPICS",
    "ONS_HTTP_PROXY_GROUP",
    "PermName",
    "REPLY_TOPIC_POSTFIX",
    "RETRY_GROUP_TOPIC_PREFIX",
    "RMQ_SYS_BENCHMARK_TOPIC",
    "RMQ_SYS_OFFSET_MOVED_EVENT",
    "RMQ_SYS_SCHEDULE_TOPIC",
    "RMQ_SYS_SCHEDULE_TOPIC_V2",
    "RMQ_SYS_SELF_TEST_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "SCHEDULE_CONSUMER_GROUP",
    "SCHEDULE_TOPIC_XXXX",
    "SELF_TEST_CONSUMER_GROUP",
    "SELF_TEST_PRODUCER_GROUP",
    "SYSTEM_TOPICS",
    "SYSTEM_TOPIC_PREFIX",
    "TOOLS_CONSUMER_GROUP",
    "TOPIC_MAX_LENGTH",
    "TopicFilterType",
    "TopicSysFlag",
    "dlq_topic",
    "group_error",
    "is_dlq_topic",
    "is_not_allowed_send_topic",
    "is_retry_topic",
    "is_sys_consumer_group",
    "is_system_topic",
    "is_topic_or_group_illegal",
    "reply_topic",
    "retry_topic",
    "topic_error",
    "wants_standard_json",
]


class PermName:
    """Topic/queue permission bits (``PermName.java``)."""

    PERM_PRIORITY = 0x8
    PERM_READ = 0x4
    PERM_WRITE = 0x2
    PERM_INHERIT = 0x1
    DEFAULT = PERM_READ | PERM_WRITE

    @staticmethod
    def is_readable(perm: int) -> bool:
        return bool(perm & PermName.PERM_READ)

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return bool(perm & PermName.PERM_WRITE)

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return bool(perm & PermName.PERM_INHERIT)

    @staticmethod
    def is_priority(perm: int) -> bool:
        return bool(perm & PermName.PERM_PRIORITY)

    @staticmethod
    def perm_to_string(perm: int) -> str:
        """``"RWX"``-style text (``X`` = inherit), as mqadmin prints it."""
        return (
            ("R" if perm & PermName.PERM_READ else "-")
            + ("W" if perm & PermName.PERM_WRITE else "-")
            + ("X" if perm & PermName.PERM_INHERIT else "-")
        )


class TopicSysFlag:
    """``topicSysFlag`` bits (``TopicSysFlag.java``)."""

    FLAG_UNIT = 0x1
    FLAG_UNIT_SUB = 0x2

    @staticmethod
    def build(unit: bool, has_unit_sub: bool) -> int:
        return (TopicSysFlag.FLAG_UNIT if unit else 0) | (TopicSysFlag.FLAG_UNIT_SUB if has_unit_sub else 0)

    @staticmethod
    def has_unit_flag(sys_flag: int) -> bool:
        return bool(sys_flag & TopicSysFlag.FLAG_UNIT)

    @staticmethod
    def has_unit_sub_flag(sys_flag: int) -> bool:
        return bool(sys_flag & TopicSysFlag.FLAG_UNIT_SUB)


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


MASTER_ID = 0
DEFAULT_CLUSTER = "DefaultCluster"
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
DEFAULT_TOPIC = AUTO_CREATE_TOPIC_KEY_TOPIC
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
LMQ_PREFIX = "%LMQ%"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RMQ_SYS_SCHEDULE_TOPIC = SCHEDULE_TOPIC_XXXX = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_SCHEDULE_TOPIC_V2 = "SCHEDULE_TOPIC_XXXX_V2"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
SCHEDULE_CONSUMER_GROUP = "SCHEDULE_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
MONITOR_CONSUMER_GROUP = "__MONITOR_CONSUMER"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"
#: KV namespace holding ``topic → "brokerA:4;brokerB:4"`` (``NamesrvUtil``).
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC_V2,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC_V2,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def reply_topic(cluster: str) -> str:
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    return topic in NOT_ALLOWED_SEND_TOPICS


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


def is_topic_or_group_illegal(name: str) -> bool:
    """Any character outside ``[%|a-zA-Z0-9_-]`` (``TopicValidator.isTopicOrGroupIllegal``)."""
    return _VALID_NAME.fullmatch(name) is None


def topic_error(topic: str | None) -> str | None:
    """The Java broker's remark for an invalid topic name, or ``None`` when it is valid."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def group_error(group: str | None) -> str | None:
    """The Java remark for an invalid consumer/producer group name, or ``None``."""
    if group is None or not group.strip():
        return "the specified group is blank"
    if len(group) > GROUP_MAX_LENGTH:
        return "the specified group is longer than group max length 255."
    if is_topic_or_group_illegal(group):
        return f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


def wants_standard_json(request_version: int, accept_standard_json_only: bool | None = None) -> bool:
    """Whether GET_ROUTEINFO_BY_TOPIC must answer with quoted keys (version >= V4_9_4 = 401)."""
    return request_version >= 401 or bool(accept_standard_json_only)
