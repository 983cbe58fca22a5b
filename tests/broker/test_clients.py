"""HEART_BEAT, consumer lists, NOTIFY_CONSUMER_IDS_CHANGED, offsets and offset queries over the wire."""

from __future__ import annotations

import asyncio
import json

from pocketmq.broker.controller import BrokerController
from pocketmq.remoting.common.clock import FakeClock
from pocketmq.remoting.protocol.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.route import TopicConfig
from tests.broker.helpers import Wire, broker_config

# What librocketmq 2.x sends: enums as ints, subVersion as string, garbage codeSet, no producer set.
CPP_HEARTBEAT = {
    "clientID": "10.0.0.5@1234#cpp",
    "consumerDataSet": [
        {
            "consumeFromWhere": 0,
            "consumeType": 1,
            "groupName": "CppGroup",
            "messageModel": 1,
            "subscriptionDataSet": [
                {
                    "codeSet": [0],
                    "subString": "TagA || TagB",
                    "subVersion": "1700000000123",
                    "tagsSet": ["TagA", "TagB"],
                    "topic": "CT",
                }
            ],
        }
    ],
}


async def consumer_ids(wire: Wire, group: str) -> list[str] | int:
    r = await wire.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if r.code != ResponseCode.SUCCESS:
        return r.code
    return json.loads(r.body)["consumerIdList"]


async def test_cpp_heartbeat_is_accepted_and_codes_recomputed(broker, wire):
    w = Wire(broker.broker_addr, language=LanguageCode.CPP, version=333)
    try:
        r = await w.call(RequestCode.HEART_BEAT, None, json.dumps(CPP_HEARTBEAT).encode())
        assert r.code == ResponseCode.SUCCESS, r.remark
        cgi = broker.consumer_manager.get_consumer_group_info("CppGroup")
        sub = cgi.find_subscription_data("CT")
        assert sub.code_set == (2598919, 2598920) and sub.sub_version == 1700000000123
        assert broker.topic_config_manager.select_topic_config("%RETRY%CppGroup").write_queue_nums == 1
        assert await consumer_ids(wire, "CppGroup") == ["10.0.0.5@1234#cpp"]
    finally:
        await w.close()


async def test_bad_heartbeat_is_system_error_and_broker_keeps_serving(wire):
    r = await wire.call(RequestCode.HEART_BEAT, None, b"{not json")
    assert r.code == ResponseCode.SYSTEM_ERROR
    r = await wire.call(
        RequestCode.HEART_BEAT,
        None,
        b'{"clientID":"x","consumerDataSet":[{"groupName":"G","consumeType":"NOPE"}]}',
    )
    assert r.code == ResponseCode.SYSTEM_ERROR and "consumeType" in r.remark
    assert (await wire.heartbeat("ok", producer_group="PG")).code == ResponseCode.SUCCESS


async def test_consumer_list_notify_and_unregister(broker):
    notified: list[str] = []
    a, b = Wire(broker.broker_addr), Wire(broker.broker_addr)
    a.client.register(
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        lambda conn, req: notified.append(req.ext_fields["consumerGroup"]),
    )
    try:
        assert await consumer_ids(a, "G") == ResponseCode.SYSTEM_ERROR
        await a.heartbeat("client-a", consumer_group="G", topics={"T": "*"})
        assert notified == ["G"]  # joining notifies the group (itself included)
        await b.heartbeat("client-b", consumer_group="G", topics={"T": "*"})
        await asyncio.sleep(0.05)
        assert notified == ["G", "G"] and await consumer_ids(a, "G") == ["client-a", "client-b"]
        await a.heartbeat("client-a", consumer_group="G", topics={"T": "*"})
        await asyncio.sleep(0.05)
        assert len(notified) == 2  # a refresh changes nothing
        r = await b.call(RequestCode.UNREGISTER_CLIENT, {"clientID": "client-b", "consumerGroup": "G"})
        assert r.code == ResponseCode.SUCCESS
        await asyncio.sleep(0.05)
        assert len(notified) == 3 and await consumer_ids(a, "G") == ["client-a"]
        await b.heartbeat("client-b", consumer_group="G", topics={"T": "*"})
        await b.close()  # a closed connection leaves the group at once
        for _ in range(100):
            if await consumer_ids(a, "G") == ["client-a"]:
                break
            await asyncio.sleep(0.01)
        assert await consumer_ids(a, "G") == ["client-a"]
    finally:
        await a.close()
        await b.close()


async def test_query_offset_young_queue_rule_and_updates(broker, wire):
    broker.topic_config_manager.update_topic_config(TopicConfig("OT", 2, 2))
    q = {"consumerGroup": "NewGroup", "topic": "OT", "queueId": "0"}
    r = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")  # empty queue → 0
    await wire.send("OT", b"x")
    for _ in range(100):
        if broker.store.get_max_offset_in_queue("OT", 0):
            break
        await asyncio.sleep(0.005)
    r = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")  # young queue → 0
    r = await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "1"})
    assert r.code == ResponseCode.SUCCESS
    r = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert r.ext_fields["offset"] == "1"


async def test_query_offset_not_found_when_queue_was_cleaned(broker, wire):
    broker.topic_config_manager.update_topic_config(TopicConfig("Old", 1, 1))
    # Pretend the queue's head was deleted: min offset > 0.
    broker.store.get_min_offset_in_queue = lambda topic, qid: 5
    r = await wire.call(
        RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Old", "queueId": "0"}
    )
    assert r.code == ResponseCode.QUERY_NOT_FOUND


async def test_max_min_search_and_earliest(broker, wire):
    broker.topic_config_manager.update_topic_config(TopicConfig("MT", 1, 1))
    for i in range(3):
        await wire.send("MT", str(i).encode())
    for _ in range(100):
        if broker.store.get_max_offset_in_queue("MT", 0) == 3:
            break
        await asyncio.sleep(0.005)
    q = {"topic": "MT", "queueId": "0"}
    assert (await wire.call(RequestCode.GET_MAX_OFFSET, q)).ext_fields["offset"] == "3"
    assert (await wire.call(RequestCode.GET_MIN_OFFSET, q)).ext_fields["offset"] == "0"
    r = await wire.call(RequestCode.GET_EARLIEST_MSG_STORETIME, q)
    earliest = int(r.ext_fields["timestamp"])
    assert earliest > 1_600_000_000_000
    r = await wire.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": str(earliest)})
    assert r.ext_fields["offset"] == "0"
    r = await wire.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": str(earliest + 10**9)})
    assert r.ext_fields["offset"] == "3"
    unknown = {"topic": "Nope", "queueId": "0"}
    assert (await wire.call(RequestCode.GET_MAX_OFFSET, unknown)).ext_fields["offset"] == "0"


async def test_lock_and_unlock_batch(wire):
    mqs = [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)]
    r = await wire.call(RequestCode.LOCK_BATCH_MQ, None, LockBatchRequestBody("G", "c1", mqs).encode())
    assert LockBatchResponseBody.decode(r.body).lock_ok_mq_set == mqs
    r = await wire.call(RequestCode.LOCK_BATCH_MQ, None, LockBatchRequestBody("G", "c2", mqs).encode())
    assert LockBatchResponseBody.decode(r.body).lock_ok_mq_set == []
    r = await wire.call(RequestCode.UNLOCK_BATCH_MQ, None, LockBatchRequestBody("G", "c1", mqs[:1]).encode())
    assert r.code == ResponseCode.SUCCESS
    r = await wire.call(RequestCode.LOCK_BATCH_MQ, None, LockBatchRequestBody("G", "c2", mqs).encode())
    assert LockBatchResponseBody.decode(r.body).lock_ok_mq_set == mqs[:1]


async def test_check_client_config(wire):
    body = json.dumps({"clientId": "c", "group": "G", "subscriptionData": {"topic": "T", "subString": "*"}})
    assert (await wire.call(RequestCode.CHECK_CLIENT_CONFIG, None, body.encode())).code == 0
    sql = json.dumps(
        {
            "clientId": "c",
            "group": "G",
            "subscriptionData": {"topic": "T", "subString": "a>1", "expressionType": "SQL92"},
        }
    )
    r = await wire.call(RequestCode.CHECK_CLIENT_CONFIG, None, sql.encode())
    assert r.code == ResponseCode.SYSTEM_ERROR and "SQL92" in r.remark


async def test_silent_channels_expire_after_120s_and_the_group_is_told(tmp_path):
    clock = FakeClock()
    b = BrokerController(broker_config(str(tmp_path)), clock=clock, fsync=False)
    await b.start()
    silent, alive = Wire(b.broker_addr), Wire(b.broker_addr)
    notified: list[str] = []
    alive.client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, lambda conn, req: notified.append("x"))
    try:
        await silent.heartbeat("silent", consumer_group="G", topics={"T": "*"}, producer_group="P")
        clock.advance(60)
        await alive.heartbeat("alive", consumer_group="G", topics={"T": "*"})
        clock.advance(61)  # silent: 121 s without a heartbeat; alive: 61 s
        await b._scan_clients()
        assert b.consumer_manager.get_consumer_group_info("G").client_ids() == ["alive"]
        assert b.producer_manager.get_channels("P") == []
        for _ in range(100):
            if len(notified) >= 2:
                break
            await asyncio.sleep(0.01)
        assert len(notified) == 2  # its own join, then the eviction of "silent"
    finally:
        await silent.close()
        await alive.close()
        await b.shutdown()
