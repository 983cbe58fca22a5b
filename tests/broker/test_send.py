"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE against a real in-process broker."""

from __future__ import annotations

import asyncio

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
