"""Orderly-consumption locks (LOCK/UNLOCK_BATCH_MQ), the automatic %RETRY% subscription, order
topics, and committed offsets that must not be overwritten by ali-ons' ``-1``."""

from __future__ import annotations

import asyncio
import json

from pocketmq.remoting.protocol.bodies import (
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from tests.broker.helpers import Wire, broker_and_wire, pull_until


async def lock(wire: Wire, group: str, client: str, mqs: list[MessageQueue]) -> list[MessageQueue]:
    r = await wire.call(RequestCode.LOCK_BATCH_MQ, None, LockBatchRequestBody(group, client, mqs).encode())
    assert r.code == ResponseCode.SUCCESS, r.remark
    return LockBatchResponseBody.decode(r.body).lock_ok_mq_set


async def unlock(wire: Wire, group: str, client: str, mqs: list[MessageQueue]) -> None:
    body = LockBatchRequestBody(group, client, mqs).encode()
    r = await wire.call(RequestCode.UNLOCK_BATCH_MQ, None, body)
    assert r.code == ResponseCode.SUCCESS


MQS = [MessageQueue("Ord", "broker-a", i) for i in range(4)]


async def test_two_clients_never_hold_the_same_queue(broker, wire):
    assert await lock(wire, "OG", "c1", MQS[:2]) == MQS[:2]
    assert await lock(wire, "OG", "c2", MQS) == MQS[2:]  # only the free ones
    assert await lock(wire, "OG", "c1", MQS) == MQS[:2]  # renewal, nothing stolen
    await unlock(wire, "OG", "c2", MQS[:2])  # not the holder: no effect
    assert await lock(wire, "OG", "c2", MQS[:1]) == []
    await unlock(wire, "OG", "c1", MQS[:1])
    assert await lock(wire, "OG", "c2", MQS[:1]) == MQS[:1]
    # another group has its own table
    assert await lock(wire, "OtherGroup", "c3", MQS) == MQS
    holders = {mq: entry[0] for mq, entry in broker.rebalance_lock_manager.table["OG"].items()}
    assert holders == {MQS[0]: "c2", MQS[1]: "c1", MQS[2]: "c2", MQS[3]: "c2"}


async def test_locks_expire_unless_renewed(broker, wire):
    broker.rebalance_lock_manager.lock_max_live_ms = 400  # 60 s in production
    assert await lock(wire, "EG", "c1", MQS[:2]) == MQS[:2]
    await asyncio.sleep(0.25)
    assert await lock(wire, "EG", "c1", MQS[:1]) == MQS[:1]  # renews queue 0 only
    await asyncio.sleep(0.25)
    # queue 1 was last locked 0.5 s ago: expired; queue 0 0.25 s ago: still c1's
    assert await lock(wire, "EG", "c2", MQS[:2]) == MQS[1:2]


async def test_lock_bad_input_and_unknown_groups(tmp_path):
    async with broker_and_wire(str(tmp_path), autoCreateSubscriptionGroup=False) as (b, w):
        # RocketMQ 4.x checks no group on LOCK_BATCH_MQ: an unknown one is served
        assert await lock(w, "NeverSeen", "c1", MQS[:1]) == MQS[:1]
        assert await lock(w, "NeverSeen", "c1", []) == []
        for body in (b"garbage", b"[]", json.dumps({"clientId": "c"}).encode(), None):
            r = await w.call(RequestCode.LOCK_BATCH_MQ, None, body)
            assert r.code == ResponseCode.SYSTEM_ERROR and "lock body" in r.remark, body
            r = await w.call(RequestCode.UNLOCK_BATCH_MQ, None, body)
            assert r.code == ResponseCode.SYSTEM_ERROR and "unlock body" in r.remark, body
        assert await lock(w, "NeverSeen", "c2", MQS[:2]) == MQS[1:2]


async def test_clustering_push_consumers_get_the_retry_subscription(broker, wire):
    def heartbeat(group: str, model: MessageModel, subs: tuple[SubscriptionData, ...]) -> bytes:
        cd = ConsumerData(group, ConsumeType.CONSUME_PASSIVELY, model, subscription_data_set=subs)
        return HeartbeatData("cid-1", (), (cd,)).encode()

    sub = SubscriptionData.build("TopicA", "TagA", sub_version=77)
    r = await wire.call(RequestCode.HEART_BEAT, None, heartbeat("CG1", MessageModel.CLUSTERING, (sub,)))
    assert r.code == ResponseCode.SUCCESS
    cgi = broker.consumer_manager.get_consumer_group_info("CG1")
    assert cgi is not None and set(cgi.subscription_table) == {"TopicA", "%RETRY%CG1"}
    retry = cgi.subscription_table["%RETRY%CG1"]
    assert retry.sub_string == "*" and retry.sub_version == 77
    assert broker.consumer_manager.query_topic_consume_by_who("%RETRY%CG1") == {"CG1"}
    # broadcasting consumers have no retry topic (as Java's clients)
    r = await wire.call(RequestCode.HEART_BEAT, None, heartbeat("BG", MessageModel.BROADCASTING, (sub,)))
    cgi = broker.consumer_manager.get_consumer_group_info("BG")
    assert cgi is not None and set(cgi.subscription_table) == {"TopicA"}
    # a pull of the retry topic relying on the heartbeat subscription (Java, no SUBSCRIPTION flag)
    r = await wire.pull("%RETRY%CG1", 0, 0, group="CG1", sys_flag=0x0, sub_version=0)
    assert r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED), r.remark


async def test_minus_one_never_overwrites_a_committed_offset(broker, wire):
    def update(offset: int, queue_id: int = 0) -> dict[str, str]:
        return {"consumerGroup": "OnsG", "topic": "T", "queueId": str(queue_id), "commitOffset": str(offset)}

    def query(queue_id: int = 0) -> dict[str, str]:
        return {"consumerGroup": "OnsG", "topic": "T", "queueId": str(queue_id)}

    assert (await wire.send("T", b"m", queue_id=0)).code == ResponseCode.SUCCESS
    assert (await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, update(5))).code == ResponseCode.SUCCESS
    # ali-ons' 5 s commit of "offsetTable.get(key) || -1"
    r = await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, update(-1))
    assert r.code == ResponseCode.SUCCESS
    r = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET, query())
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "5")
    # -1 on a queue without an offset stores nothing: the young-queue rule still answers 0
    await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, update(-1, 1))
    assert broker.consumer_offset_manager.query_offsets("OnsG", "T") == {0: 5}
    r = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET, query(1))
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
    # a real offset 0 is stored and kept
    await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, update(0, 2))
    await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, update(-1, 2))
    assert broker.consumer_offset_manager.query_offsets("OnsG", "T") == {0: 5, 2: 0}


async def test_minus_one_in_a_java_offset_file_reads_as_no_offset(tmp_path):
    cfg = tmp_path / "config"
    cfg.mkdir()
    # a Java broker stores ali-ons' -1 as it comes
    (cfg / "consumerOffset.json").write_text('{"offsetTable":{"T@G":{0:-1,1:7}}}')
    async with broker_and_wire(str(tmp_path)) as (b, w):
        assert b.consumer_offset_manager.query_offset("G", "T", 0) == -1
        r = await w.call(
            RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T", "queueId": "1"}
        )
        assert r.ext_fields["offset"] == "7"


async def test_order_flag_is_kept_and_an_order_topic_refuses_sends_when_not_writable(tmp_path):
    async with broker_and_wire(str(tmp_path)) as (b, w):
        ext = {
            "topic": "OrdT", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
            "perm": "6", "topicFilterType": "SINGLE_TAG", "order": "true",
        }  # fmt: skip
        r = await w.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        assert r.code == ResponseCode.SUCCESS, r.remark
        tc = b.topic_config_manager.select_topic_config("OrdT")
        assert tc is not None and tc.order
        wrapper = b.topic_config_manager.build_wrapper()
        assert wrapper.topic_config_table["OrdT"].order  # what REGISTER_BROKER carries
        assert (await w.send("OrdT", b"in-order", queue_id=3)).code == ResponseCode.SUCCESS
        assert (await pull_until(w, "OrdT", 3))[0].body == b"in-order"
        b.update_config(b.config.with_updates({"brokerPermission": "4"}))
        r = await w.send("OrdT", b"x", queue_id=3)
        assert r.code == ResponseCode.NO_PERMISSION


async def test_unregistering_consumer_releases_its_locks_a_dropped_connection_does_not(broker):
    from pocketmq.remoting.protocol.headers import UnregisterClientRequestHeader

    w1, w2, w3 = Wire(broker.broker_addr), Wire(broker.broker_addr), Wire(broker.broker_addr)
    try:
        assert await lock(w1, "UG", "c1", MQS[:2]) == MQS[:2]
        assert await lock(w1, "OtherG", "c1", MQS[:1]) == MQS[:1]
        assert await lock(w2, "UG", "c2", MQS[2:]) == MQS[2:]
        # a clean shutdown: UNREGISTER_CLIENT for the group (C++ sends both groups, one empty)
        ext = UnregisterClientRequestHeader(
            client_id="c1", producer_group="", consumer_group="UG"
        ).to_ext_fields()
        r = await w1.call(RequestCode.UNREGISTER_CLIENT, ext)
        assert r.code == ResponseCode.SUCCESS
        assert await lock(w3, "UG", "c3", MQS[:2]) == MQS[:2]
        assert await lock(w3, "OtherG", "c3", MQS[:1]) == []  # only that group's locks went
        # c2's connection drops: its locks stay until they expire (it may still be consuming)
        await w2.close()
        await asyncio.sleep(0.1)
        assert await lock(w3, "UG", "c3", MQS[2:]) == []
    finally:
        for w in (w1, w2, w3):
            await w.close()
