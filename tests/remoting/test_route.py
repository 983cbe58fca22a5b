from __future__ import annotations

import json
import struct
import zlib

import pytest

from pocketmq.remoting.protocol import route
from pocketmq.remoting.protocol.fastjson import BodyFormatError
from pocketmq.remoting.protocol.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    KVTable,
    PermName,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    TopicList,
    TopicRouteData,
    TopicSysFlag,
)

ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
    broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})],
    filter_server_table={},
)

GOLDEN_QUOTED = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
    b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
GOLDEN_BARE = GOLDEN_QUOTED.replace(b'"0":', b"0:").replace(b'"1":', b"1:")


def test_route_golden_quoted_form_is_standard_json() -> None:
    assert ROUTE.encode() == GOLDEN_QUOTED
    assert ROUTE.encode(standard_json=True) == GOLDEN_QUOTED
    parsed = json.loads(GOLDEN_QUOTED)
    assert parsed["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}


def test_route_golden_bare_int_key_form() -> None:
    assert ROUTE.encode(standard_json=False) == GOLDEN_BARE
    with pytest.raises(ValueError):
        json.loads(GOLDEN_BARE)


@pytest.mark.parametrize("data", [GOLDEN_QUOTED, GOLDEN_BARE])
def test_route_decodes_both_forms(data: bytes) -> None:
    assert TopicRouteData.decode(data) == ROUTE


def test_order_topic_conf_and_filter_servers() -> None:
    r = TopicRouteData(
        ROUTE.queue_datas, ROUTE.broker_datas, {"10.0.0.1:10911": ["10.0.0.1:3000"]}, "broker-a:4"
    )
    text = r.encode()
    assert (
        text.index(b'"filterServerTable"')
        < text.index(b'"orderTopicConf":"broker-a:4"')
        < text.index(b'"queueDatas"')
    )
    assert TopicRouteData.decode(text) == r
    assert route.order_topic_conf_queues("broker-a:4;broker-b:8;bad;:3;x:y") == [
        ("broker-a", 4),
        ("broker-b", 8),
    ]


def test_route_decoder_is_tolerant() -> None:
    # a pre-4.9 Java namesrv: topicSynFlag, numbers as strings, no filterServerTable, extra 5.x fields
    text = (
        '{"brokerDatas":[{"brokerAddrs":{0:"a:1"},"brokerName":"b","cluster":"c","enableActingMaster":false,'
        '"zoneName":"z"}],"queueDatas":[{"brokerName":"b","perm":"6","readQueueNums":"8","topicSynFlag":2,'
        '"writeQueueNums":8}],"topicQueueMappingByBroker":{}}'
    )
    r = TopicRouteData.decode(text)
    assert r.queue_datas == [QueueData("b", 8, 8, 6, 2)]
    assert r.broker_datas[0].broker_addrs == {0: "a:1"}
    assert r.filter_server_table == {}
    assert r.order_topic_conf is None


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"queueDatas":[{"perm":6}],"brokerDatas":[]}', "brokerName"),
        ('{"queueDatas":[{"brokerName":"b","readQueueNums":-1}]}', "readQueueNums"),
        ('{"queueDatas":[{"brokerName":"b","readQueueNums":"many"}]}', "readQueueNums"),
        ('{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"x":"a:1"}}]}', "brokerAddrs"),
        ('{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"0":5}}]}', "brokerAddrs"),
        ('{"queueDatas":{}}', "queueDatas"),
        ("[]", "topicRouteData"),
        ("{", "topicRouteData"),
    ],
)
def test_route_decoder_names_the_bad_field(text: str, field: str) -> None:
    with pytest.raises(BodyFormatError) as info:
        TopicRouteData.decode(text)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


def test_cluster_info_shapes() -> None:
    ci = ClusterInfo(
        {"broker-a": BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"})},
        {"DefaultCluster": ["broker-b", "broker-a"]},
    )
    assert ci.encode(standard_json=False) == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a","broker-b"]}}'
    )
    for form in (ci.encode(), ci.encode(standard_json=False)):
        back = ClusterInfo.decode(form)
        assert back.broker_addr_table == ci.broker_addr_table
        assert back.cluster_addr_table == {"DefaultCluster": ["broker-a", "broker-b"]}


def test_topic_list_and_kv_table() -> None:
    assert TopicList(["b", "a", "b"]).encode() == b'{"topicList":["b","a"]}'
    tl = TopicList(["DefaultCluster", "broker-a"], "10.0.0.1:10911")
    assert tl.encode() == b'{"brokerAddr":"10.0.0.1:10911","topicList":["DefaultCluster","broker-a"]}'
    assert TopicList.decode(tl.encode()) == tl
    kv = KVTable({"T": "broker-a:4"})
    assert kv.encode() == b'{"table":{"T":"broker-a:4"}}'
    assert KVTable.decode(b'{"table":{"n":1}}') == KVTable({"n": "1"})


def test_topic_config_json_and_text_forms() -> None:
    tc = TopicConfig("TopicTest", 8, 4, 6, TopicFilterType.MULTI_TAG, 1, True)
    assert tc.to_json() == {
        "order": True,
        "perm": 6,
        "readQueueNums": 8,
        "topicFilterType": "MULTI_TAG",
        "topicName": "TopicTest",
        "topicSysFlag": 1,
        "writeQueueNums": 4,
    }
    assert tc.encode() == "TopicTest 8 4 6 MULTI_TAG"
    back = TopicConfig.decode(tc.encode())
    assert back == TopicConfig(
        "TopicTest", 8, 4, 6, TopicFilterType.MULTI_TAG
    )  # text form drops sysFlag/order
    assert TopicConfig.from_json({"topicName": "x"}) == TopicConfig("x")  # Java defaults 16/16/6
    for bad in (
        "a 1 2 3",
        "a 1 2 3 SINGLE_TAG extra",
        "a x 2 3 SINGLE_TAG",
        "a 1 2 3 NO_TAG",
        " 1 2 3 SINGLE_TAG",
    ):
        with pytest.raises(BodyFormatError):
            TopicConfig.decode(bad)


def test_data_version() -> None:
    dv = DataVersion(1_700_000_000_000, 3)
    assert dv.encode() == b'{"counter":3,"timestamp":1700000000000}'
    assert DataVersion.decode(dv.encode()) == dv
    assert dv.next_version(1_700_000_000_500) == DataVersion(1_700_000_000_500, 4)
    assert DataVersion(1, 2) != DataVersion(1, 3)
    assert DataVersion.decode(b'{"counter":"7","timestamp":"9","stateVersion":0}') == DataVersion(9, 7)


def _wrapper() -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        {"TopicTest": TopicConfig("TopicTest", 4, 4), "TBW102": TopicConfig("TBW102", 8, 8, 7)},
        DataVersion(1_700_000_000_000, 5),
    )


def test_register_body_plain_form() -> None:
    body = RegisterBrokerBody(_wrapper(), [])
    data = body.encode()
    assert data.startswith(
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":5,'
    )
    assert RegisterBrokerBody.decode(data) == body


def test_register_body_bare_wrapper_for_old_versions() -> None:
    data = _wrapper().encode()
    decoded = RegisterBrokerBody.decode(data)
    assert decoded.topic_config_serialize_wrapper == _wrapper()
    assert decoded.filter_server_list == []


def test_register_body_compressed_roundtrip_and_layout() -> None:
    body = RegisterBrokerBody(_wrapper(), ["10.0.0.1:3000"])
    data = body.encode(compress=True)
    raw = zlib.decompress(data)
    (n,) = struct.unpack_from(">i", raw, 0)
    assert raw[4 : 4 + n] == b'{"counter":5,"timestamp":1700000000000}'
    (count,) = struct.unpack_from(">i", raw, 4 + n)
    assert count == 2
    assert b"TopicTest 4 4 6 SINGLE_TAG" in raw
    assert raw.endswith(b'["10.0.0.1:3000"]')
    assert RegisterBrokerBody.decode(data, compressed=True) == body


def _compressed(*chunks: bytes) -> bytes:
    return zlib.compress(b"".join(chunks))


def _chunk(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


@pytest.mark.parametrize(
    "data",
    [
        b"not zlib at all",
        zlib.compress(b'{"counter":1}')[:-4],  # truncated stream
        _compressed(_chunk(b'{"counter":1,"timestamp":2}')),  # no topic count
        _compressed(_chunk(b'{"counter":1,"timestamp":2}'), struct.pack(">i", -1)),
        _compressed(_chunk(b'{"counter":1,"timestamp":2}'), struct.pack(">i", 2_000_000)),
        _compressed(_chunk(b'{"counter":1,"timestamp":2}'), struct.pack(">i", 1), struct.pack(">i", 999)),
        _compressed(_chunk(b'{"counter":1,"timestamp":2}'), struct.pack(">i", 1), _chunk(b"x 1")),
        _compressed(_chunk(b'{"counter":1,"timestamp":2}'), struct.pack(">i", 0), _chunk(b"{}")),
        _compressed(_chunk(b"garbage")),
    ],
)
def test_register_body_compressed_garbage(data: bytes) -> None:
    with pytest.raises(BodyFormatError):
        RegisterBrokerBody.decode(data, compressed=True)


def test_register_body_zip_bomb_is_refused() -> None:
    bomb = zlib.compress(b"\0" * (4 * 1024 * 1024))
    with pytest.raises(BodyFormatError, match="inflates beyond"):
        RegisterBrokerBody.decode(bomb, compressed=True, max_inflated=1024 * 1024)


def test_perm_and_sys_flags() -> None:
    assert PermName.DEFAULT == 6
    assert PermName.is_readable(6) and PermName.is_writeable(6) and not PermName.is_inherited(6)
    assert PermName.is_inherited(7) and PermName.is_priority(8)
    assert PermName.perm_to_string(7) == "RWX"
    assert PermName.perm_to_string(4) == "R--"
    assert 6 & ~PermName.PERM_WRITE == 4
    assert TopicSysFlag.build(True, True) == 3
    assert TopicSysFlag.has_unit_flag(1) and not TopicSysFlag.has_unit_sub_flag(1)


def test_constants_and_topic_validation() -> None:
    assert route.DEFAULT_TOPIC == "TBW102"
    assert route.MASTER_ID == 0
    assert route.retry_topic("G") == "%RETRY%G" and route.is_retry_topic("%RETRY%G")
    assert route.dlq_topic("G") == "%DLQ%G" and route.is_dlq_topic("%DLQ%G")
    assert route.reply_topic("DefaultCluster") == "DefaultCluster_REPLY_TOPIC"
    assert route.is_system_topic("SCHEDULE_TOPIC_XXXX") and route.is_system_topic("rmq_sys_anything")
    assert not route.is_system_topic("TopicTest")
    assert route.is_not_allowed_send_topic("RMQ_SYS_TRANS_HALF_TOPIC")
    assert not route.is_not_allowed_send_topic("TBW102")
    assert route.is_sys_consumer_group("CID_RMQ_SYS_TRANS")
    assert route.topic_error("TopicTest") is None
    assert route.topic_error("%RETRY%group|x-y_z") is None
    assert route.topic_error("") == "The specified topic is blank."
    assert route.topic_error("   ") == "The specified topic is blank."
    assert route.topic_error("a b") is not None and "illegal characters" in (route.topic_error("a b") or "")
    assert route.topic_error("a\n") is not None  # $ must not match before a newline
    assert route.topic_error("é") is not None
    assert route.topic_error("x" * 127) is None
    assert route.topic_error("x" * 128) == "The specified topic is longer than topic max length."
    assert route.group_error("CG") is None
    assert route.group_error("x" * 256) is not None
    assert route.group_error("a.b") is not None


def test_wants_standard_json() -> None:
    assert route.wants_standard_json(401)
    assert route.wants_standard_json(409)
    assert not route.wants_standard_json(400)
    assert not route.wants_standard_json(333)  # C++
    assert not route.wants_standard_json(121)  # ali-ons
    assert route.wants_standard_json(121, True)


def test_broker_data_helpers() -> None:
    bd = BrokerData("c", "b", {2: "s2:1", 1: "s1:1"})
    assert bd.master_addr is None
    assert bd.select_broker_addr() in ("s1:1", "s2:1")
    assert bd.first_addr() == "s1:1"
    bd.broker_addrs[0] = "m:1"
    assert bd.select_broker_addr() == "m:1" == bd.master_addr
    copy = bd.copy()
    copy.broker_addrs.clear()
    assert bd.broker_addrs
    assert BrokerData("c", "b").select_broker_addr() is None


def test_select_broker_addr_is_rocketmq_rule() -> None:
    # master when present; otherwise a random slave (Java BrokerData.selectBrokerAddr)
    assert BrokerData("c", "b", {0: "m:1", 1: "s1:1"}).select_broker_addr() == "m:1"
    slaves = BrokerData("c", "b", {1: "s1:1", 2: "s2:1", 3: "s3:1"})
    picked = {slaves.select_broker_addr() for _ in range(200)}
    assert picked == {"s1:1", "s2:1", "s3:1"}
    # the deterministic pick, for callers that need one (namesrv's system topic list)
    assert slaves.first_addr() == "s1:1"
    assert BrokerData("c", "b", {2: "s2:1", 0: "m:1"}).first_addr() == "m:1"
    assert BrokerData("c", "b").first_addr() is None


def test_schedule_v2_topic_is_not_sendable() -> None:
    # the client's own copy of this set used to lack SCHEDULE_TOPIC_XXXX_V2
    assert "SCHEDULE_TOPIC_XXXX_V2" in route.NOT_ALLOWED_SEND_TOPICS


def test_register_body_bomb_is_refused_at_a_bound_proportional_to_its_size() -> None:
    # issue 23: a 64 KB body inflating to 64 MiB was inflated in full (to the 256 MiB cap for a
    # 250 KB one) before being refused; now the bound is 64x the compressed size, checked per step
    import tracemalloc

    bomb = zlib.compress(b"\0" * (64 * 1024 * 1024), 9)
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(BodyFormatError, match="inflates beyond"):
            RegisterBrokerBody.decode(bomb, compressed=True)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024


def test_register_body_of_a_large_real_topic_table_still_inflates() -> None:
    table = {f"topic_{i:06d}": TopicConfig(f"topic_{i:06d}", 8, 8, 6) for i in range(20_000)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion())).encode(compress=True)
    decoded = RegisterBrokerBody.decode(body, compressed=True)
    assert decoded.topic_config_serialize_wrapper.topic_config_table.keys() == table.keys()
