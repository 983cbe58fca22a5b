"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE against a real in-process broker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from pocketmq.broker.processor.message_props import join_batch_properties, stored_properties, strip_property
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import (
    decode_messages,
    decode_offset_msg_id,
    encode_batch,
    properties_to_string,
)
from pocketmq.remoting.protocol.route import TopicConfig
from pocketmq.store import MessageInner
from tests.broker.helpers import Wire, broker_and_wire, running_broker, wait_query


async def pull_all(wire: Wire, topic: str, queue_id: int = 0, offset: int = 0) -> list:
    for _ in range(50):
        r = await wire.pull(topic, queue_id, offset, sys_flag=0x4)
        if r.code == ResponseCode.SUCCESS:
            return decode_messages(r.body)
        await asyncio.sleep(0.01)
    raise AssertionError("nothing to pull")


# ------------------------------------------------------------------------------- pure helpers


def test_strip_property_positions():
    assert strip_property("WAIT\x01true\x02KEYS\x01k", "WAIT") == ("KEYS\x01k", "true")
    assert strip_property("KEYS\x01k\x02WAIT\x01false", "WAIT") == ("KEYS\x01k", "false")
    assert strip_property("KEYS\x01k\x02WAIT\x01true\x02TAGS\x01t\x02", "WAIT") == (
        "KEYS\x01k\x02TAGS\x01t\x02",
        "true",
    )
    assert strip_property("KEYS\x01k", "WAIT") == ("KEYS\x01k", None)
    assert strip_property("XWAIT\x01a", "WAIT") == ("XWAIT\x01a", None)


def test_stored_properties_drop_wait_add_cluster():
    props, wait = stored_properties("KEYS\x01k\x02WAIT\x01false\x02TAGS\x01t\x02", "C1")
    assert props == "KEYS\x01k\x02TAGS\x01t\x02CLUSTER\x01C1"
    assert wait is False
    assert stored_properties(None, "C1") == ("CLUSTER\x01C1", True)
    assert stored_properties("CLUSTER\x01old\x02A\x01b", "C1") == ("A\x01b\x02CLUSTER\x01C1", True)


@pytest.mark.parametrize(
    ("props", "stored", "wait"),
    [
        ("WAIT\x01true\x02TAGS\x01t", "TAGS\x01t\x02CLUSTER\x01C", True),
        ("WAIT\x01TRUE", "CLUSTER\x01C", True),
        ("TAGS\x01t\x02WAIT\x01false", "TAGS\x01t\x02CLUSTER\x01C", False),
        ("A\x01b\x02WAIT\x01true\x02K\x01v\x02", "A\x01b\x02K\x01v\x02CLUSTER\x01C", True),
        # "WAIT\x01" first found inside another key: the real entry further on is the one cut
        ("XWAIT\x01a\x02WAIT\x01False\x02", "XWAIT\x01a\x02CLUSTER\x01C", False),
        ("XWAIT\x01a", "XWAIT\x01a\x02CLUSTER\x01C", True),
        ("WAIT\x01", "CLUSTER\x01C", False),
    ],
)
def test_stored_properties_wait_positions(props, stored, wait):
    assert stored_properties(props, "C") == (stored, wait)


def test_join_batch_properties_inserts_separator_once():
    assert join_batch_properties("a\x01b", "c\x01d") == "a\x01b\x02c\x01d"
    assert join_batch_properties("a\x01b\x02", "c\x01d") == "a\x01b\x02c\x01d"
    assert join_batch_properties("", "c\x01d") == "c\x01d"
    assert join_batch_properties("a\x01b", "") == "a\x01b"


# ------------------------------------------------------------------------------- happy paths


async def test_send_v1_and_v2_reply_fields_and_stored_record(broker, wire):
    r1 = await wire.send("TopicA", b"one", tags="TagA", keys="k1 k2", v2=False)
    r2 = await wire.send("TopicA", b"two", tags="TagB", props={"p": "v"})
    for r, off in ((r1, 0), (r2, 1)):
        assert r.code == ResponseCode.SUCCESS, r.remark
        ext = r.ext_fields
        assert ext["queueId"] == "0" and ext["queueOffset"] == str(off)
        assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
        ip, port, _ = decode_offset_msg_id(ext["msgId"])
        assert f"{ip}:{port}" == broker.broker_addr
    msgs = await pull_all(wire, "TopicA")
    assert [m.body for m in msgs] == [b"one", b"two"]
    assert msgs[0].properties == {"KEYS": "k1 k2", "TAGS": "TagA", "CLUSTER": "DefaultCluster"}
    assert msgs[1].properties == {"TAGS": "TagB", "p": "v", "CLUSTER": "DefaultCluster"}
    assert msgs[0].msg_id == r1.ext_fields["msgId"]
    assert msgs[0].born_host[0] == "127.0.0.1"


async def test_auto_created_topic_takes_min_of_client_and_template_queues(broker, wire):
    r = await wire.send("Auto1", b"x", defaultTopicQueueNums="4")
    assert r.code == ResponseCode.SUCCESS
    tc = broker.topic_config_manager.select_topic_config("Auto1")
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (4, 4, 6)
    r = await wire.send("Auto2", b"x", defaultTopicQueueNums="64")
    tc = broker.topic_config_manager.select_topic_config("Auto2")
    assert tc.write_queue_nums == 8  # TBW102 has defaultTopicQueueNums=8


async def test_negative_queue_id_picks_a_writable_queue(broker, wire):
    broker.topic_config_manager.update_topic_config(TopicConfig("Q8", 8, 8))
    seen = set()
    for _ in range(40):
        r = await wire.send("Q8", b"x", queue_id=-1)
        assert r.code == ResponseCode.SUCCESS
        seen.add(int(r.ext_fields["queueId"]))
    assert seen <= set(range(8)) and len(seen) > 1


async def test_batch_by_code_and_by_flag(broker, wire):
    body = encode_batch([(0, b"b0", {"KEYS": "x0", "UNIQ_KEY": "U0"}), (1, b"b1", "TAGS\x01t1\x02")])
    header = {
        "a": "PG", "b": "Batch", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0",
        "i": properties_to_string({"WAIT": "true", "hp": "hv"}), "m": "true",
    }  # fmt: skip
    r = await wire.call(RequestCode.SEND_BATCH_MESSAGE, header, body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert len(r.ext_fields["msgId"].split(",")) == 2 and r.ext_fields["queueOffset"] == "0"
    # The C++ client's form: code 310 with m=true.
    r = await wire.call(RequestCode.SEND_MESSAGE_V2, header, body)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "2"
    msgs = await pull_all(wire, "Batch")
    assert [m.body for m in msgs] == [b"b0", b"b1", b"b0", b"b1"]
    assert [m.flag for m in msgs[:2]] == [0, 1]
    assert msgs[0].properties == {"KEYS": "x0", "UNIQ_KEY": "U0", "hp": "hv", "CLUSTER": "DefaultCluster"}
    assert msgs[1].properties == {"TAGS": "t1", "hp": "hv", "CLUSTER": "DefaultCluster"}
    assert [m.queue_offset for m in msgs] == [0, 1, 2, 3]


async def test_sync_flush_waits_and_replies(tmp_path):
    async with broker_and_wire(str(tmp_path), store={"flushDiskType": "SYNC_FLUSH"}) as (b, w):
        r = await w.send("Sync", b"durable")
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "0"
        r = await w.send("Sync", b"nowait", props={"WAIT": "false"})
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "1"


async def test_sync_flush_sends_are_counted_once_in_the_put_stats(tmp_path):
    """A SYNC_FLUSH send's reply is rendered (and its put counted) when it is put, then sent
    once flushed: each single send and batch counts once, a batch's messages all."""
    async with broker_and_wire(str(tmp_path), store={"flushDiskType": "SYNC_FLUSH"}) as (b, w):
        for i in range(3):
            r = await w.send("SyncStats", b"s%d" % i)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == f"{i}"
        body = encode_batch([(0, b"b%d" % k, "TAGS\x01t") for k in range(4)])
        hdr = {"a": "PG", "b": "SyncStats", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1",
               "h": "0", "i": "WAIT\x01true", "m": "true"}  # fmt: skip
        r = await w.call(RequestCode.SEND_MESSAGE_V2, hdr, body)
        assert r.code == ResponseCode.SUCCESS and len(r.ext_fields["msgId"].split(",")) == 4
        counts = b.broker_stats_manager.topic_put["SyncStats"]
        assert (counts.times, counts.extra) == (4, 3)


async def test_sync_flush_answers_concurrent_sends_once_flushed(tmp_path):
    """Many sends in flight share group-commit rounds; each is answered once its bytes are flushed."""
    async with running_broker(str(tmp_path), store={"flushDiskType": "SYNC_FLUSH"}) as b:
        # the per-round reply path is the one exercised: the store offers a round future
        probe = b.store.flush_waiter(b.store.put_message(MessageInner("SyncProbe", b"p")))
        assert probe is not None and await probe
        w = Wire(b.broker_addr)
        mfq = b.store.commitlog.mfq
        try:

            async def single(i: int) -> tuple[int, int, int]:
                r = await w.send("SyncMany", b"m%03d" % i, queue_id=i % 2)
                assert r.code == ResponseCode.SUCCESS, r.remark
                # the reply came after the flush: the record's offset is below the flushed position
                *_, phy = decode_offset_msg_id(r.ext_fields["msgId"])
                return int(r.ext_fields["queueId"]), int(r.ext_fields["queueOffset"]), phy

            async def batch(i: int) -> list[int]:
                body = encode_batch([(0, b"b%03d-%d" % (i, k), "TAGS\x01t") for k in range(3)])
                hdr = {"a": "PG", "b": "SyncMany", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1",
                       "h": "0", "i": "WAIT\x01true", "m": "true"}  # fmt: skip
                r = await w.call(RequestCode.SEND_MESSAGE_V2, hdr, body)
                assert r.code == ResponseCode.SUCCESS, r.remark
                offsets = [decode_offset_msg_id(m)[2] for m in r.ext_fields["msgId"].split(",")]
                assert len(offsets) == 3 and max(offsets) < mfq.flushed_where
                return offsets

            results = await asyncio.gather(*(single(i) for i in range(60)), *(batch(i) for i in range(5)))
            singles = results[:60]
            flushed = mfq.flushed_where
            assert all(phy < flushed for _, _, phy in singles)
            for q in (0, 1):
                assert sorted(off for qid, off, _ in singles if qid == q) == list(range(30))
            assert len({phy for _, _, phy in singles}) == 60
            msgs = await pull_all(w, "SyncMany", 2)
            assert len(msgs) == 15 and [m.queue_offset for m in msgs] == list(range(15))
            # WAIT=false is answered at once, as before
            r = await w.send("SyncMany", b"nowait", props={"WAIT": "false"})
            assert r.code == ResponseCode.SUCCESS
        finally:
            await w.close()


async def test_retry_topic_past_max_reconsume_goes_to_dlq(broker, wire):
    r = await wire.send("%RETRY%G1", b"r", keys="dead", reconsumeTimes="3", maxReconsumeTimes="3")
    assert r.code == ResponseCode.SUCCESS, r.remark
    dlq = broker.topic_config_manager.select_topic_config("%DLQ%G1")
    assert dlq is not None and dlq.perm == 2  # write-only, as RocketMQ 4.x creates it
    r = await wire.pull("%DLQ%G1", 0, 0, sys_flag=0x4)
    assert r.code == ResponseCode.NO_PERMISSION
    msgs = await wait_query(wire, "%DLQ%G1", "dead")
    assert msgs[0].body == b"r" and msgs[0].topic == "%DLQ%G1"
    r = await wire.send("%RETRY%G1", b"r2", reconsumeTimes="1", maxReconsumeTimes="3")
    assert r.code == ResponseCode.SUCCESS
    assert (await pull_all(wire, "%RETRY%G1"))[0].body == b"r2"


# ------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("topic", "remark"),
    [
        ("bad topic", "illegal characters"),
        ("bad/topic", "illegal characters"),
        ("t" * 128, "longer than topic max length"),
        ("   ", "blank"),
    ],
)
async def test_invalid_topic_names_are_system_error(wire, topic, remark):
    r = await wire.send(topic, b"x")
    assert r.code == ResponseCode.SYSTEM_ERROR and remark in r.remark


@pytest.mark.parametrize("topic", ["SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "OFFSET_MOVED_EVENT"])
async def test_system_topics_refuse_sends(wire, topic):
    r = await wire.send(topic, b"x")
    assert (
        r.code == ResponseCode.NO_PERMISSION
        and f"Sending message to topic[{topic}] is forbidden." == r.remark
    )


async def test_unknown_topic_without_template_is_topic_not_exist(wire):
    r = await wire.send("NoTemplate", b"x", c="NoSuchTemplate")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST and "NoTemplate" in r.remark


async def test_auto_create_disabled(tmp_path):
    async with broker_and_wire(str(tmp_path), autoCreateTopicEnable=False) as (b, w):
        r = await w.send("Fresh", b"x")
        assert r.code == ResponseCode.TOPIC_NOT_EXIST


async def test_queue_id_out_of_range(broker, wire):
    broker.topic_config_manager.update_topic_config(TopicConfig("Small", 2, 2))
    r = await wire.send("Small", b"x", queue_id=2)
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[2] is illegal" in r.remark


async def test_stored_record_larger_than_max_message_size(tmp_path):
    # maxMessageSize bounds the stored record (91 fixed bytes + body + topic + properties), as
    # RocketMQ's CommitLog: a body of maxMessageSize is refused (issue 23: it was stored)
    async with broker_and_wire(str(tmp_path), store={"maxMessageSize": 1024}) as (b, w):
        assert (await w.send("Big", b"x" * 1024)).code == ResponseCode.MESSAGE_ILLEGAL
        stored_props = "CLUSTER\x01DefaultCluster"
        fits = 1024 - 91 - len("Big") - len(stored_props)
        assert (await w.send("Big", b"x" * fits)).code == ResponseCode.SUCCESS
        r = await w.send("Big", b"x" * (fits + 1))
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        body = encode_batch([(0, b"x" * 1025, "")])
        r = await w.call(RequestCode.SEND_BATCH_MESSAGE, {"a": "P", "b": "Big", "c": "TBW102", "d": "4",
                                                          "e": "0", "f": "0", "g": "0", "h": "0", "m": "true"}, body)  # fmt: skip
        assert r.code == ResponseCode.MESSAGE_ILLEGAL


async def test_batch_with_a_transaction_flag_is_refused(wire):
    # issue 23: a batch with sysFlag 4 (prepared) or 12 was stored, never consumable, and left a
    # hole in the queue; RocketMQ's asyncPutMessages refuses it with MESSAGE_ILLEGAL
    body = encode_batch([(0, b"a", ""), (0, b"b", "")])
    for sys_flag in ("4", "8", "12"):
        r = await wire.call(RequestCode.SEND_BATCH_MESSAGE, {"a": "P", "b": "TxBatch", "c": "TBW102", "d": "4",
                                                            "e": "0", "f": sys_flag, "g": "0", "h": "0", "m": "true"}, body)  # fmt: skip
        assert r.code == ResponseCode.MESSAGE_ILLEGAL, sys_flag
    r = await wire.call(RequestCode.SEND_BATCH_MESSAGE, {"a": "P", "b": "TxBatch", "c": "TBW102", "d": "4",
                                                        "e": "0", "f": "0", "g": "0", "h": "0", "m": "true"}, body)  # fmt: skip
    assert r.code == ResponseCode.SUCCESS


async def test_four_mib_body_and_five_mib_batch_are_refused_at_the_default_limit(tmp_path):
    # issue 23: both were stored; RocketMQ's default maxMessageSize (4 MiB) bounds the stored
    # record and a batch's records together
    async with broker_and_wire(str(tmp_path), store={"mappedFileSizeCommitLog": 16 << 20}) as (b, w):
        assert (await w.send("Huge", b"x" * (4 * 1024 * 1024))).code == ResponseCode.MESSAGE_ILLEGAL
        body = encode_batch([(0, b"y" * (1024 * 1024), "")] * 5)
        r = await w.call(RequestCode.SEND_BATCH_MESSAGE, {"a": "P", "b": "Huge", "c": "TBW102", "d": "4",
                                                         "e": "0", "f": "0", "g": "0", "h": "0", "m": "true"}, body)  # fmt: skip
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        assert (await w.send("Huge", b"x" * (4 * 1024 * 1024 - 200))).code == ResponseCode.SUCCESS


async def test_properties_longer_than_32k(wire):
    r = await wire.send("Props", b"x", props={"big": "v" * 33000})
    assert r.code == ResponseCode.MESSAGE_ILLEGAL


async def test_write_permission_and_order_topic(tmp_path):
    async with broker_and_wire(str(tmp_path), brokerPermission=4) as (b, w):
        b.topic_config_manager.update_topic_config(TopicConfig("Ordered", 4, 4, order=True))
        r = await w.send("Ordered", b"x")
        assert r.code == ResponseCode.NO_PERMISSION and "sending message is forbidden" in r.remark


async def test_read_only_topic_refuses_sends(broker, wire):
    broker.topic_config_manager.update_topic_config(TopicConfig("RO", 2, 2, perm=4))
    r = await wire.send("RO", b"x")
    assert r.code == ResponseCode.NO_PERMISSION and r.remark == "the topic[RO] sending message is forbidden"


async def test_a_topic_config_replaced_after_sends_is_checked_again(broker, wire):
    """process keeps the (frozen) config a send to the topic passed check_send with
    (_plain_topics): a config replaced since (read-only, fewer queues, MULTI_TAG, writable
    again) is checked and applied at the next send."""
    from pocketmq.remoting.protocol.message import MULTI_TAGS_FLAG
    from pocketmq.remoting.protocol.route import TopicFilterType

    tcm = broker.topic_config_manager
    tcm.update_topic_config(TopicConfig("Swap", 4, 4))
    for _ in range(2):  # (the second send takes the kept config)
        assert (await wire.send("Swap", b"a", queue_id=3)).code == ResponseCode.SUCCESS
    tcm.update_topic_config(TopicConfig("Swap", 4, 4, perm=4))
    r = await wire.send("Swap", b"x", queue_id=3)
    assert r.code == ResponseCode.NO_PERMISSION and r.remark == "the topic[Swap] sending message is forbidden"
    tcm.update_topic_config(TopicConfig("Swap", 2, 2))
    r = await wire.send("Swap", b"x", queue_id=3)
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[3] is illegal" in r.remark
    tcm.update_topic_config(TopicConfig("Swap", 4, 4, topic_filter_type=TopicFilterType.MULTI_TAG))
    for _ in range(2):
        assert (await wire.send("Swap", b"m", queue_id=3)).code == ResponseCode.SUCCESS
    tcm.update_topic_config(TopicConfig("Swap", 4, 4))
    assert (await wire.send("Swap", b"b", queue_id=3)).code == ResponseCode.SUCCESS
    msgs = await pull_all(wire, "Swap", 3)
    assert [(m.body, bool(m.sys_flag & MULTI_TAGS_FLAG)) for m in msgs] == [
        (b"a", False),
        (b"a", False),
        (b"m", True),
        (b"m", True),
        (b"b", False),
    ]


async def test_retry_topic_of_unknown_group_without_auto_create(tmp_path):
    async with broker_and_wire(str(tmp_path), autoCreateSubscriptionGroup=False) as (b, w):
        b.topic_config_manager.update_topic_config(TopicConfig("%RETRY%Ghost", 1, 1))
        r = await w.send("%RETRY%Ghost", b"x")
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


async def test_batch_to_retry_topic_and_garbage_batch(broker, wire):
    hdr = {
        "a": "P",
        "b": "%RETRY%G",
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "0",
        "h": "0",
        "m": "true",
    }
    r = await wire.call(RequestCode.SEND_MESSAGE_V2, hdr, encode_batch([(0, b"x", "")]))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "retry group" in r.remark
    r = await wire.call(RequestCode.SEND_MESSAGE_V2, {**hdr, "b": "T"}, b"\x00\x00\x00\x05garbage")
    assert r.code == ResponseCode.MESSAGE_ILLEGAL


async def test_transaction_half_message_refused_by_reject_transaction_message(tmp_path):
    async with broker_and_wire(str(tmp_path), rejectTransactionMessage="true") as (b, w):
        r = await w.send("Tx", b"x", props={"TRAN_MSG": "true", "PGROUP": "PG"}, f="4")
        assert r.code == ResponseCode.NO_PERMISSION and "sending transaction message is forbidden" in r.remark


async def test_slave_refuses_sends(tmp_path):
    async with broker_and_wire(str(tmp_path), brokerId=1, store={"brokerRole": "SLAVE"}) as (b, w):
        r = await w.send("T", b"x")
        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE


async def test_before_start_accept_send_request_timestamp(tmp_path):
    async with broker_and_wire(str(tmp_path), startAcceptSendRequestTimeStamp=4_000_000_000_000) as (b, w):
        r = await w.send("Early", b"x")
        assert r.code == ResponseCode.SYSTEM_ERROR and "broker unable to service" in r.remark


def test_apply_delay_level_rewrites_to_the_schedule_topic():
    from pocketmq.broker.processor.message_props import apply_delay_level
    from pocketmq.store.message_inner import MessageInner

    inner = MessageInner("T", b"x", 3, properties="DELAY\x013\x02KEYS\x01k")
    apply_delay_level(inner, 18)
    assert (inner.topic, inner.queue_id) == ("SCHEDULE_TOPIC_XXXX", 2)
    assert inner.properties == "DELAY\x013\x02KEYS\x01k\x02REAL_TOPIC\x01T\x02REAL_QID\x013"
    clamped = MessageInner("T", b"x", 0, properties="DELAY\x0199")
    apply_delay_level(clamped, 18)
    assert clamped.queue_id == 17 and "DELAY\x0118" in clamped.properties
    half = MessageInner("T", b"x", 0, properties="DELAY\x012", sys_flag=0x4)  # prepared: untouched
    apply_delay_level(half, 18)
    assert half.topic == "T"


async def test_delay_is_ignored_without_a_schedule_service(broker, wire, monkeypatch):
    monkeypatch.setattr(broker.send_processor, "schedule", None)
    r = await wire.send("NoDelay", b"x", props={"DELAY": "3"})
    assert r.code == ResponseCode.SUCCESS
    assert (await pull_all(wire, "NoDelay"))[0].body == b"x"


async def test_delay_goes_to_schedule_topic_with_a_schedule_service(broker, wire):
    assert broker.schedule_message_service is not None  # every broker has one
    r = await wire.send("Later", b"x", props={"DELAY": "2"})
    assert r.code == ResponseCode.SUCCESS
    for _ in range(100):
        if broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 1):
            break
        await asyncio.sleep(0.01)
    assert broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 1) == 1


class _PutAnswers:
    """The store's put seam answering one given result (no held pull: no dispatch)."""

    dispatch_behind_bytes = 0

    def __init__(self, result: object) -> None:
        self.put_now = lambda inner: result


async def sent_reply(broker, request, result, queue_id: int, topic: str):
    """process's reply to ``request`` (made a SEND_MESSAGE_V2 of ``topic`` and ``queue_id``)
    whose put gives ``result``: the SEND_OK rendering (process's tail) of any offset, queue
    offset, opaque and store host, without storing anything."""
    from inspect import isawaitable

    proc = broker.send_processor
    # (set in the table, not by update_topic_config: the store would make 70,001 queue dirs)
    broker.topic_config_manager.topic_config_table.setdefault(topic, TopicConfig(topic, 70001, 70001))
    request.ext_fields = {"a": "G", "b": topic, "c": "TBW102", "d": "4", "e": f"{queue_id}", "f": "0",
                          "g": "0", "h": "0", "i": "KEYS\x01k", "j": "0", "k": "false", "m": "false"}  # fmt: skip
    request.body = b"x"
    conn = type("Conn", (), {"attrs": {"born_host": (bytes([127, 0, 0, 1]), 5555)}, "remote_addr": "c"})()
    store, proc.store = proc.store, _PutAnswers(result)
    try:
        reply = proc.process(conn, request)
        if isawaitable(reply):  # (the topic's write to topics.json awaited)
            reply = await reply
    finally:
        proc.store = store
    return reply


# ("R" * 1000: a header past send_ok_texts.REPLY_PREFIXES' 1024 lengths, its prefix packed)
@pytest.mark.parametrize(
    "region", ["DefaultRegion", 'a%b"\\é\x01\u2028', "@@pocketmq-slot-0@@", "", "R" * 1000]
)
async def test_send_ok_reply_head_is_byte_identical_to_the_general_encoding(broker, region):
    """SEND_OK replies carry a head rendered from a template (command.EncodedReply): the same
    bytes as encoding the reply's fields the general way, whatever the region's characters."""
    from pocketmq.remoting.protocol.command import EncodedReply, RemotingCommand
    from pocketmq.store import AppendResult, PutMessageStatus, PutResult

    broker.state.config = broker.state.config.model_copy(update={"region_id": region})
    proc = broker.send_processor
    proc._settings()  # the new config's (a send reads it first)
    for opaque, queue_id, offset, batch in (
        (7, 3, 0, None),
        (2**31 - 1, 0, 10**12, [5, 900]),
        (-5, 1, 1, None),
        (8, 1023, 2, None),  # the last queue id of remoting.protocol.message.QUEUE_ID_TEXT
        (9, 1024, 3, None),  # past it: formatted
        (10, 70000, 4, None),
    ):
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
        request.opaque = opaque
        wrote = 4096 + abs(opaque) * 0xABCDEF  # (hex digits a-f: the msgId's are upper case)
        append = AppendResult.of(wrote, 100, 1, offset, 1, broker.store_host, batch)
        reply = await sent_reply(broker, request, PutResult(PutMessageStatus.PUT_OK, append), queue_id, "T")
        # a stored put's result is its AppendResult itself (commitlog.put_message): same reply
        assert (
            await sent_reply(broker, request, append, queue_id, "T")
        ).encode_header() == reply.encode_header()
        assert reply.ext_fields["MSG_REGION"] == region
        assert reply.ext_fields["msgId"].endswith("%016X" % (batch[-1] if batch else wrote))
        general = RemotingCommand.encode_header(reply)
        assert reply.encode_header() == general
        assert (len(general) > 1024 + 8) == (len(region) == 1000)
        if region != "@@pocketmq-slot-0@@":
            assert type(reply) is EncodedReply
        reply.opaque += 1  # changed after it was built: encoded the general way
        assert reply.encode_header() == RemotingCommand.encode_header(reply) != general


async def test_send_ok_msg_id_across_offset_blocks_and_store_hosts(broker):
    """A SEND_OK's offset msgId is made from the 64 KiB block of offsets kept from the last
    send (send._block) and a table of four hex digits: %016X after the store host's prefix for
    offsets in, at the edges of and across blocks, backwards, past 2**32 and up to 2**63 - 1,
    and with another store host (whose prefix the kept block must not keep); byte for byte."""
    from pocketmq.remoting.protocol.command import EncodedReply, RemotingCommand
    from pocketmq.store import AppendResult

    other = (bytes([10, 0, 0, 7]), 10911)
    offsets = [0, 1, 0xFFFF, 0x10000, 0x1FFFF, 0x10ABC, 0xABCD, 2**32 - 1, 2**32, 2**32 + 0xFEDC,
               0xABCDEF0123, 0xABCDEF0124, 2**63 - 1, 2**63 - 0x10000, 5]  # fmt: skip
    for n, (host, offset) in enumerate(
        [(broker.store_host, off) for off in offsets]
        + [(other, 0xABCDEF0125), (other, 7), (broker.store_host, 8)]
    ):
        prefix = (host[0] + host[1].to_bytes(4, "big", signed=True)).hex().upper()
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
        request.opaque = n
        reply = await sent_reply(broker, request, AppendResult.of(offset, 100, 1, n, 1, host, None), 3, "T")
        assert type(reply) is EncodedReply, offset
        assert reply.ext_fields["msgId"] == f"{prefix}{offset:016X}", offset
        assert reply.encode_header() == RemotingCommand.encode_header(reply)


async def test_send_ok_numbers_across_their_blocks_queues_and_configs(broker):
    """A SEND_OK's queue offset and opaque are made from their block of 1000 kept from the last
    send (the queue's; send._number_block) and a table of their last three digits, the
    template's parts joined to both: byte for byte against the general encoding for numbers
    in, at the edges of and across blocks, backwards, below 1000, queue ids past 1023, a
    negative opaque (the general path) and a region changed between sends."""
    from pocketmq.remoting.protocol.command import EncodedReply, RemotingCommand
    from pocketmq.store import AppendResult

    proc = broker.send_processor
    numbers = [
        0,
        7,
        999,
        1000,
        1001,
        1999,
        2000,
        999_999,
        1_000_000,
        1_000_999,
        12,
        2**31 - 1,
        2**40 + 5,
        10**18,
    ]
    n = 0
    for region in ("DefaultRegion", "R2", "DefaultRegion"):
        broker.state.config = broker.state.config.model_copy(update={"region_id": region})
        for queue_id in (3, 0, 1023, 1024, 70000, 3):
            for k, number in enumerate(numbers):
                request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
                request.opaque = numbers[-1 - k] % 2**31 if k % 5 else -number - 1
                append = AppendResult.of(4096 * n, 100, 1, number, 1, broker.store_host, None)
                proc._settings()  # (what a send does first)
                reply = await sent_reply(broker, request, append, queue_id, "T")
                assert type(reply) is EncodedReply  # (a negative opaque's: rendered from msg_id)
                ext = reply.ext_fields
                assert (ext["queueId"], ext["queueOffset"], ext["MSG_REGION"]) == (
                    f"{queue_id}",
                    f"{number}",
                    region,
                )
                assert reply.encode_header() == RemotingCommand.encode_header(reply)
                n += 1


async def test_batch_msg_id_is_each_offsets_msg_id_joined(broker):
    """A batch's SEND_OK msgId (send._msg_id: the offsets packed and hex-split in one pass) is
    the offset msgId of each message, %016X after the store host's prefix, comma-joined."""
    from pocketmq.store import AppendResult

    proc = broker.send_processor
    host = broker.store_host
    prefix = (host[0] + host[1].to_bytes(4, "big", signed=True)).hex().upper()
    for offsets in (
        [0],
        [5, 900],
        [0xABCDEF, 2**32 - 1, 2**32, 2**40 + 0xFA],
        [2**63 - 1],
        list(range(0, 64 * 1100, 1100)),
    ):
        append = AppendResult.of(offsets[0], 100, 1, 0, len(offsets), host, offsets)
        assert proc._msg_id(append) == ",".join(f"{prefix}{off:016X}" for off in offsets)


def test_send_single_sets_every_message_inner_field():
    """process builds its MessageInner slot by slot (no __init__): a field added to
    MessageInner must be set there too."""
    import dataclasses
    import inspect
    import re

    from pocketmq.broker.processor.send import SendMessageProcessor

    source = inspect.getsource(SendMessageProcessor.process)
    assigned = set(re.findall(r"^\s+inner\.(\w+) = ", source, re.MULTILINE))
    assert assigned >= {f.name for f in dataclasses.fields(MessageInner)}


async def test_a_batch_template_has_every_message_inner_field(broker, wire, monkeypatch):
    """_send_batch fills its template slot by slot (no __init__): every MessageInner field is
    set, to what the dataclass's __init__ would have made of the header."""
    import dataclasses

    seen = []
    put_batch = broker.store.put_batch
    monkeypatch.setattr(broker.store, "put_batch", lambda t, items: seen.append(t) or put_batch(t, items))
    body = encode_batch([(0, b"a", ""), (0, b"b", "")])
    r = await wire.call(RequestCode.SEND_BATCH_MESSAGE, {"a": "P", "b": "Tpl", "c": "TBW102", "d": "4",
                                                        "e": "2", "f": "0", "g": "1700000000123", "h": "0",
                                                        "j": "3", "m": "true"}, body)  # fmt: skip
    assert r.code == ResponseCode.SUCCESS, r.remark
    (t,) = seen
    got = {f.name: getattr(t, f.name) for f in dataclasses.fields(MessageInner)}
    assert got == {
        "topic": "Tpl", "body": b"", "queue_id": 2, "flag": 0, "properties": "", "sys_flag": 0,
        "born_timestamp": 1700000000123, "born_host": t.born_host, "store_host": broker.store_host,
        "reconsume_times": 3, "prepared_transaction_offset": 0, "tags_code": 0,
    }  # fmt: skip
    assert t.born_host[1] > 0


@pytest.mark.parametrize(
    "sent",
    [
        "UNIQ_KEY\x01ABC",
        "TAGS\x01t\x02UNIQ_KEY\x01ABC",
        "A\x01b\x02",
        "XWAIT\x01a",
        "CLUSTER\x01old\x02A\x01b",
        "",
    ],
)
async def test_sdk_form_properties_stored_as_stored_properties_makes_them(broker, wire, sent):
    """Sends without WAIT (the SDK's form) take an inline path in process: stored the same."""
    ext = {"a": "PG", "b": "SdkForm", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
           "h": "0", "i": sent, "j": "0", "k": "false"}  # fmt: skip
    r = await wire.call(RequestCode.SEND_MESSAGE_V2, ext, b"body")
    assert r.code == ResponseCode.SUCCESS, r.remark
    msgs = await pull_all(wire, "SdkForm", 0, int(r.ext_fields["queueOffset"]))
    expected, _ = stored_properties(sent, "DefaultCluster")
    assert properties_to_string(msgs[0].properties) == expected


async def test_send_reply_counts_the_put_as_on_put_does(broker, wire):
    """The reply's inline copy of ``BrokerStatsManager.on_put``: the same items, values and times."""
    from pocketmq.broker.stats import BROKER_PUT_NUMS, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, BrokerStatsManager

    stats = broker.broker_stats_manager
    reference = BrokerStatsManager(broker.config.broker_cluster_name, stats.now_ms)
    before = broker.store.get_max_phy_offset()
    for i in range(3):
        ext = {"a": "PG", "b": "StatsT", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
               "h": "0", "i": f"UNIQ_KEY\x01U{i}", "j": "0", "k": "false"}  # fmt: skip
        r = await wire.call(RequestCode.SEND_MESSAGE_V2, ext, b"x" * (10 + i))
        assert r.code == ResponseCode.SUCCESS, r.remark
        size = broker.store.get_max_phy_offset() - before
        before += size
        reference.on_put("StatsT", 1, size)
    for name, key in ((TOPIC_PUT_NUMS, "StatsT"), (TOPIC_PUT_SIZE, "StatsT")):
        got, want = stats.get_stats_item(name, key), reference.get_stats_item(name, key)
        assert got is not None and want is not None
        assert (got.value, got.times) == (want.value, want.times) == (want.value, 3)
    cluster = broker.config.broker_cluster_name
    assert stats.get_stats_item(BROKER_PUT_NUMS, cluster).value == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("batch", [False, True])
async def test_shape_read_send_replies_as_a_typed_one(broker, batch):
    """A SEND_MESSAGE_V2 read by its header's shape (send_raw.SendRawRequest, whose code and
    serialize type process does not read: class attributes) is stored and answered as the same
    send decoded typed: the SEND_OK head byte for byte (but its msgId and queue offset), a
    batch (``m=true``) through the batch path."""
    from argparse import Namespace

    from pocketmq.remoting.protocol.command import RemotingCommand, SendV2Request
    from pocketmq.remoting.protocol.frame import FrameDecoder
    from pocketmq.remoting.protocol.send_raw import SendRawRequest

    proc = broker.send_processor
    conn = Namespace(attrs={}, remote_addr="127.0.0.1:5555")
    body = encode_batch([(0, b"b0", "KEYS\x01x0"), (0, b"b1", "")]) if batch else b"x" * 100
    frames = []
    for i in range(4):
        uniq = f"7F0000010A6B18B4AAC22794EB2C{i:04X}"
        ext = {"a": "PG", "b": "RawShape", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000",
               "h": "0", "i": f"UNIQ_KEY\x01{uniq}", "j": "0", "k": "false", "m": "true" if batch else "false"}  # fmt: skip
        frames.append(
            RemotingCommand(
                code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=body, opaque=100 + i
            ).encode()
        )
    decoder = FrameDecoder()
    commands = decoder.feed(b"".join(frames[:2])) + decoder.feed(
        b"".join(frames[2:])
    )  # (learnt, then read by it)
    assert [type(c) for c in commands[2:]] == [SendRawRequest, SendRawRequest]
    assert type(commands[0]) in (SendV2Request, RemotingCommand)
    heads = []
    for command in commands:
        reply = proc.process(conn, command)
        reply = reply if isinstance(reply, RemotingCommand) else await reply
        assert reply.code == ResponseCode.SUCCESS
        assert reply.opaque == command.opaque
        assert reply.encode_header() == RemotingCommand.encode_header(reply)
        ext = reply.ext_fields
        heads.append(reply.encode_header().replace(ext["msgId"].encode(), b"M").replace(b'"queueOffset":"%s"' % ext["queueOffset"].encode(), b"Q").replace(b"%d" % reply.opaque, b"O"))  # fmt: skip
        assert ext["queueId"] == "1"
        assert int(ext["queueOffset"]) == len(heads) * (2 if batch else 1) - (2 if batch else 1)
        assert len(ext["msgId"].split(",")) == (2 if batch else 1)
    assert len(set(heads)) == 1


async def _outcomes(
    broker: Any, conn: Any, commands: Any, of_reply: Callable[[Any], Any], of_msg: Callable[[Any], Any]
) -> list[Any]:
    """What the send processor makes of each of ``commands``: the error's name and text (the
    server answers it with its code), else ``of_reply`` of its reply and, when it stored one,
    ``of_msg`` of the stored message."""
    from pocketmq.remoting.protocol.command import RemotingCommand

    out: list[Any] = []
    for command in commands:
        try:
            reply = broker.send_processor.process(conn, command)
            reply = reply if isinstance(reply, RemotingCommand) or reply is None else await reply
        except Exception as exc:
            out.append((type(exc).__name__, str(exc)))
            continue
        assert reply is not None
        out.append(of_reply(reply))
        ext = reply.ext_fields or {}
        if "msgId" in ext:
            msg = broker.store.look_message_by_offset(int(ext["msgId"][-16:], 16))
            assert msg is not None
            out.append(of_msg(msg))
    return out


_PLAIN_CASES = [
    "TAGS\x01A\x02UNIQ_KEY\x01{u}",
    "UNIQ_KEY\x01{u}",
    "TAGS\x01Tág \x02UNIQ_KEY\x01{u}\x02KEYS\x01ü",
    "TAGS\x01A\x02\x02UNIQ_KEY\x01{u}",  # (the plain ones above: the checks find nothing)
    "UNIQ_KEY\x01{u}\x02WAIT\x01true\x02TAGS\x01A",
    "WAIT\x01false\x02UNIQ_KEY\x01{u}",
    "CLUSTER\x01other\x02UNIQ_KEY\x01{u}",
    "DELAY\x013\x02UNIQ_KEY\x01{u}",
    "UNIQ_KEY\x01{u}\x02DELAY\x012",
    "UNIQ_KEY\x01{u}\x02DELAY\x01x",
    "UNIQ_KEY\x01{u}\x02TRAN_MSG\x01true\x02PGROUP\x01PG",
    "TRAN_MSG\x01false\x02UNIQ_KEY\x01{u}",
    "UNIQ_KEY\x01{u}\x02",
    "XWAIT\x01v\x02UNIQ_KEY\x01{u}\x02MYDELAY\x011",
]


@pytest.mark.parametrize("props", _PLAIN_CASES)
async def test_shape_read_send_stores_the_typed_ones_properties(broker, props):
    """A shape's ``plain`` flag (send_raw._plain: the processor then searches the properties for
    none of WAIT, CLUSTER, DELAY, TRAN_MSG) is set exactly when the processor's own checks would
    find none of them and no trailing separator; either way the shape-read send is answered and
    stored as the same send decoded typed (properties, topic, queue, sysFlag; the reply's code
    and remark), whatever keys its properties hold before or after the UNIQ_KEY."""
    from argparse import Namespace

    from pocketmq.broker.processor.message_props import CLUSTER_KEY, DELAY_KEY, TRAN_KEY, WAIT_KEY
    from pocketmq.remoting.protocol import send_raw
    from pocketmq.remoting.protocol.command import RemotingCommand, SendV2Request
    from pocketmq.remoting.protocol.frame import FrameDecoder
    from pocketmq.remoting.protocol.send_raw import SendRawRequest

    send_raw.SHAPES.clear()
    send_raw.OTHER_SHAPES.clear()
    send_raw._misses.clear()
    conn = Namespace(attrs={}, remote_addr="127.0.0.1:5555")
    frames = []
    for i in range(2):
        ext = {"a": "PG", "b": "RawProps", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000",
               "h": "0", "i": props.format(u=f"7F0000010A6B18B4AAC22794EB2C{i:04X}"), "j": "0", "k": "false",
               "m": "false"}  # fmt: skip
        frames.append(RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=b"x", opaque=100 + i).encode())  # fmt: skip
    decoder = FrameDecoder()
    typed, raw = decoder.feed(frames[0]) + decoder.feed(frames[1])  # (learnt, then read by it)
    assert type(typed) in (SendV2Request, RemotingCommand) and type(raw) is SendRawRequest
    sent = raw.send_header.properties
    keyless = all(key not in sent for key in (WAIT_KEY, CLUSTER_KEY, DELAY_KEY, TRAN_KEY))
    assert raw.plain == (keyless and not sent.endswith("\x02"))
    assert raw.plain == (props in _PLAIN_CASES[:4])
    stored = await _outcomes(
        broker,
        conn,
        (typed, raw),
        lambda reply: (reply.code, reply.remark, "msgId" in (reply.ext_fields or {})),
        lambda msg: (msg.topic, msg.queue_id, msg.sys_flag, repr(msg.properties).replace("2C0000", "2C0001")),
    )
    assert stored[: len(stored) // 2] == stored[len(stored) // 2 :]


_OWN_VALUE_CASES = [
    ("RawOwn", "2", "TAGS\x01A\x02UNIQ_KEY\x01{u}"),  # the plain fast path
    ("RawOwn", "2", "UNIQ_KEY\x01{u}\x02DELAY\x012\x02WAIT\x01false"),  # delay level, WAIT read
    ("RawOwn", "3", "UNIQ_KEY\x01{u}\x02TRAN_MSG\x01true\x02PGROUP\x01PG"),  # a half
    ("RawOwn", "7", "UNIQ_KEY\x01{u}"),  # past the topic's queues: check_send's remark
    ("%RETRY%PG", "0", "UNIQ_KEY\x01{u}\x02RETRY_TOPIC\x01RawOwn"),  # _retry_and_dlq
]


@pytest.mark.parametrize(("topic", "queue", "props"), _OWN_VALUE_CASES)
async def test_shape_read_send_takes_its_own_queue_born_time_and_properties(broker, topic, queue, props):
    """A shape-read send whose queue id, born timestamp and UNIQ_KEY differ from the header its
    shape was learnt from is stored or refused as the same send decoded typed (send_raw: those
    three are the request's, not the shape's header's), on the plain path, a delay level, a
    transaction half, check_send's queue id check and a %RETRY% topic's."""
    from argparse import Namespace

    from pocketmq.remoting.protocol import send_raw
    from pocketmq.remoting.protocol.command import RemotingCommand
    from pocketmq.remoting.protocol.frame import FrameDecoder
    from pocketmq.remoting.protocol.send_raw import SendRawRequest

    send_raw.SHAPES.clear()
    send_raw.OTHER_SHAPES.clear()
    send_raw._misses.clear()
    conn = Namespace(attrs={}, remote_addr="127.0.0.1:5555")
    exts = []
    for i, (e, g) in enumerate((("1", "1700000000000"), (queue, "1700000012345"))):
        exts.append({"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": e, "f": "0", "g": g, "h": "0",
                     "i": props.format(u=f"7F0000010A6B18B4AAC22794EB2C{i:04X}"), "j": "1", "k": "false",
                     "m": "false"})  # fmt: skip
    frames = [
        RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=b"x", opaque=100 + i).encode()
        for i, ext in enumerate(exts)
    ]
    decoder = FrameDecoder()
    decoder.feed(frames[0])  # (learnt)
    (raw,) = decoder.feed(frames[1])
    assert type(raw) is SendRawRequest and raw.shape_header.queue_id == 1
    typed = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=exts[1], body=b"x", opaque=101)
    outcomes = await _outcomes(
        broker,
        conn,
        (raw, typed),
        lambda reply: (reply.code, reply.remark, (reply.ext_fields or {}).get("queueId")),
        lambda msg: (
            msg.topic,
            msg.queue_id,
            msg.born_timestamp,
            msg.sys_flag,
            msg.reconsume_times,
            msg.properties,
        ),
    )
    assert 1700000012345 in outcomes[-1] or "queueId[7]" in str(outcomes[0])
    assert outcomes[: len(outcomes) // 2] == outcomes[len(outcomes) // 2 :]
    if queue == "7":
        assert "queueId[7]" in str(outcomes[0])
