from __future__ import annotations

import pytest

from pocketmq.client.errors import MessageValidationError
from pocketmq.client.message import MessageQueue
from pocketmq.client.route import TopicPublishInfo, to_publish_info, to_subscribe_info
from pocketmq.client.validation import check_group, check_send_topic, check_topic
from pocketmq.remoting.protocol.route import BrokerData, QueueData, TopicRouteData
from pocketmq.remoting.protocol.topics import PermName

PERM_READ = PermName.PERM_READ
PERM_WRITE = PermName.PERM_WRITE

QUOTED = b"""{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-b","cluster":"C"},
{"brokerAddrs":{"0":"127.0.0.1:10811"},"brokerName":"broker-a","cluster":"C"}],"filterServerTable":{},
"queueDatas":[{"brokerName":"broker-b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":2},
{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}"""
UNQUOTED = QUOTED.replace(b'"0":', b"0:").replace(b'"1":', b"1:")


@pytest.mark.parametrize("body", [QUOTED, UNQUOTED])
def test_route_decodes_both_key_forms(body: bytes) -> None:
    route = TopicRouteData.decode(body)
    assert {b.broker_name: b.broker_addrs for b in route.broker_datas} == {
        "broker-b": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"},
        "broker-a": {0: "127.0.0.1:10811"},
    }
    assert route.queue_datas[0] == QueueData("broker-b", 4, 2, 6, 0)


def test_publish_queues_are_sorted_by_broker_and_use_write_nums() -> None:
    info = to_publish_info("T", TopicRouteData.decode(QUOTED))
    assert info.message_queues == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-b", 1),
    ]
    assert not info.order_topic
    assert info.queue_id_count("broker-b") == 2
    assert info.queue_id_count("nope") == -1


def test_subscribe_queues_use_read_nums() -> None:
    mqs = to_subscribe_info("T", TopicRouteData.decode(QUOTED))
    assert len(mqs) == 6
    assert MessageQueue("T", "broker-b", 3) in mqs


def test_publish_skips_brokers_without_master_and_without_write_perm() -> None:
    route = TopicRouteData(
        [
            QueueData("a", 2, 2, PERM_READ, 0),
            QueueData("b", 2, 2, PERM_READ | PERM_WRITE, 0),
            QueueData("c", 1, 1, 6, 0),
        ],
        [
            BrokerData("C", "a", {0: "x:1"}),
            BrokerData("C", "b", {1: "slave:1"}),
            BrokerData("C", "c", {0: "y:1"}),
        ],
    )
    info = to_publish_info("T", route)
    assert info.message_queues == [MessageQueue("T", "c", 0)]
    sub = to_subscribe_info("T", route)
    assert {m.broker_name for m in sub} == {"a", "b", "c"}


def test_order_topic_conf_defines_publish_queues() -> None:
    route = TopicRouteData([], [], order_topic_conf="broker-a:2;broker-b:1")
    info = to_publish_info("T", route)
    assert info.order_topic
    assert info.message_queues == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-b", 0),
    ]


def test_round_robin_avoids_last_failed_broker() -> None:
    info = TopicPublishInfo([MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0)])
    for _ in range(20):
        assert info.select_one("a").broker_name == "b"
    seen = {info.select_one() for _ in range(6)}
    assert seen == set(info.message_queues)
    only_a = TopicPublishInfo([MessageQueue("T", "a", 0)])
    assert only_a.select_one("a") == MessageQueue("T", "a", 0)


def test_route_key_detects_changes() -> None:
    a = TopicRouteData.decode(QUOTED)
    b = TopicRouteData.decode(UNQUOTED)
    assert a.route_key() == b.route_key()
    b.queue_datas[0] = QueueData("broker-b", 8, 8, 6, 0)
    assert a.route_key() != b.route_key()


@pytest.mark.parametrize("topic", ["", " ", "a b", "t/x", "x" * 128, "中文"])
def test_bad_topics_rejected(topic: str) -> None:
    with pytest.raises(MessageValidationError):
        check_topic(topic)


def test_send_topic_rules() -> None:
    check_send_topic("%RETRY%G")
    check_topic("TBW102")
    for reserved in ("TBW102", "SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX_V2", "RMQ_SYS_TRANS_HALF_TOPIC"):
        with pytest.raises(MessageValidationError):
            check_send_topic(reserved)


def test_group_rules() -> None:
    check_group("G_1-x")
    for bad in ("", "a b", "g" * 256):
        with pytest.raises(MessageValidationError):
            check_group(bad)
