"""Topic admin requests against a real in-process broker (and name server where registration matters)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from pocketmq.broker.processor.admin_base import SLAVE_REMARK
from pocketmq.broker.processor.admin_topic import GET_TOPIC_CONFIG
from pocketmq.remoting.protocol.bodies import GroupList, MessageQueue, TopicStatsTable
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.route import TopicConfigSerializeWrapper, TopicList, TopicRouteData
from pocketmq.testing import cluster
from tests.broker.helpers import Wire, broker_and_wire

CONFLICT = "The topic[{}] is conflict with system topic."


def read_text(*parts: str) -> str:
    with open(os.path.join(*parts), encoding="utf-8") as f:
        return f.read()


def read_json(*parts: str):
    return json.loads(read_text(*parts))


def is_dir(path: str) -> bool:
    return os.path.isdir(path)


def create_ext(topic: str, read: int = 4, write: int = 4, perm: int = 6, **extra: str) -> dict[str, str]:
    ext = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(read),
        "writeQueueNums": str(write),
        "perm": str(perm),
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    ext.update(extra)
    return ext


async def create(wire: Wire, topic: str, **kw):
    return await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create_ext(topic, **kw))


async def test_create_update_persist_and_read_back(broker, wire):
    r = await create(wire, "Orders", read=3, write=5, perm=4, order="true", topicFilterType="MULTI_TAG")
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    # topics.json is on disk (atomically written) before the reply
    saved = read_json(broker.config.config_dir, "topics.json")["topicConfigTable"]["Orders"]
    assert saved == {
        "order": True,
        "perm": 4,
        "readQueueNums": 3,
        "topicFilterType": "MULTI_TAG",
        "topicName": "Orders",
        "topicSysFlag": 0,
        "writeQueueNums": 5,
    }
    r = await wire.call(RequestCode.GET_ALL_TOPIC_CONFIG)
    wrapper = TopicConfigSerializeWrapper.decode(r.body)
    assert wrapper.topic_config_table["Orders"].write_queue_nums == 5
    assert "TBW102" in wrapper.topic_config_table
    v1 = wrapper.data_version
    # update replaces the whole config and bumps the data version
    assert (await create(wire, "Orders", read=8, write=8)).code == ResponseCode.SUCCESS
    r = await wire.call(GET_TOPIC_CONFIG, {"topic": "Orders"})
    assert r.code == ResponseCode.SUCCESS
    assert json.loads(r.body) == {
        "order": False,
        "perm": 6,
        "readQueueNums": 8,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "Orders",
        "topicSysFlag": 0,
        "writeQueueNums": 8,
    }
    v2 = TopicConfigSerializeWrapper.decode(
        (await wire.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body
    ).data_version
    assert v2.counter > v1.counter
    r = await wire.call(GET_TOPIC_CONFIG, {"topic": "Nope"})
    assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "No topic in this broker. topic: Nope")


@pytest.mark.parametrize(
    ("ext", "remark"),
    [
        (create_ext(""), "The specified topic is blank."),
        (
            create_ext("bad topic!"),
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        ),
        (create_ext("x" * 128), "The specified topic is longer than topic max length."),
        (create_ext("TBW102"), CONFLICT.format("TBW102")),
        (create_ext("SCHEDULE_TOPIC_XXXX"), CONFLICT.format("SCHEDULE_TOPIC_XXXX")),
        (create_ext("rmq_sys_anything"), CONFLICT.format("rmq_sys_anything")),
        (create_ext("DefaultCluster"), CONFLICT.format("DefaultCluster")),
        (create_ext("broker-a"), CONFLICT.format("broker-a")),
        (create_ext("T", read=-1), "readQueueNums -1 is out of range [0, 65535]"),
        (create_ext("T", perm=99), "perm 99 is not a PermName bit set (0-15)"),
        (
            create_ext("T", topicFilterType="BOTH"),
            "No enum constant TopicFilterType.BOTH (SINGLE_TAG or MULTI_TAG)",
        ),
    ],
)
async def test_create_rejects_bad_topics_with_java_remarks(broker, wire, ext, remark):
    r = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark)
    assert broker.topic_config_manager.select_topic_config("T") is None


async def test_create_with_garbage_header_fields(broker, wire):
    ext = create_ext("T")
    del ext["readQueueNums"]
    r = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert r.code == ResponseCode.SYSTEM_ERROR and "readQueueNums" in r.remark
    r = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create_ext("T", perm="six"))
    assert r.code == ResponseCode.SYSTEM_ERROR and "perm" in r.remark
    # the server keeps serving
    assert (await create(wire, "T")).code == ResponseCode.SUCCESS


async def test_create_registers_with_the_name_server_before_replying(tmp_path):
    async with cluster(tmp_path / "c") as c:
        broker = Wire(c.brokers[0].broker_addr)
        ns = Wire(c.namesrv_addr)
        try:
            assert (await ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Fresh"})).code == 17
            assert (await create(broker, "Fresh", read=2, write=3)).code == ResponseCode.SUCCESS
            r = await ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Fresh"})
            assert r.code == ResponseCode.SUCCESS
            (qd,) = TopicRouteData.decode(r.body).queue_datas
            assert (qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm) == ("broker-a", 2, 3, 6)
        finally:
            await broker.close()
            await ns.close()


async def test_slave_refuses_topic_and_group_mutations(tmp_path):
    async with broker_and_wire(str(tmp_path / "s"), store={"brokerRole": "SLAVE"}, brokerId=1) as (b, w):
        for code, ext, body in [
            (RequestCode.UPDATE_AND_CREATE_TOPIC, create_ext("T"), None),
            (RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T"}, None),
            (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, b'{"groupName":"G"}'),
            (RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G"}, None),
        ]:
            r = await w.call(code, ext, body)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK), code
        assert (await w.call(RequestCode.GET_ALL_TOPIC_CONFIG)).code == ResponseCode.SUCCESS


async def test_delete_topic_removes_config_offsets_and_queue_files(broker, wire):
    assert (await create(wire, "Gone")).code == 0
    assert (await create(wire, "Kept")).code == 0
    for topic in ("Gone", "Kept"):
        assert (await wire.send(topic, b"x")).code == ResponseCode.SUCCESS
        r = await wire.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": topic, "queueId": "0", "commitOffset": "1"},
        )
        assert r.code == ResponseCode.SUCCESS
    broker.store.do_reput()
    cq_dir = os.path.join(broker.config.store.store_path_root_dir, "consumequeue", "Gone")
    assert is_dir(cq_dir)

    r = await wire.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Gone"})
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    assert broker.topic_config_manager.select_topic_config("Gone") is None
    assert broker.consumer_offset_manager.query_offset("G", "Gone", 0) == -1
    assert broker.consumer_offset_manager.query_offset("G", "Kept", 0) == 1
    assert not is_dir(cq_dir)
    assert broker.store.get_max_offset_in_queue("Kept", 0) == 1
    saved = read_json(broker.config.config_dir, "topics.json")
    assert "Gone" not in saved["topicConfigTable"] and "Kept" in saved["topicConfigTable"]
    assert (await wire.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Gone"})).code == 17
    # deleting an unknown topic is not an error (Java only logs)
    assert (await wire.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Gone"})).code == 0
    r = await wire.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SELF_TEST_TOPIC"})
    assert (r.code, r.remark) == (1, CONFLICT.format("SELF_TEST_TOPIC"))
    r = await wire.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "a/b"})
    assert r.code == 1 and "illegal characters" in r.remark
    r = await wire.call(RequestCode.DELETE_TOPIC_IN_BROKER, {})
    assert r.code == 1 and "topic" in r.remark


async def test_topic_stats_info_per_write_queue(broker, wire):
    assert (await create(wire, "Stats", read=2, write=3)).code == 0
    for qid, n in ((0, 3), (1, 2)):
        for i in range(n):
            assert (await wire.send("Stats", f"{qid}-{i}".encode(), queue_id=qid)).code == 0
    broker.store.do_reput()
    r = await wire.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Stats"})
    assert r.code == ResponseCode.SUCCESS
    table = TopicStatsTable.decode(r.body).offset_table
    assert sorted(table) == [MessageQueue("Stats", "broker-a", q) for q in range(3)]
    q0 = table[MessageQueue("Stats", "broker-a", 0)]
    assert (q0.min_offset, q0.max_offset) == (0, 3)
    assert q0.last_update_timestamp == broker.store.get_message_store_timestamp("Stats", 0, 2) > 0
    assert table[MessageQueue("Stats", "broker-a", 1)].max_offset == 2
    q2 = table[MessageQueue("Stats", "broker-a", 2)]
    assert (q2.min_offset, q2.max_offset, q2.last_update_timestamp) == (0, 0, 0)
    # the body uses fastjson's object-as-key form that Java tools map back to MessageQueue
    assert b'{{"brokerName":"broker-a","queueId":0,"topic":"Stats"}:' in r.body
    r = await wire.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
    assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")


async def test_system_topic_list_and_who_consumes(broker, wire):
    r = await wire.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    topics = set(TopicList.decode(r.body).topic_list)
    assert {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "DefaultCluster",
        "broker-a",
    } <= topics
    assert "Orders" not in topics
    assert (await create(wire, "Orders")).code == 0
    consumer = Wire(broker.broker_addr)
    try:
        assert (await consumer.heartbeat("c1", consumer_group="Online", topics={"Orders": "*"})).code == 0
        await wire.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "Offline", "topic": "Orders", "queueId": "1", "commitOffset": "0"},
        )
        r = await wire.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Orders"})
        assert GroupList.decode(r.body).group_list == ["Offline", "Online"]
        r = await wire.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Nobody"})
        assert (r.code, GroupList.decode(r.body).group_list) == (0, [])
    finally:
        await consumer.close()


async def test_clean_unused_topic_drops_queues_of_unconfigured_topics(broker, wire):
    for topic in ("Orphan", "Live"):
        assert (await create(wire, topic)).code == 0
        assert (await wire.send(topic, b"x")).code == 0
    broker.store.do_reput()
    # the config disappears while its queues stay (e.g. topics.json edited by hand)
    broker.topic_config_manager.delete_topic_config("Orphan")
    assert broker.store.cq_table.find("Orphan", 0) is not None
    r = await wire.call(RequestCode.CLEAN_UNUSED_TOPIC)
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    assert broker.store.cq_table.find("Orphan", 0) is None
    assert broker.store.get_max_offset_in_queue("Live", 0) == 1


async def test_delete_expired_commitlog_then_clean_expired_consume_queues(tmp_path):
    store = {
        "fileReservedTime": 0,  # every full segment is expired
        "cleanResourceInterval": 3_600_000,  # no periodic round during the test: only the trigger
        "diskSpaceWarningLevelRatio": 1.0,  # keep accepting puts on a crowded CI disk
        "diskSpaceCleanForciblyRatio": 1.0,
    }
    async with broker_and_wire(str(tmp_path / "s"), store=store) as (b, w):
        for i in range(2):
            assert (await w.send("Early", f"e{i}".encode())).code == 0
        big = b"b" * 100_000
        for _ in range(12):  # > 1 MiB: the CommitLog rolls to a second segment
            assert (await w.send("Bulk", big)).code == 0
        b.store.do_reput()
        assert len(b.store.commitlog.mfq.files) == 2 and b.store.get_min_phy_offset() == 0

        r = await w.call(RequestCode.DELETE_EXPIRED_COMMITLOG)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        for _ in range(200):
            if b.store.get_min_phy_offset() > 0:
                break
            await asyncio.sleep(0.025)
        assert b.store.get_min_phy_offset() == 1 << 20

        assert b.store.get_max_offset_in_queue("Early", 0) == 2
        r = await w.call(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        # Early's messages lived in the deleted segment only: its queue starts over at 0
        assert b.store.get_max_offset_in_queue("Early", 0) == 0
        assert b.store.get_max_offset_in_queue("Bulk", 0) == 12
        r = await w.send("Early", b"again")
        assert r.code == 0 and r.ext_fields["queueOffset"] == "0"
