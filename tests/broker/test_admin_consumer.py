"""Consume stats, time spans, offset resets and calls forwarded to consumers (real broker, real sockets)."""

from __future__ import annotations

import asyncio
import json

import pytest

from pocketmq.broker.stats import BrokerStatsManager
from pocketmq.remoting.common.clock import FakeClock
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.bodies import (
    ConsumerRunningInfo,
    ConsumeStats,
    MessageQueue,
    OffsetWrapper,
    ResetOffsetBody,
    mq_key,
)
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import java_string_hash
from pocketmq.remoting.protocol.route import TopicConfig
from tests.broker.helpers import Wire

BROKER = "broker-a"


def mq(topic: str, qid: int) -> MessageQueue:
    return MessageQueue(topic, BROKER, qid)


async def commit(wire: Wire, group: str, topic: str, qid: int, offset: int) -> None:
    r = await wire.call(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": str(qid), "commitOffset": str(offset)},
    )
    assert r.code == ResponseCode.SUCCESS


async def fill(broker, wire: Wire, topic: str, counts: dict[int, int], read: int = 4, write: int = 4, **kw):
    broker.topic_config_manager.update_topic_config(TopicConfig(topic, read, write, **kw))
    ids = {}
    for qid, n in counts.items():
        for i in range(n):
            r = await wire.send(topic, f"{topic}-{qid}-{i}".encode(), queue_id=qid, tags=f"tag{i % 2}")
            assert r.code == ResponseCode.SUCCESS
            ids[(qid, i)] = r.ext_fields["msgId"]
    broker.store.do_reput()
    return ids


# --------------------------------------------------------------------------------- consume stats


async def test_consume_stats_per_read_queue_with_tps(broker, wire):
    await fill(broker, wire, "CS", {0: 3, 1: 1}, read=2, write=3)
    await commit(wire, "G", "CS", 0, 2)
    clock = FakeClock(wall_ms=1_700_000_000_000)
    # the send/pull paths feed the controller's stats manager; this one runs on a fake clock
    stats = BrokerStatsManager("DefaultCluster", clock.now_ms)
    broker.use_stats(stats)
    for _ in range(20):  # the pull path reports 5 messages a second
        stats.on_get("G", "CS", 5, 500)
        clock.advance(1)
    r = await wire.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G", "topic": "CS"})
    assert r.code == ResponseCode.SUCCESS
    cs = ConsumeStats.decode(r.body)
    ts1 = broker.store.get_message_store_timestamp("CS", 0, 1)
    assert cs.offset_table == {mq("CS", 0): OffsetWrapper(3, 2, ts1), mq("CS", 1): OffsetWrapper(1, 0, 0)}
    assert cs.consume_tps == pytest.approx(5.0)
    assert cs.compute_total_diff() == 2
    # no topic: every topic the group has offsets for; unknown topics are skipped
    await commit(wire, "G", "NoConfig", 0, 1)
    r = await wire.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G"})
    assert set(ConsumeStats.decode(r.body).offset_table) == {mq("CS", 0), mq("CS", 1)}
    r = await wire.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "Nobody", "topic": "Nope"})
    assert (r.code, ConsumeStats.decode(r.body).offset_table) == (ResponseCode.SUCCESS, {})
    r = await wire.call(RequestCode.GET_CONSUME_STATS, {"topic": "CS"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "consumerGroup" in r.remark


async def test_consume_stats_skip_topics_an_online_group_does_not_subscribe(broker, wire):
    await fill(broker, wire, "Sub", {0: 1})
    await fill(broker, wire, "NotSub", {0: 1})
    await commit(wire, "G", "Sub", 0, 1)
    await commit(wire, "G", "NotSub", 0, 0)
    consumer = Wire(broker.broker_addr)
    try:
        await consumer.heartbeat("c1", consumer_group="G", topics={"Sub": "*"})
        r = await wire.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "G"})
        assert {m.topic for m in ConsumeStats.decode(r.body).offset_table} == {"Sub"}
    finally:
        await consumer.close()


async def test_broker_consume_stats_for_every_group(broker, wire):
    await fill(broker, wire, "Plain", {0: 4}, read=1, write=2)
    await fill(broker, wire, "Ordered", {0: 2}, read=1, write=1, order=True)
    for group in ("G1", "G2"):
        broker.subscription_group_manager.find_subscription_group_config(group)
    await commit(wire, "G1", "Plain", 0, 1)
    await commit(wire, "G2", "Ordered", 0, 2)
    r = await wire.call(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert r.code == ResponseCode.SUCCESS
    obj = fastjson.decode_object(r.body, "ConsumeStatsList")
    assert obj["brokerAddr"] == broker.broker_addr
    assert obj["totalDiff"] == 3  # Plain q0: 4-1, q1: 0-0; Ordered: 2-2
    per_group = {g: lst for entry in obj["consumeStatsList"] for g, lst in entry.items()}
    assert per_group["TOOLS_CONSUMER"] == []
    (plain,) = per_group["G1"]
    table = plain["offsetTable"]
    assert set(table) == {mq_key("Plain", BROKER, 0), mq_key("Plain", BROKER, 1)}  # write queues
    assert table[mq_key("Plain", BROKER, 0)]["brokerOffset"] == 4
    r = await wire.call(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
    obj = fastjson.decode_object(r.body, "ConsumeStatsList")
    per_group = {g: lst for entry in obj["consumeStatsList"] for g, lst in entry.items()}
    assert per_group["G1"] == [] and len(per_group["G2"]) == 1 and obj["totalDiff"] == 0


async def test_query_consume_time_span(broker, wire):
    await fill(broker, wire, "Span", {0: 3}, read=1, write=2)
    await commit(wire, "G", "Span", 0, 1)
    store = broker.store
    r = await wire.call(RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": "Span", "group": "G"})
    assert r.code == ResponseCode.SUCCESS
    spans = json.loads(r.body)["consumeTimeSpanSet"]
    assert [s["messageQueue"] for s in spans] == [mq("Span", 0).to_json(), mq("Span", 1).to_json()]
    s0, s1 = spans
    assert s0["minTimeStamp"] == store.get_message_store_timestamp("Span", 0, 0)
    assert s0["maxTimeStamp"] == store.get_message_store_timestamp("Span", 0, 2)
    assert s0["consumeTimeStamp"] == store.get_message_store_timestamp("Span", 0, 0)
    assert s0["delayTime"] >= 0
    assert (s1["minTimeStamp"], s1["maxTimeStamp"], s1["delayTime"]) == (-1, -1, 0)
    r = await wire.call(RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": "Nope", "group": "G"})
    assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")


async def test_query_correction_offset(broker, wire):
    await fill(broker, wire, "Corr", {0: 1}, read=3, write=3)
    await commit(wire, "A", "Corr", 0, 5)
    await commit(wire, "A", "Corr", 1, 9)
    await commit(wire, "B", "Corr", 0, 3)
    await commit(wire, "B", "Corr", 1, 12)
    await commit(wire, "Cmp", "Corr", 0, 4)
    await commit(wire, "Cmp", "Corr", 1, 1)
    ext = {"compareGroup": "Cmp", "topic": "Corr", "filterGroups": "Cmp"}
    r = await wire.call(RequestCode.QUERY_CORRECTION_OFFSET, ext)
    assert r.code == ResponseCode.SUCCESS
    # min over A and B: q0=3, q1=9; Cmp is behind on q1 (1 < 9) -> Long.MAX_VALUE
    assert json.loads(r.body) == {"correctionOffsets": {"0": 3, "1": 2**63 - 1}}
    # without B: min over A is q0=5, q1=9, and Cmp (4, 1) is behind on both
    r = await wire.call(RequestCode.QUERY_CORRECTION_OFFSET, {**ext, "filterGroups": "Cmp,B"})
    assert json.loads(r.body) == {"correctionOffsets": {"0": 2**63 - 1, "1": 2**63 - 1}}
    r = await wire.call(
        RequestCode.QUERY_CORRECTION_OFFSET, {**ext, "compareGroup": "Nobody", "filterGroups": ""}
    )
    assert json.loads(r.body) == {"correctionOffsets": {"0": 3, "1": 1}}
    assert broker.consumer_offset_manager.query_offset("B", "Corr", 0) == 3  # filters never delete


# ------------------------------------------------------------------------------------ reset


class Consumer:
    """A consumer connection that records what the broker pushes to it."""

    def __init__(self, addr: str, client_id: str, language: int = LanguageCode.JAVA, version: int = 409):
        self.wire = Wire(addr, language=language, version=version)
        self.client_id = client_id
        self.pushed: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.wire.client.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._record)

    def _record(self, conn, request: RemotingCommand) -> None:
        self.pushed.put_nowait(request)

    async def join(self, group: str, topic: str) -> None:
        assert (
            await self.wire.heartbeat(self.client_id, consumer_group=group, topics={topic: "*"})
        ).code == 0

    async def next_push(self) -> RemotingCommand:
        return await asyncio.wait_for(self.pushed.get(), 5)


async def test_reset_offset_by_time_pushes_to_java_and_cpp_consumers(broker, wire):
    await fill(broker, wire, "R", {0: 5}, read=2, write=2)
    await commit(wire, "G", "R", 0, 5)
    await commit(wire, "G", "R", 1, 0)
    java = Consumer(broker.broker_addr, "java@1")
    cpp = Consumer(broker.broker_addr, "cpp@2", LanguageCode.CPP, 333)
    try:
        await java.join("G", "R")
        await cpp.join("G", "R")
        ts2 = broker.store.get_message_store_timestamp("R", 0, 2)
        ext = {"topic": "R", "group": "G", "timestamp": str(ts2), "isForce": "false"}
        r = await wire.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
        assert r.code == ResponseCode.SUCCESS
        # offset 2 (first stored at ts2) is below the committed 5; queue 1 stays at 0
        first = broker.store.get_offset_in_queue_by_time("R", 0, ts2)
        expected = {mq("R", 0): first, mq("R", 1): 0}
        assert first <= 2
        assert ResetOffsetBody.decode(r.body).offset_table == expected
        assert broker.consumer_offset_manager.query_offsets("G", "R") == {0: first, 1: 0}

        push = await java.next_push()
        assert push.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET and push.is_oneway
        assert (push.ext_fields["topic"], push.ext_fields["group"]) == ("R", "G")
        assert push.ext_fields["timestamp"] == str(ts2)
        assert b'{{"brokerName":"broker-a","queueId":0,"topic":"R"}:' in push.body  # fastjson MQ keys
        assert ResetOffsetBody.decode(push.body).offset_table == expected
        push = await cpp.next_push()
        assert json.loads(push.body) == {  # ResetOffsetBodyForC: a plain list
            "offsetTable": [
                {"brokerName": BROKER, "offset": first, "queueId": 0, "topic": "R"},
                {"brokerName": BROKER, "offset": 0, "queueId": 1, "topic": "R"},
            ]
        }

        # -1 = the max offset: larger than committed, so only taken with isForce
        r = await wire.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**ext, "timestamp": "-1"})
        assert ResetOffsetBody.decode(r.body).offset_table[mq("R", 0)] == first
        r = await wire.call(
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**ext, "timestamp": "-1", "isForce": "true"}
        )
        assert ResetOffsetBody.decode(r.body).offset_table == {mq("R", 0): 5, mq("R", 1): 0}
        assert broker.consumer_offset_manager.query_offset("G", "R", 0) == 5
    finally:
        await java.wire.close()
        await cpp.wire.close()


async def test_reset_offset_for_queues_never_committed(broker, wire):
    await fill(broker, wire, "P", {0: 3, 1: 2}, read=3, write=3)
    await commit(wire, "G", "P", 0, 3)  # queues 1 and 2 never committed
    ext = {"topic": "P", "group": "G", "timestamp": "-1", "isForce": "false"}
    r = await wire.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
    assert r.code == ResponseCode.CONSUMER_NOT_ONLINE  # nobody to tell: as Java, nothing changes
    assert broker.consumer_offset_manager.query_offsets("G", "P") == {0: 3}


async def test_reset_offset_errors(broker, wire):
    await fill(broker, wire, "R", {0: 2}, read=1, write=1)
    ext = {"topic": "R", "group": "G", "timestamp": "-1", "isForce": "true"}
    r = await wire.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**ext, "topic": "Nope"})
    assert (r.code, r.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "[reset-offset] reset offset failed, no topic in this broker. topic=Nope",
    )
    r = await wire.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <G> not exist")
    await commit(wire, "G", "R", 0, 0)
    r = await wire.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
    assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert r.remark == "Consumer not online, so can not reset offset, Group: G Topic: R Timestamp: -1"
    assert broker.consumer_offset_manager.query_offset("G", "R", 0) == 0  # unchanged, as Java
    r = await wire.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**ext, "timestamp": "soon"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "timestamp" in r.remark


# ------------------------------------------------------------------------ calls to a consumer


async def test_running_info_is_forwarded_to_the_client(broker, wire):
    consumer = Consumer(broker.broker_addr, "c@1")
    seen: list[RemotingCommand] = []
    info = ConsumerRunningInfo(properties={"PROP_CLIENT_VERSION": "V4_9_8"}, jstack="stack")

    def on_running_info(conn, request: RemotingCommand) -> RemotingCommand:
        seen.append(request)
        return RemotingCommand.response_to(request, body=info.encode())

    consumer.wire.client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, on_running_info)
    try:
        await consumer.join("G", "T")
        ext = {"consumerGroup": "G", "clientId": "c@1", "jstackEnable": "true"}
        r = await wire.call(RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        assert (r.code, r.body) == (ResponseCode.SUCCESS, info.encode())
        assert ConsumerRunningInfo.decode(r.body).properties == {"PROP_CLIENT_VERSION": "V4_9_8"}
        assert seen[0].ext_fields == ext
        r = await wire.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {**ext, "clientId": "other"})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <G> <other> not online")
        r = await wire.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {**ext, "consumerGroup": "H"})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <H> <c@1> not online")
    finally:
        await consumer.wire.close()


async def test_forwarded_call_timeout_and_client_errors(broker, wire):
    broker.admin_processors["ConsumerAdmin"].call_client_timeout = 0.3
    silent = Consumer(broker.broker_addr, "silent@1")
    failing = Consumer(broker.broker_addr, "failing@2")
    old = Consumer(broker.broker_addr, "old@3", version=50)
    silent.wire.client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, lambda conn, req: None)
    failing.wire.client.register(
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        lambda conn, req: RemotingCommand.response_to(
            req, ResponseCode.SYSTEM_ERROR, "The Consumer Group <G> not exist in this consumer"
        ),
    )
    try:
        for c in (silent, failing, old):
            await c.join("G", "T")
        ext = {"consumerGroup": "G", "clientId": "silent@1", "jstackEnable": "false"}
        r = await wire.call(RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        assert r.code == ResponseCode.CONSUME_MSG_TIMEOUT
        assert r.remark.startswith("consumer <G> <silent@1> Timeout:")
        r = await wire.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {**ext, "clientId": "failing@2"})
        assert (r.code, r.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "The Consumer Group <G> not exist in this consumer",
        )
        r = await wire.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {**ext, "clientId": "old@3"})
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark == (
            "The Consumer <old@3> Version <V3_1_2_SNAPSHOT> too low to finish, please upgrade it to V3_1_8_SNAPSHOT"
        )
    finally:
        for c in (silent, failing, old):
            await c.wire.close()


async def test_consume_message_directly_sends_the_message_to_the_client(broker, wire):
    ids = await fill(broker, wire, "D", {0: 2})
    consumer = Consumer(broker.broker_addr, "c@1")
    got: list[RemotingCommand] = []

    def on_consume(conn, request: RemotingCommand) -> RemotingCommand:
        got.append(request)
        result = {"autoCommit": True, "consumeResult": "CR_SUCCESS", "order": False, "spentTimeMills": 1}
        return RemotingCommand.response_to(request, body=json.dumps(result).encode())

    consumer.wire.client.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, on_consume)
    try:
        await consumer.join("G", "D")
        ext = {"consumerGroup": "G", "clientId": "c@1", "msgId": ids[(0, 1)]}
        r = await wire.call(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
        assert r.code == ResponseCode.SUCCESS and json.loads(r.body)["consumeResult"] == "CR_SUCCESS"
        (req,) = got
        assert req.ext_fields == {**ext, "brokerName": BROKER}
        from pocketmq.remoting.protocol.message import decode_message

        msg = decode_message(req.body)
        assert (msg.topic, msg.body, msg.msg_id) == ("D", b"D-0-1", ids[(0, 1)])
        r = await wire.call(RequestCode.CONSUME_MESSAGE_DIRECTLY, {**ext, "msgId": "zz"})
        assert r.code == ResponseCode.SYSTEM_ERROR and "bad msgId" in r.remark
        far = ids[(0, 1)][:16] + "%016X" % (10**9)
        r = await wire.call(RequestCode.CONSUME_MESSAGE_DIRECTLY, {**ext, "msgId": far})
        assert (r.code, r.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"can not find message by the offset, {10**9}",
        )
    finally:
        await consumer.wire.close()


# ------------------------------------------------------------------------------ consume queue


async def test_query_consume_queue_units(broker, wire):
    await fill(broker, wire, "Q", {0: 3})
    store = broker.store
    ext = {"topic": "Q", "queueId": "0", "index": "1", "count": "5"}
    r = await wire.call(RequestCode.QUERY_CONSUME_QUEUE, ext)
    assert r.code == ResponseCode.SUCCESS
    body = json.loads(r.body)
    assert (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 3)
    assert "subscriptionData" not in body and "filterData" not in body
    units = body["queueData"]
    assert [u["physicOffset"] for u in units] == [
        store.get_commit_log_offset_in_queue("Q", 0, i) for i in (1, 2)
    ]
    assert [u["tagsCode"] for u in units] == [java_string_hash("tag1"), java_string_hash("tag0")]
    assert all(u["physicSize"] > 0 and u["eval"] is False for u in units)

    consumer = Wire(broker.broker_addr)
    try:
        await consumer.heartbeat("c1", consumer_group="G", topics={"Q": "tag1"})
        body = json.loads(
            (await wire.call(RequestCode.QUERY_CONSUME_QUEUE, {**ext, "consumerGroup": "G"})).body
        )
        assert body["subscriptionData"]["subString"] == "tag1" and body["filterData"] == "null"
    finally:
        await consumer.close()
    body = json.loads(
        (await wire.call(RequestCode.QUERY_CONSUME_QUEUE, {**ext, "consumerGroup": "Off"})).body
    )
    assert body["filterData"] == "Off@Q is not online!"

    r = await wire.call(RequestCode.QUERY_CONSUME_QUEUE, {**ext, "index": "3"})
    assert (r.code, r.remark, r.body) == (ResponseCode.SUCCESS, "Index 3 of 0@Q is not exist!", None)
    r = await wire.call(RequestCode.QUERY_CONSUME_QUEUE, {**ext, "queueId": "7"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "7@Q is not exist!")
    r = await wire.call(RequestCode.QUERY_CONSUME_QUEUE, {**ext, "count": "x"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "count" in r.remark
