"""Topic routes on the client side (pure): route data → publish and subscribe queue lists.

The route data itself (``TopicRouteData``, ``QueueData``, ``BrokerData``, parsed from the name
server's GET_ROUTEINFO_BY_TOPIC body) and the topic rules are the protocol's
(:mod:`pocketmq.remoting.protocol.route`, :mod:`~pocketmq.remoting.protocol.topics`); name checks
that raise client errors are in :mod:`pocketmq.client.validation`.

Rules (Java ``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``...SubscribeInfo``):

* publish queues: for each QueueData (sorted by broker name) with the WRITE permission whose
  broker has a master (id 0), queue ids ``0..writeQueueNums-1``; when ``orderTopicConf`` is set,
  ``brokerName:count`` pairs separated by ``;`` define them instead;
* subscribe queues: QueueData with the READ permission, ``0..readQueueNums-1``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.route import TopicRouteData
from pocketmq.remoting.protocol.topics import MASTER_ID, PermName

__all__ = ["TopicPublishInfo", "to_publish_info", "to_subscribe_info"]


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
        if qd.perm & PermName.PERM_WRITE and qd.broker_name in masters:
            info.message_queues.extend(
                MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)
            )
    return info


def to_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    out: set[MessageQueue] = set()
    for qd in route.queue_datas:
        if qd.perm & PermName.PERM_READ:
            out.update(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return out
