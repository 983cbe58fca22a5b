"""Pure parts of the driver's cluster view: addresses and readable queues from a route."""

from __future__ import annotations

from pocketmq.remoting.protocol.heartbeat import MessageQueue
from pocketmq.remoting.protocol.route import BrokerData, QueueData, TopicRouteData
from pocketmq.remoting.protocol.topics import PermName
from pocketmq.spark.metadata import broker_addresses, route_queues
from pocketmq.spark.offsets import json_order, queue_label


def test_broker_addresses_start_with_the_protocols_choice_then_fail_over_by_id() -> None:
    route = TopicRouteData(
        broker_datas=[
            BrokerData("c", "broker-a", {2: "a2:1", 0: "a0:1", 1: "a1:1"}),
            BrokerData("c", "broker-b", {3: "b3:1", 1: "b1:1"}),  # master down
            BrokerData("c", "broker-c", {}),
        ]
    )
    addrs = broker_addresses(route)
    assert addrs["broker-a"] == ("a0:1", "a1:1", "a2:1")  # the master first
    # no master: whichever slave the protocol's rule picks comes first, the other one after it
    assert sorted(addrs["broker-b"]) == ["b1:1", "b3:1"]
    assert "broker-c" not in addrs


def test_route_queues_are_the_readable_ones_as_message_queues() -> None:
    route = TopicRouteData(
        queue_datas=[
            QueueData("broker-b", 2, 2, PermName.PERM_READ | PermName.PERM_WRITE),
            QueueData("broker-a", 1, 4, PermName.PERM_READ),
            QueueData("broker-c", 3, 3, PermName.PERM_WRITE),  # write-only: not read
        ]
    )
    assert route_queues("T", route) == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-b", 1),
    ]


def test_queue_label_and_json_order() -> None:
    mqs = [MessageQueue("T", "b", 10), MessageQueue("T", "b", 2), MessageQueue("S", "b", 3)]
    assert [queue_label(m) for m in sorted(mqs, key=json_order)] == ["S/b/3", "T/b/10", "T/b/2"]
