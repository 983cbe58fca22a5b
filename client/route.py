"""Topic routes on the client side (pure): route data → publish and subscribe queue lists.

``TopicRouteData`` is parsed from the name server's GET_ROUTEINFO_BY_TOPIC body (reference
§3.1; both the quoted and fastjson's unquoted ``brokerAddrs`` keys are accepted).

Rules (Java ``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``...SubscribeInfo``):

* publish queues: for each QueueData (sorted by broker name) with the WRITE permission whose
  broker has a master (id 0), queue ids ``0..writeQueueNums-1``; when ``orderTopicConf`` is set,
  ``brokerName:count`` pairs separated by ``;`` define them instead;
* subscribe queues: QueueData with the READ permission, ``0..readQueueNums-1``.

Also here: topic and group validation (Java ``Validators``) and the reserved topic names.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pocketmq.client.errors import MessageValidationError
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol import fastjson

DEFAULT_TOPIC = "TBW102"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
MASTER_ID = 0
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
_VALID_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")

#: Topics a producer may not send to (Java ``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    (
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    )
)

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def check_topic(topic: str) -> None:
    """Raise :class:`MessageValidationError` unless ``topic`` is a legal topic name."""
    if not topic or not topic.strip():
        raise MessageValidationError("the specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MessageValidationError(f"the specified topic is longer than {TOPIC_MAX_LENGTH} characters")
    if not _VALID_NAME.match(topic):
        raise MessageValidationError(
            f"the specified topic {topic!r} contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )


def check_send_topic(topic: str) -> None:
    """:func:`check_topic` plus the topics producers may not write."""
    check_topic(topic)
    if topic == DEFAULT_TOPIC:
        raise MessageValidationError(f"the topic[{topic}] is the default topic and conflicts with the system")
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise MessageValidationError(f"sending message to topic[{topic}] is forbidden")


def check_group(group: str) -> None:
    if not group or not group.strip():
        raise MessageValidationError("the specified group is blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise MessageValidationError(f"the specified group is longer than {GROUP_MAX_LENGTH} characters")
    if not _VALID_NAME.match(group):
        raise MessageValidationError(
            f"the specified group {group!r} contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )


# --------------------------------------------------------------------------------------------
# route data


@dataclass(slots=True, frozen=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(slots=True, frozen=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    def select_broker_addr(self) -> str | None:
        """The master's address, else any slave's (Java ``selectBrokerAddr``)."""
        addr = self.broker_addrs.get(MASTER_ID)
        if addr is None and self.broker_addrs:
            return random.choice(list(self.broker_addrs.values()))
        return addr


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def decode(cls, body: bytes) -> TopicRouteData:
        """Parse a route body.

        Raises:
            ValueError: not JSON/fastjson, or fields of the wrong shape.
        """
        return cls.from_json(fastjson.decode_object(body, "TopicRouteData"))

    @classmethod
    def from_json(cls, obj: Mapping[Any, Any]) -> TopicRouteData:
        qds = []
        for raw in fastjson.get_list(obj, "queueDatas"):
            qd = fastjson.as_object(raw, "queueDatas[]")
            qds.append(
                QueueData(
                    fastjson.get_str(qd, "brokerName"),
                    fastjson.get_int(qd, "readQueueNums", 0),
                    fastjson.get_int(qd, "writeQueueNums", 0),
                    fastjson.get_int(qd, "perm", PERM_READ | PERM_WRITE),
                    fastjson.get_int(qd, "topicSysFlag", 0),
                )
            )
        bds = []
        for raw in fastjson.get_list(obj, "brokerDatas"):
            bd = fastjson.as_object(raw, "brokerDatas[]")
            addrs = {int(k): str(v) for k, v in fastjson.get_dict(bd, "brokerAddrs").items()}
            bds.append(
                BrokerData(fastjson.get_str(bd, "cluster", ""), fastjson.get_str(bd, "brokerName"), addrs)
            )
        fst = {str(k): [str(x) for x in v] for k, v in fastjson.get_dict(obj, "filterServerTable").items()}
        return cls(qds, bds, fastjson.get_str(obj, "orderTopicConf", None) or None, fst)

    def route_key(self) -> tuple[Any, ...]:
        """A comparable snapshot: routes that are equal need no table update."""
        return (
            sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in self.queue_datas),
            sorted((b.broker_name, sorted(b.broker_addrs.items())) for b in self.broker_datas),
            self.order_topic_conf,
        )


@dataclass(slots=True)
class TopicPublishInfo:
    """Writable queues of a topic plus the round-robin cursor producers share."""

    message_queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    have_route: bool = False
    route: TopicRouteData | None = None
    #: Round-robin position; starts at a random place like Java's ThreadLocalIndex.
    index: int = field(default_factory=lambda: random.randrange(1 << 16))

    @property
    def ok(self) -> bool:
        return bool(self.message_queues)

    def select_one(self, last_broker_name: str | None = None) -> MessageQueue:
        """Next queue round robin, avoiding ``last_broker_name`` when another broker exists."""
        mqs = self.message_queues
        n = len(mqs)
        if last_broker_name is not None:
            for _ in range(n):
                self.index += 1
                mq = mqs[self.index % n]
                if mq.broker_name != last_broker_name:
                    return mq
        self.index += 1
        return mqs[self.index % n]

    def queue_id_count(self, broker_name: str) -> int:
        """Write queue count of ``broker_name`` (-1 when unknown)."""
        if self.route is None:
            return -1
        for qd in self.route.queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1


def to_publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    info = TopicPublishInfo(route=route, have_route=True)
    if route.order_topic_conf:
        for entry in route.order_topic_conf.split(";"):
            name, _, count = entry.partition(":")
            if name and count.strip().isdigit():
                info.message_queues.extend(MessageQueue(topic, name, i) for i in range(int(count)))
        info.order_topic = True
        return info
    masters = {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            info.message_queues.extend(
                MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)
            )
    return info


def to_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    out: set[MessageQueue] = set()
    for qd in route.queue_datas:
        if qd.perm & PERM_READ:
            out.update(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return out
