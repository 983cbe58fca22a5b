"""The broker's decision tables, driven without sockets: send checks, pull checks and status
mapping, the retry/DLQ policy and admin validation (same codes and remarks as over the wire)."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.processor import admin_checks, send_checks
from pocketmq.broker.processor.pull_checks import check_pull, pull_outcome
from pocketmq.broker.processor.send import SendMessageProcessor
from pocketmq.broker.retry_policy import (
    DLQ_NUMS_PER_GROUP,
    dlq_queue_id,
    ensure_dlq_topic,
    goes_to_dlq,
    max_reconsume_times,
    retry_delay_level,
)
from pocketmq.broker.state import BrokerState
from pocketmq.broker.stats import BrokerStatsManager
from pocketmq.broker.subscription import SubscriptionGroupManager
from pocketmq.broker.topic_config import TopicConfigManager
from pocketmq.remoting.protocol.bodies import SubscriptionGroupConfig
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import ResponseError
from pocketmq.remoting.protocol.headers import CreateTopicRequestHeader, SendMessageRequestHeader
from pocketmq.remoting.protocol.route import PermName, TopicConfig, TopicFilterType
from pocketmq.store import GetMessageStatus

from .helpers import broker_config

NOW = 1_700_000_000_000


class Peer:
    remote_addr = "127.0.0.1:5555"

    def __init__(self) -> None:
        self.attrs: dict[str, Any] = {}


def topics() -> TopicConfigManager:
    tcm = TopicConfigManager(None, broker_name="broker-a", cluster_name="DefaultCluster", now_ms=lambda: NOW)
    tcm.update_topic_config(TopicConfig("T", 4, 4))
    tcm.update_topic_config(TopicConfig("ReadOnly", 4, 4, PermName.PERM_READ))
    tcm.update_topic_config(TopicConfig("Ord", 4, 4, order=True))
    return tcm


def cfg(tmp_path: Any, store: dict[str, Any] | None = None, **kw: Any) -> BrokerConfig:
    return broker_config(str(tmp_path), store, **kw)


def send_header(topic: str = "T", queue_id: int = 0, **kw: Any) -> SendMessageRequestHeader:
    fields = {
        "producerGroup": "P", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
        "queueId": str(queue_id), "sysFlag": "0", "bornTimestamp": "0", "flag": "0",
    }  # fmt: skip
    fields.update(kw)
    return SendMessageRequestHeader.from_ext_fields(fields)


def outcome_of(fn: Any) -> tuple[int, str] | str:
    """``(code, remark)`` of the error reply ``fn`` raises, or ``"ok"``."""
    try:
        fn()
    except ResponseError as exc:
        return (exc.response_code, exc.remark)
    return "ok"


# ------------------------------------------------------------------------------------ send checks

SEND_TABLE = [
    # (config overrides, store overrides, header, expected code or "ok", remark part)
    ({}, {}, send_header(), "ok", ""),
    ({}, {"brokerRole": "SLAVE"}, send_header(), ResponseCode.SERVICE_NOT_AVAILABLE, "is a slave"),
    ({"startAcceptSendRequestTimeStamp": NOW + 1}, {}, send_header(), ResponseCode.SYSTEM_ERROR, "until"),
    (
        {"brokerPermission": 4},
        {},
        send_header("Ord"),
        ResponseCode.NO_PERMISSION,
        "sending message is forbidden",
    ),
    ({"brokerPermission": 4}, {}, send_header(), "ok", ""),
    ({}, {}, send_header("a b"), ResponseCode.SYSTEM_ERROR, "illegal characters"),
    ({}, {}, send_header("SCHEDULE_TOPIC_XXXX"), ResponseCode.NO_PERMISSION, "is forbidden."),
    ({}, {}, send_header("New", defaultTopic="Nope"), ResponseCode.TOPIC_NOT_EXIST, "not exist, apply first"),
    ({}, {}, send_header("New"), "ok", ""),  # auto-created from TBW102
    ({}, {}, send_header("%RETRY%G", defaultTopic="Nope"), "ok", ""),  # retry topics created RW
    ({}, {}, send_header("ReadOnly"), ResponseCode.NO_PERMISSION, "the topic[ReadOnly] sending message"),
    ({}, {}, send_header(queue_id=4), ResponseCode.SYSTEM_ERROR, "request queueId[4] is illegal"),
]


@pytest.mark.parametrize(("over", "store", "header", "code", "remark"), SEND_TABLE)
def test_send_checks_table(tmp_path, over, store, header, code, remark):
    s = send_checks.SendSettings(cfg(tmp_path, store, **over))
    got = outcome_of(lambda: send_checks.check_send(s, header, topics(), set(), lambda: NOW, Peer()))
    if code == "ok":
        assert got == "ok"
    else:
        assert got[0] == code and remark in got[1], got


def test_send_checks_remember_valid_names_only(tmp_path):
    s = send_checks.SendSettings(cfg(tmp_path))
    ok: set[str] = set()
    tcm = topics()
    send_checks.check_send(s, send_header(), tcm, ok, lambda: NOW, Peer())
    outcome_of(
        lambda: send_checks.check_send(s, send_header("SCHEDULE_TOPIC_XXXX"), tcm, ok, lambda: NOW, Peer())
    )
    assert ok == {"T"}


def test_put_status_replies_cover_every_status():
    from pocketmq.store import PutMessageStatus

    assert set(send_checks.PUT_STATUS_REPLY) == set(PutMessageStatus)
    assert send_checks.PUT_STATUS_REPLY[PutMessageStatus.PROPERTIES_SIZE_EXCEEDED] == (
        ResponseCode.MESSAGE_ILLEGAL,
        send_checks.ILLEGAL_REMARK,
    )


class _Stored(Exception):
    pass


class RefusingStore:
    """Stands for the store: a message that passed every check reaches put_message (put_now)."""

    dispatch_behind_bytes = 0

    def put_message(self, inner: Any) -> Any:
        raise _Stored

    # the send processor's plain put (``MessageStore.put_now``, ``put_message``'s twin)
    put_now = put_message


@pytest.mark.parametrize(
    ("body", "props"),
    [
        (b"x" * 64, ""),
        (b"x" * 65, ""),
        (b"x" * 130, ""),
        (b"x" * 140, ""),
        (b"", "K\x01" + "v" * 32760),
        (b"", "K\x01" + "v" * 32770),
        (b"", "K\x01" + "é" * 16383),  # short in characters, long in bytes
    ],
)
def test_send_size_rules_inline_matches_reference(tmp_path, body, props):
    """send.py inlines send_checks.message_too_large / properties_too_long: same decisions."""
    config = cfg(tmp_path, {"maxMessageSize": 256})
    state = BrokerState(config)
    groups = SubscriptionGroupManager(None, now_ms=lambda: NOW)
    proc = SendMessageProcessor(
        store=RefusingStore(), topics=topics(), groups=groups, state=state,  # type: ignore[arg-type]
        now_ms=lambda: NOW, held_queues=set(), stats=BrokerStatsManager("c", lambda: NOW), schedule=None,
    )  # fmt: skip
    request = RemotingCommand.request(
        RequestCode.SEND_MESSAGE, send_header().to_ext_fields() | {"properties": props}, body
    )
    s = send_checks.SendSettings(config)
    stored_props = props + "\x02CLUSTER\x01DefaultCluster" if props else "CLUSTER\x01DefaultCluster"
    topic = request.ext_fields["topic"]  # type: ignore[index]
    illegal = send_checks.properties_too_long(stored_props) or send_checks.message_too_large(
        s, body, topic, stored_props
    )
    with pytest.raises(ResponseError if illegal else _Stored) as info:
        proc.process(Peer(), request)  # type: ignore[arg-type]
    if illegal:
        assert (info.value.response_code, info.value.remark) == (
            ResponseCode.MESSAGE_ILLEGAL,
            send_checks.ILLEGAL_REMARK,
        )


# ------------------------------------------------------------------------------------ pull checks


def pull_header(topic: str = "T", queue_id: int = 0, group: str = "G") -> Any:
    return SimpleNamespace(consumer_group=group, topic=topic, queue_id=queue_id)


PULL_TABLE = [
    ({"brokerPermission": 2}, pull_header(), ResponseCode.NO_PERMISSION, "pulling message is forbidden"),
    ({"autoCreateSubscriptionGroup": False}, pull_header(), ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "[G]"),
    ({}, pull_header(group="Off"), ResponseCode.NO_PERMISSION, "subscription group no permission, Off"),
    ({}, pull_header("Nope"), ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist"),
    ({}, pull_header("%DLQ%G"), ResponseCode.NO_PERMISSION, "pulling message is forbidden"),
    ({}, pull_header(queue_id=4), ResponseCode.SYSTEM_ERROR, "queueId[4] is illegal"),
    ({}, pull_header(queue_id=-1), ResponseCode.SYSTEM_ERROR, "queueId[-1] is illegal"),
    ({}, pull_header(), "ok", ""),
]


@pytest.mark.parametrize(("over", "header", "code", "remark"), PULL_TABLE)
def test_pull_checks_table(tmp_path, over, header, code, remark):
    config = cfg(tmp_path, **over)
    groups = SubscriptionGroupManager(
        None, now_ms=lambda: NOW, auto_create_subscription_group=config.auto_create_subscription_group
    )
    groups.update_subscription_group_config(SubscriptionGroupConfig("Off", consume_enable=False))
    tcm = topics()
    ensure_dlq_topic(tcm, "G")
    got = outcome_of(lambda: check_pull(config, header, groups, tcm, Peer()))
    if code == "ok":
        assert got == "ok"
    else:
        assert got[0] == code and remark in got[1], got


S = GetMessageStatus
OUTCOME_TABLE = [
    # status, request offset, expected code (master, slave_read_enable=False)
    (S.FOUND, 5, ResponseCode.SUCCESS),
    (S.NO_MATCHED_MESSAGE, 5, ResponseCode.PULL_RETRY_IMMEDIATELY),
    (S.MESSAGE_WAS_REMOVING, 5, ResponseCode.PULL_RETRY_IMMEDIATELY),
    (S.OFFSET_FOUND_NULL, 5, ResponseCode.PULL_NOT_FOUND),
    (S.OFFSET_OVERFLOW_ONE, 5, ResponseCode.PULL_NOT_FOUND),
    (S.OFFSET_OVERFLOW_BADLY, 5, ResponseCode.PULL_OFFSET_MOVED),
    (S.OFFSET_TOO_SMALL, 5, ResponseCode.PULL_OFFSET_MOVED),
    (S.NO_MESSAGE_IN_QUEUE, 5, ResponseCode.PULL_OFFSET_MOVED),
    (S.NO_MESSAGE_IN_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
    (S.NO_MATCHED_LOGIC_QUEUE, 5, ResponseCode.PULL_OFFSET_MOVED),
    (S.NO_MATCHED_LOGIC_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
]


@pytest.mark.parametrize(("status", "offset", "code"), OUTCOME_TABLE)
def test_pull_status_to_code(tmp_path, status, offset, code):
    assert pull_outcome(cfg(tmp_path), status, offset, 9, False, 1) == (code, 0, 9)


def test_pull_outcome_suggest_and_slave_rules(tmp_path):
    moved = S.OFFSET_TOO_SMALL
    master = cfg(tmp_path)
    assert pull_outcome(master, S.FOUND, 5, 9, True, 1) == (ResponseCode.SUCCESS, 0, 9)  # no slaveReadEnable
    reads = cfg(tmp_path, slaveReadEnable=True)
    assert pull_outcome(reads, S.FOUND, 5, 9, True, 1) == (ResponseCode.SUCCESS, 1, 9)
    assert pull_outcome(reads, S.FOUND, 5, 9, False, 1) == (ResponseCode.SUCCESS, 0, 9)
    assert pull_outcome(reads, S.FOUND, 5, 9, False, 1, 2) == (
        ResponseCode.SUCCESS,
        2,
        9,
    )  # the group's brokerId
    assert pull_outcome(master, moved, 5, 9, False, 1) == (ResponseCode.PULL_OFFSET_MOVED, 0, 9)
    slave = cfg(tmp_path, {"brokerRole": "SLAVE"})
    assert pull_outcome(slave, moved, 5, 9, False, 1) == (ResponseCode.PULL_RETRY_IMMEDIATELY, 0, 5)
    checking = cfg(tmp_path, {"brokerRole": "SLAVE", "offsetCheckInSlave": True})
    assert pull_outcome(checking, moved, 5, 9, False, 1) == (ResponseCode.PULL_OFFSET_MOVED, 0, 9)


# ------------------------------------------------------------------------------- retry / DLQ policy


@pytest.mark.parametrize(
    ("group_max", "version", "header_max", "expected"),
    [(16, 0, None, 16), (16, 63, 3, 16), (16, 121, 3, 3), (16, 121, None, 16), (16, 400, 0, 0)],
)
def test_max_reconsume_times(group_max, version, header_max, expected):
    assert max_reconsume_times(group_max, version, header_max) == expected


@pytest.mark.parametrize(
    ("times", "max_times", "delay", "dlq"),
    [
        (0, 16, 0, False),
        (15, 16, 0, False),
        (16, 16, 0, True),
        (17, 16, 3, True),
        (0, 16, -1, True),
        (0, 0, 0, True),
    ],
)
def test_goes_to_dlq(times, max_times, delay, dlq):
    assert goes_to_dlq(times, max_times, delay) is dlq


@pytest.mark.parametrize(("delay", "times", "level"), [(0, 0, 3), (0, 5, 8), (2, 5, 2), (18, 0, 18)])
def test_retry_delay_level(delay, times, level):
    assert retry_delay_level(delay, times) == level


def test_dlq_topic_is_write_only_with_one_queue():
    tcm = topics()
    tc = ensure_dlq_topic(tcm, "G")
    assert (tc.topic_name, tc.write_queue_nums, tc.read_queue_nums, tc.perm) == (
        "%DLQ%G",
        1,
        1,
        PermName.PERM_WRITE,
    )
    assert ensure_dlq_topic(tcm, "G") is tc  # created once
    rng = random.Random(7)
    assert {dlq_queue_id(rng) for _ in range(20)} == set(range(DLQ_NUMS_PER_GROUP))


# --------------------------------------------------------------------------------- admin checks


def create_header(**kw: Any) -> CreateTopicRequestHeader:
    fields = {
        "topic": "T",
        "defaultTopic": "TBW102",
        "readQueueNums": "8",
        "writeQueueNums": "8",
        "perm": "6",
    }
    fields.update(kw)
    return CreateTopicRequestHeader.from_ext_fields(fields)


@pytest.mark.parametrize(
    ("fields", "remark"),
    [
        ({"readQueueNums": "65536"}, "readQueueNums 65536 is out of range [0, 65535]"),
        ({"writeQueueNums": "-1"}, "writeQueueNums -1 is out of range [0, 65535]"),
        ({"perm": "16"}, "perm 16 is not a PermName bit set (0-15)"),
        ({"topicFilterType": "BOTH"}, "No enum constant TopicFilterType.BOTH (SINGLE_TAG or MULTI_TAG)"),
    ],
)
def test_topic_config_refusals(fields, remark):
    assert admin_checks.topic_config_of(create_header(**fields)) == remark


def test_topic_config_accepted():
    tc = admin_checks.topic_config_of(create_header(topicFilterType="MULTI_TAG", order="true"))
    assert tc == TopicConfig("T", 8, 8, 6, TopicFilterType.MULTI_TAG, 0, True)


def test_topic_and_group_names_and_config_keys():
    assert admin_checks.topic_name_error("T", False) is None
    assert admin_checks.topic_name_error("T", True) == "The topic[T] is conflict with system topic."
    assert admin_checks.topic_name_error("", False) == "The specified topic is blank."
    assert admin_checks.group_name_error("G") is None
    assert admin_checks.group_name_error("a b") is not None
    assert admin_checks.refused_keys(["brokerPermission", "configBlackList", "brokerConfigPath"]) == [
        "brokerConfigPath",
        "configBlackList",
    ]
