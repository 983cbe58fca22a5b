"""Subscription groups, connection lists and offset tables against a real in-process broker."""

from __future__ import annotations

import json
import os

import pytest

from pocketmq.remoting.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerConnection,
    ConsumerOffsetTable,
    DelayOffsetTable,
    MessageModel,
    ProducerConnection,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.route import TopicConfig
from tests.broker.helpers import Wire


def read_text(*parts: str) -> str:
    with open(os.path.join(*parts), encoding="utf-8") as f:
        return f.read()


def read_json(*parts: str):
    return json.loads(read_text(*parts))


async def commit(wire: Wire, group: str, topic: str, qid: int, offset: int) -> None:
    r = await wire.call(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": str(qid), "commitOffset": str(offset)},
    )
    assert r.code == ResponseCode.SUCCESS


async def test_create_read_and_delete_subscription_group(broker, wire):
    body = json.dumps(
        {"groupName": "CG", "retryQueueNums": 2, "retryMaxTimes": 3, "consumeBroadcastEnable": False}
    )
    r = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body.encode())
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    saved = read_json(broker.config.config_dir, "subscriptionGroup.json")
    assert saved["subscriptionGroupTable"]["CG"]["retryMaxTimes"] == 3  # on disk before the reply

    r = await wire.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    wrapper = SubscriptionGroupWrapper.decode(r.body)
    assert wrapper.subscription_group_table["CG"] == SubscriptionGroupConfig(
        "CG", consume_broadcast_enable=False, retry_queue_nums=2, retry_max_times=3
    )
    assert "TOOLS_CONSUMER" in wrapper.subscription_group_table
    v1 = wrapper.data_version

    await commit(wire, "CG", "T", 0, 7)
    r = await wire.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "CG", "removeOffset": "false"})
    assert r.code == ResponseCode.SUCCESS
    assert not broker.subscription_group_manager.contains("CG")
    assert broker.consumer_offset_manager.query_offset("CG", "T", 0) == 7  # offsets kept
    r = await wire.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    wrapper = SubscriptionGroupWrapper.decode(r.body)
    assert "CG" not in wrapper.subscription_group_table and wrapper.data_version.counter > v1.counter

    r = await wire.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "CG", "removeOffset": "true"})
    assert r.code == ResponseCode.SUCCESS
    assert broker.consumer_offset_manager.query_offset("CG", "T", 0) == -1
    assert '"CG"' not in read_text(broker.config.config_dir, "subscriptionGroup.json")


@pytest.mark.parametrize(
    ("body", "remark_part"),
    [
        (b"{not json", "bad SubscriptionGroupConfig body"),
        (b"[1,2]", "bad SubscriptionGroupConfig body"),
        (b'{"retryQueueNums":1}', "groupName"),
        (b'{"groupName":"CG","retryQueueNums":"many"}', "retryQueueNums"),
        (b'{"groupName":"bad group"}', "the specified group[bad group] contains illegal characters"),
        (b'{"groupName":""}', "the specified group is blank"),
    ],
)
async def test_bad_subscription_group_bodies(broker, wire, body, remark_part):
    r = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
    assert r.code == ResponseCode.SYSTEM_ERROR and remark_part in r.remark
    # an empty body is ignored as in Java, and the broker keeps serving
    r = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
    assert r.code == ResponseCode.SUCCESS
    r = await wire.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {})
    assert r.code == ResponseCode.SYSTEM_ERROR and "groupName" in r.remark


async def test_consumer_connection_list(broker, wire):
    r = await wire.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
    assert (r.code, r.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[CG] not online")
    java = Wire(broker.broker_addr)
    cpp = Wire(broker.broker_addr, language=LanguageCode.CPP, version=333)
    try:
        assert (await java.heartbeat("10.0.0.1@1", consumer_group="CG", topics={"T": "a || b"})).code == 0
        assert (await cpp.heartbeat("10.0.0.2@2", consumer_group="CG", topics={"T": "a || b"})).code == 0
        r = await wire.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
        assert r.code == ResponseCode.SUCCESS
        cc = ConsumerConnection.decode(r.body)
        conns = sorted(cc.connection_set, key=lambda c: c.client_id)
        assert [(c.client_id, c.language, c.version) for c in conns] == [
            ("10.0.0.1@1", "JAVA", 409),
            ("10.0.0.2@2", "CPP", 333),
        ]
        assert all(c.client_addr.startswith("127.0.0.1:") for c in conns)
        assert cc.subscription_table["T"].tags_set == ("a", "b")
        assert cc.message_model is MessageModel.CLUSTERING
        assert cc.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    finally:
        await java.close()
        await cpp.close()


async def test_producer_connection_list(broker, wire):
    r = await wire.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[PG] not exist")
    producer = Wire(broker.broker_addr, language=LanguageCode.CPP, version=333)
    try:
        assert (await producer.heartbeat("10.0.0.3@3", producer_group="PG")).code == 0
        r = await wire.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
        (conn,) = ProducerConnection.decode(r.body).connection_set
        assert (conn.client_id, conn.language, conn.version) == ("10.0.0.3@3", "CPP", 333)
    finally:
        await producer.close()
    r = await wire.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {})
    assert r.code == ResponseCode.SYSTEM_ERROR and "producerGroup" in r.remark


async def test_all_consumer_offsets_and_delay_offsets(broker, wire):
    await commit(wire, "G1", "T", 0, 5)
    await commit(wire, "G1", "T", 3, 9)
    r = await wire.call(RequestCode.GET_ALL_CONSUMER_OFFSET)
    assert r.code == ResponseCode.SUCCESS
    assert ConsumerOffsetTable.decode(r.body).offset_table == {"T@G1": {0: 5, 3: 9}}
    assert b"\n" not in r.body  # compact, unlike the pretty file
    r = await wire.call(RequestCode.GET_ALL_DELAY_OFFSET)
    if broker.schedule_message_service is None:
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
    else:  # once the schedule service exists, its delayOffset.json content
        assert r.code == ResponseCode.SUCCESS and b"offsetTable" in r.body


async def test_delay_offsets_come_from_the_schedule_service(broker, wire, monkeypatch):
    class Schedule:
        offset_table = {1: 4, 3: 0}

    monkeypatch.setattr(broker.admin_processors["GroupAdmin"], "schedule", Schedule())
    r = await wire.call(RequestCode.GET_ALL_DELAY_OFFSET)
    assert r.code == ResponseCode.SUCCESS
    # Java's delayOffset.json form: bare integer keys
    assert r.body == b'{"offsetTable":{1:4,3:0}}'
    assert DelayOffsetTable.decode(r.body).offset_table == {1: 4, 3: 0}


async def test_clone_group_offset(broker, wire):
    for topic in ("A", "B"):
        broker.topic_config_manager.update_topic_config(TopicConfig(topic, 2, 2))
    await commit(wire, "Src", "A", 0, 10)
    await commit(wire, "Src", "A", 1, 11)
    await commit(wire, "Src", "B", 0, 20)
    await commit(wire, "Src", "Unknown", 0, 30)  # no topic config: skipped
    # one topic
    r = await wire.call(
        RequestCode.CLONE_GROUP_OFFSET,
        {"srcGroup": "Src", "destGroup": "One", "topic": "A", "offline": "true"},
    )
    assert r.code == ResponseCode.SUCCESS
    com = broker.consumer_offset_manager
    assert com.query_offsets("One", "A") == {0: 10, 1: 11} and com.query_offsets("One", "B") == {}
    # every topic of the source group
    r = await wire.call(
        RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": "Src", "destGroup": "All", "offline": "true"}
    )
    assert r.code == ResponseCode.SUCCESS
    assert com.query_offsets("All", "A") == {0: 10, 1: 11} and com.query_offsets("All", "B") == {0: 20}
    assert com.query_offsets("All", "Unknown") == {}
    # online source group: only the topics it subscribes to (unless offline)
    consumer = Wire(broker.broker_addr)
    try:
        await consumer.heartbeat("c1", consumer_group="Src", topics={"B": "*"})
        r = await wire.call(
            RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": "Src", "destGroup": "Online", "offline": "false"}
        )
        assert r.code == ResponseCode.SUCCESS
        assert com.query_offsets("Online", "A") == {} and com.query_offsets("Online", "B") == {0: 20}
    finally:
        await consumer.close()
    r = await wire.call(RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": "Src"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "destGroup" in r.remark
