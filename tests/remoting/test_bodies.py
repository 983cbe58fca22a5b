from __future__ import annotations

import json

import pytest

from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.bodies import (
    Connection,
    ConsumeFromWhere,
    ConsumerConnection,
    ConsumerData,
    ConsumerOffsetTable,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeType,
    DelayOffsetTable,
    GetConsumerListByGroupResponseBody,
    GroupList,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    OffsetWrapper,
    ProducerConnection,
    ProducerData,
    ResetOffsetBody,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicOffset,
    TopicStatsTable,
    UnlockBatchRequestBody,
    mq_key,
    split_tags,
)
from pocketmq.remoting.protocol.fastjson import BodyFormatError
from pocketmq.remoting.protocol.route import DataVersion

# What librocketmq (C++ 2.x) sends: enum ordinals, string subVersion, garbage codeSet (atoi of
# the tag), no expressionType/classFilterMode/unitMode, no producerDataSet key when empty.
CPP_HEARTBEAT = (
    b'{"clientID":"10.0.0.5@12345#1690000000000","consumerDataSet":[{"consumeFromWhere":4,'
    b'"consumeType":1,"groupName":"CG","messageModel":1,"subscriptionDataSet":[{"codeSet":[0,0],'
    b'"subString":"TagA || TagB","subVersion":"1690000000123","tagsSet":["TagA","TagB"],'
    b'"topic":"T"},{"codeSet":[],"subString":"*","subVersion":"1690000000124","tagsSet":[],'
    b'"topic":"%RETRY%CG"}]}]}\n'
)

# What ali-ons 3.x sends: enum names, correct codeSet, numeric subVersion, producer and consumer.
ONS_HEARTBEAT = json.dumps(
    {
        "clientID": "10.0.0.6@6789",
        "producerDataSet": [{"groupName": "PG"}, {"groupName": "CLIENT_INNER_PRODUCER"}],
        "consumerDataSet": [
            {
                "groupName": "CG2",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "BROADCASTING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": [
                    {
                        "topic": "T",
                        "subString": "TagA",
                        "classFilterMode": False,
                        "tagsSet": ["TagA"],
                        "codeSet": [2598919],
                        "subVersion": 1690000000999,
                    }
                ],
            }
        ],
    }
).encode()


def test_cpp_heartbeat() -> None:
    hb = HeartbeatData.decode(CPP_HEARTBEAT)
    assert hb.client_id == "10.0.0.5@12345#1690000000000"
    assert hb.producer_data_set == ()
    (cd,) = hb.consumer_data_set
    assert cd.group_name == "CG"
    assert cd.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert cd.message_model is MessageModel.CLUSTERING
    assert cd.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert cd.unit_mode is False
    sub, retry = cd.subscription_data_set
    assert sub.tags_set == ("TagA", "TagB")
    assert sub.code_set == (2598919, 2598920)  # recomputed, not the C++ zeros
    assert sub.sub_version == 1690000000123
    assert sub.expression_type == "TAG"
    assert not sub.is_all
    assert retry.is_all and retry.tags_set == () and retry.code_set == ()


def test_ons_heartbeat() -> None:
    hb = HeartbeatData.decode(ONS_HEARTBEAT)
    assert [p.group_name for p in hb.producer_data_set] == ["PG", "CLIENT_INNER_PRODUCER"]
    (cd,) = hb.consumer_data_set
    assert cd.message_model is MessageModel.BROADCASTING
    assert cd.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    (sub,) = cd.subscription_data_set
    assert sub == SubscriptionData("T", "TagA", ("TagA",), (2598919,), 1690000000999)


def test_heartbeat_reencode_is_java_shape() -> None:
    hb = HeartbeatData.decode(CPP_HEARTBEAT)
    out = json.loads(hb.encode())
    assert list(out) == ["clientID", "consumerDataSet", "producerDataSet"]
    cd = out["consumerDataSet"][0]
    assert cd["consumeType"] == "CONSUME_PASSIVELY"
    assert cd["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
    assert list(cd["subscriptionDataSet"][0]) == [
        "classFilterMode",
        "codeSet",
        "expressionType",
        "subString",
        "subVersion",
        "tagsSet",
        "topic",
    ]
    assert HeartbeatData.decode(hb.encode()) == hb


def test_heartbeat_tolerates_missing_fields_and_garbage_codes() -> None:
    hb = HeartbeatData.decode(
        b'{"clientID":"c","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T",'
        b'"tagsSet":["x"],"codeSet":"garbage"}]}]}'
    )
    (cd,) = hb.consumer_data_set
    assert cd.consume_type is ConsumeType.CONSUME_PASSIVELY  # Java defaults when absent
    (sub,) = cd.subscription_data_set
    assert sub.sub_string == "x" and sub.code_set == (120,)  # from tagsSet when subString is absent
    assert sub.sub_version == 0


def test_sql92_subscription() -> None:
    sub = SubscriptionData.from_json(
        {"topic": "T", "subString": "a > 5", "expressionType": "SQL92", "tagsSet": ["a"]}
    )
    assert sub.expression_type == "SQL92"
    assert sub.tags_set == () and sub.code_set == ()
    assert not sub.is_all


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"consumerDataSet":[]}', "clientID"),
        (b'{"clientID":""}', "clientID"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":7}]}', "consumeType"),
        (
            b'{"clientID":"c","consumerDataSet":[{"groupName":"G","messageModel":"SOMETIMES"}]}',
            "messageModel",
        ),
        (b'{"clientID":"c","consumerDataSet":[{"consumeType":1}]}', "groupName"),
        (b'{"clientID":"c","consumerDataSet":{}}', "consumerDataSet"),
        (
            b'{"clientID":"c","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T","subVersion":"abc"}]}]}',
            "subVersion",
        ),
        (
            b'{"clientID":"c","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T","expressionType":"XPATH"}]}]}',
            "expressionType",
        ),
        (b"[1]", "heartbeatData"),
        (b"\x00\x01", "heartbeatData"),
    ],
)
def test_heartbeat_errors_name_the_field(body: bytes, field: str) -> None:
    with pytest.raises(BodyFormatError) as info:
        HeartbeatData.decode(body)
    assert info.value.field == field


def test_split_tags_and_build() -> None:
    assert split_tags("*") == () and split_tags(None) == () and split_tags("  ") == ()
    assert split_tags(" a ||b|| a || ") == ("a", "b")
    sub = SubscriptionData.build("T", "")
    assert sub.sub_string == "*" and sub.is_all
    assert SubscriptionData.build("T", "TagA").code_set == (2598919,)
    # Java hashes UTF-16 code units with int32 wrap-around
    h = 0
    for unit in memoryview("标签\U0001f600".encode("utf-16-be")).cast("B").tobytes().hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    expected = h - (1 << 32) if h & 0x80000000 else h
    assert SubscriptionData.build("T", "标签\U0001f600").code_set == (expected,)


def test_message_queue() -> None:
    mq = MessageQueue("T", "broker-a", 3)
    assert mq.to_json() == {"brokerName": "broker-a", "queueId": 3, "topic": "T"}
    assert MessageQueue.from_json(mq.to_json()) == mq
    assert MessageQueue.from_json(mq_key("T", "broker-a", 3)) == mq
    assert MessageQueue.from_json('{"brokerName":"broker-a","queueId":"3","topic":"T"}') == mq
    assert (
        sorted([MessageQueue("T", "b", 1), MessageQueue("T", "a", 2), MessageQueue("S", "z", 0)])[0].topic
        == "S"
    )
    with pytest.raises(BodyFormatError):
        MessageQueue.from_json({"topic": "T", "brokerName": "b", "queueId": -1})


def test_lock_bodies() -> None:
    req = LockBatchRequestBody(
        "CG", "ip@pid", [MessageQueue("T", "broker-a", 1), MessageQueue("T", "broker-a", 0)]
    )
    assert req.encode() == (
        b'{"clientId":"ip@pid","consumerGroup":"CG","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"},'
        b'{"brokerName":"broker-a","queueId":1,"topic":"T"}]}'
    )
    assert set(LockBatchRequestBody.decode(req.encode()).mq_set) == set(req.mq_set)
    # C++ writes mqSet entries with keys in its own order and may repeat one
    cpp = b'{"consumerGroup":"CG","clientId":"x","mqSet":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"T","brokerName":"b","queueId":0}]}'
    unlock = UnlockBatchRequestBody.decode(cpp)
    assert isinstance(unlock, UnlockBatchRequestBody)
    assert unlock.mq_set == [MessageQueue("T", "b", 0)]
    resp = LockBatchResponseBody([MessageQueue("T", "b", 0)])
    assert resp.encode() == b'{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"T"}]}'
    assert LockBatchResponseBody.decode(resp.encode()) == resp


def test_consumer_list_and_group_list() -> None:
    body = GetConsumerListByGroupResponseBody(["10.0.0.5@1", "10.0.0.6@2"])
    assert body.encode() == b'{"consumerIdList":["10.0.0.5@1","10.0.0.6@2"]}'
    assert GetConsumerListByGroupResponseBody.decode(body.encode()) == body
    assert GroupList(["b", "a", "b"]).encode() == b'{"groupList":["a","b"]}'
    assert GroupList.decode(b'{"groupList":["a"]}') == GroupList(["a"])


def test_topic_stats_table_object_keys() -> None:
    table = TopicStatsTable({MessageQueue("T", "b", 0): TopicOffset(0, 10, 1700)})
    data = table.encode()
    assert data == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:'
        b'{"lastUpdateTimestamp":1700,"maxOffset":10,"minOffset":0}}}'
    )
    assert TopicStatsTable.decode(data) == table


def test_consume_stats() -> None:
    stats = ConsumeStats(
        {
            MessageQueue("T", "b", 1): OffsetWrapper(10, 4, 5),
            MessageQueue("T", "b", 0): OffsetWrapper(3, 3, 0),
        },
        1.5,
    )
    data = stats.encode()
    assert data.startswith(b'{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:')
    back = ConsumeStats.decode(data)
    assert back == stats
    assert back.compute_total_diff() == 6
    assert ConsumeStats.decode(b'{"offsetTable":{}}').consume_tps == 0.0


def test_reset_offset_both_forms() -> None:
    body = ResetOffsetBody({MessageQueue("T", "b", 1): 42, MessageQueue("T", "b", 0): 7})
    java = body.encode()
    assert java == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:7,{"brokerName":"b","queueId":1,"topic":"T"}:42}}'
    )
    cpp = body.encode_for_c()
    assert json.loads(cpp) == {
        "offsetTable": [
            {"brokerName": "b", "offset": 7, "queueId": 0, "topic": "T"},
            {"brokerName": "b", "offset": 42, "queueId": 1, "topic": "T"},
        ]
    }
    assert ResetOffsetBody.decode(java) == body
    assert ResetOffsetBody.decode(cpp) == body
    with pytest.raises(BodyFormatError):
        ResetOffsetBody.decode(b'{"offsetTable":[{"brokerName":"b","queueId":0,"topic":"T"}]}')


def test_connections() -> None:
    cc = ConsumerConnection(
        [Connection("ip@1", "10.0.0.5:5555", "CPP", 333)],
        {"T": SubscriptionData.build("T", "*", sub_version=5)},
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    )
    out = json.loads(cc.encode())
    assert list(out) == [
        "connectionSet",
        "consumeFromWhere",
        "consumeType",
        "messageModel",
        "subscriptionTable",
    ]
    assert out["connectionSet"] == [
        {"clientAddr": "10.0.0.5:5555", "clientId": "ip@1", "language": "CPP", "version": 333}
    ]
    assert ConsumerConnection.decode(cc.encode()) == cc
    pc = ProducerConnection([Connection("ip@2", "10.0.0.6:1", "JAVA", 409)])
    assert ProducerConnection.decode(pc.encode()) == pc


def test_subscription_group_config_defaults_and_wrapper() -> None:
    cfg = SubscriptionGroupConfig("CG")
    assert cfg.to_json() == {
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "groupName": "CG",
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }
    assert SubscriptionGroupConfig.decode(b'{"groupName":"CG"}') == cfg
    assert SubscriptionGroupConfig.decode(
        b'{"groupName":"CG","retryMaxTimes":"3","consumeEnable":"false"}'
    ) == (SubscriptionGroupConfig("CG", consume_enable=False, retry_max_times=3))
    wrapper = SubscriptionGroupWrapper({"CG": cfg}, DataVersion(5, 1))
    back = SubscriptionGroupWrapper.decode(wrapper.encode(pretty=True))
    assert back == wrapper
    # 5.x files carry extra fields; the map key supplies a missing groupName
    back = SubscriptionGroupWrapper.decode(
        b'{"subscriptionGroupTable":{"G":{"groupSysFlag":0,"attributes":{}}}}'
    )
    assert back.subscription_group_table["G"] == SubscriptionGroupConfig("G")
    with pytest.raises(BodyFormatError):
        SubscriptionGroupConfig.decode(b'{"groupName":"CG","retryQueueNums":-2}')


def test_consumer_offset_file_shape() -> None:
    java_file = b'{\n\t"offsetTable":{\n\t\t"T@CG":{0:12,1:7\n\t\t},\n\t\t"%RETRY%CG@CG":{0:0}\n\t}\n}'
    table = ConsumerOffsetTable.decode(java_file)
    assert table.offset_table == {"T@CG": {0: 12, 1: 7}, "%RETRY%CG@CG": {0: 0}}
    out = table.encode()
    assert b'"T@CG":{\n\t\t\t0:12,\n\t\t\t1:7\n\t\t}' in out  # bare int keys like Java
    assert ConsumerOffsetTable.decode(out) == table
    quoted = table.encode(quote_int_keys=True, pretty=False)
    assert json.loads(quoted) == {"offsetTable": {"%RETRY%CG@CG": {"0": 0}, "T@CG": {"0": 12, "1": 7}}}
    assert ConsumerOffsetTable.decode(quoted) == table
    with pytest.raises(BodyFormatError):
        ConsumerOffsetTable.decode(b'{"offsetTable":{"T@G":{"x":1}}}')


def test_delay_offset_file_shape() -> None:
    table = DelayOffsetTable.decode(b'{"offsetTable":{1:0,2:17}}')
    assert table.offset_table == {1: 0, 2: 17}
    assert table.encode(pretty=False) == b'{"offsetTable":{1:0,2:17}}'
    assert DelayOffsetTable.decode(table.encode()) == table


def test_consumer_running_info_is_loose() -> None:
    text = (
        b'{"jstack":"...","mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"commitOffset":5,"locked":false}},'
        b'"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","x":1},"statusTable":{"T":{"pullTPS":1.5}},'
        b'"subscriptionSet":[{"topic":"T","subString":"*","subVersion":1}]}'
    )
    info = ConsumerRunningInfo.decode(text)
    assert info.mq_table == {MessageQueue("T", "b", 0): {"commitOffset": 5, "locked": False}}
    assert info.properties["x"] == "1"
    assert info.status_table == {"T": {"pullTPS": 1.5}}
    assert info.subscription_set[0].is_all
    assert ConsumerRunningInfo.decode(info.encode()) == info


def test_producer_and_consumer_data_roundtrip() -> None:
    cd = ConsumerData(
        "CG",
        ConsumeType.CONSUME_ACTIVELY,
        MessageModel.BROADCASTING,
        ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
        (SubscriptionData.build("T", "a||b", sub_version=3),),
        True,
    )
    assert ConsumerData.from_json(json.loads(fastjson.dumps(cd.to_json()))) == cd
    assert ProducerData.from_json({"groupName": "PG"}) == ProducerData("PG")
