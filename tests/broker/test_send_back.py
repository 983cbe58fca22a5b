"""CONSUMER_SEND_MSG_BACK (36): retry through the schedule topic, DLQ, the C++ form, bad input.

Real in-process brokers with short delay levels (every retry level 1 s).
"""

from __future__ import annotations

import pytest

from pocketmq.broker.stats import SNDBCK2DLQ_TIMES, SNDBCK_PUT_NUMS
from pocketmq.remoting.protocol.bodies import SubscriptionGroupConfig
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import MessageExt
from tests.broker.helpers import (
    SCHEDULE,
    SHORT_DELAY_STORE,
    Wire,
    broker_and_wire,
    pull_until,
    stat_value,
    wait_query,
)


async def consume_one(wire: Wire, topic: str, body: bytes, **kw) -> MessageExt:
    r = await wire.send(topic, body, keys=body.decode(), tags="TagA", props={"biz": "1"}, **kw)
    assert r.code == ResponseCode.SUCCESS, r.remark
    (m,) = await pull_until(wire, topic)
    return m


def java_back(msg: MessageExt, group: str, *, delay: int = 0, max_times: int | None = None) -> dict[str, str]:
    """A Java/ali-ons send-back header (ali-ons: version 121, every field)."""
    ext = {
        "offset": str(msg.commit_log_offset),
        "group": group,
        "delayLevel": str(delay),
        "originMsgId": msg.msg_id,
        "originTopic": msg.topic,
        "unitMode": "false",
    }
    if max_times is not None:
        ext["maxReconsumeTimes"] = str(max_times)
    return ext


async def test_send_back_goes_to_retry_after_level_3_plus_reconsume_times(tmp_path):
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        orig = await consume_one(w, "T", b"m1")
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(orig, "G", max_times=16))
        assert r.code == ResponseCode.SUCCESS, r.remark
        # delay level 3 + reconsumeTimes(0) -> schedule queue 2
        assert b.store.get_max_offset_in_queue(SCHEDULE, 2) == 1
        retry = b.topic_config_manager.select_topic_config("%RETRY%G")
        assert retry is not None and retry.perm == 6 and retry.read_queue_nums == 1
        (r1,) = await pull_until(w, "%RETRY%G", group="G")
        # failed again: the retried message goes back with level 3 + 1 -> schedule queue 3
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(r1, "G", max_times=16))
        assert r.code == ResponseCode.SUCCESS
        assert b.store.get_max_offset_in_queue(SCHEDULE, 3) == 1
        (r2,) = await pull_until(w, "%RETRY%G", offset=1, group="G")
    for n, m in enumerate((r1, r2), start=1):
        assert m.topic == "%RETRY%G" and m.body == b"m1" and m.reconsume_times == n
        assert m.born_timestamp == orig.born_timestamp and m.flag == orig.flag and m.sys_flag == orig.sys_flag
        p = m.properties
        assert p["RETRY_TOPIC"] == "T" and p["ORIGIN_MESSAGE_ID"] == orig.msg_id
        assert (p["KEYS"], p["TAGS"], p["biz"]) == ("m1", "TagA", "1")
        # the schedule service's re-put keeps the level it waited at (3 + reconsume times)
        assert p["REAL_TOPIC"] == "%RETRY%G" and p["DELAY"] == str(2 + n)
    assert stat_value(b, SNDBCK_PUT_NUMS, "T@G") == 2


async def test_explicit_delay_level_and_negative_level_to_dlq(tmp_path):
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        orig = await consume_one(w, "T", b"lvl")
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(orig, "G", delay=2))
        assert r.code == ResponseCode.SUCCESS
        assert b.store.get_max_offset_in_queue(SCHEDULE, 1) == 1
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(orig, "G", delay=99))
        assert r.code == ResponseCode.SUCCESS
        assert b.store.get_max_offset_in_queue(SCHEDULE, 17) == 1  # clamped to the last level
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(orig, "G", delay=-1))
        assert r.code == ResponseCode.SUCCESS
        (dead,) = await wait_query(w, "%DLQ%G", "lvl")
    assert dead.reconsume_times == 1 and dead.properties["RETRY_TOPIC"] == "T"
    assert dead.properties["DELAY"] == "0"  # Java's setDelayTimeLevel(0): Apache 4.9.7 stores DELAY=0


@pytest.mark.parametrize("client", ["java", "cpp"])
async def test_past_max_reconsume_times_lands_in_a_write_only_dlq(tmp_path, client):
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        b.subscription_group_manager.update_subscription_group_config(
            SubscriptionGroupConfig("G", retry_max_times=1)
        )
        cpp = Wire(b.broker_addr, language=LanguageCode.CPP, version=63)
        try:
            orig = await consume_one(w, "T", b"poison")
            first = await consume_one(w, "T2", b"other")

            async def back(m: MessageExt) -> None:
                if client == "cpp":
                    # librocketmq 1.x: only offset (a string), group and delayLevel (a number)
                    ext = {"offset": str(m.commit_log_offset), "group": "G", "delayLevel": "0"}
                    r = await cpp.call(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
                else:
                    # a version-121 header may raise the max above the group's
                    r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(m, "G", max_times=2))
                assert r.code == ResponseCode.SUCCESS, r.remark

            await back(orig)
            (r1,) = await pull_until(w, "%RETRY%G", group="G")
            await back(r1)
            if client == "java":  # max 2: one more round
                (r2,) = await pull_until(w, "%RETRY%G", offset=1, group="G")
                await back(r2)
            (dead,) = await wait_query(w, "%DLQ%G", "poison")
            dlq = b.topic_config_manager.select_topic_config("%DLQ%G")
            assert dlq is not None and dlq.perm == 2 and dlq.write_queue_nums == 1
            r = await w.pull("%DLQ%G", 0, 0, group="G", sys_flag=0x4)
            assert r.code == ResponseCode.NO_PERMISSION
            assert first.body == b"other"
        finally:
            await cpp.close()
    expected = 2 if client == "cpp" else 3
    assert dead.topic == "%DLQ%G" and dead.reconsume_times == expected
    assert dead.properties["RETRY_TOPIC"] == "T" and dead.properties["ORIGIN_MESSAGE_ID"] == orig.msg_id
    assert stat_value(b, SNDBCK2DLQ_TIMES, "T@G") == 1


async def test_bad_send_back_requests_get_rocketmq_codes(tmp_path):
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        orig = await consume_one(w, "T", b"x")
        for offset in (orig.commit_log_offset + 1, 10**12, -5):
            ext = {"offset": str(offset), "group": "G", "delayLevel": "0"}
            r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
            assert r.code == ResponseCode.SYSTEM_ERROR, offset
            assert r.remark == f"look message by offset failed, {offset}"
        r = await w.call(
            RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": "abc", "group": "G", "delayLevel": "0"}
        )
        assert r.code == ResponseCode.SYSTEM_ERROR
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": "0"})
        assert r.code == ResponseCode.SYSTEM_ERROR
        # retryQueueNums 0: acknowledged, nothing stored
        b.subscription_group_manager.update_subscription_group_config(
            SubscriptionGroupConfig("NoRetry", retry_queue_nums=0)
        )
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(orig, "NoRetry"))
        assert r.code == ResponseCode.SUCCESS
        assert b.topic_config_manager.select_topic_config("%RETRY%NoRetry") is None
        assert sum(b.store.get_max_offset_in_queue(SCHEDULE, q) for q in range(18)) == 0
        r = await w.send("T", b"still serving")
        assert r.code == ResponseCode.SUCCESS


async def test_unknown_group_without_auto_create_and_unwritable_broker(tmp_path):
    async with broker_and_wire(
        str(tmp_path / "a"), store=SHORT_DELAY_STORE, autoCreateSubscriptionGroup=False
    ) as (b, w):
        r = await w.send("T", b"x")
        assert r.code == ResponseCode.SUCCESS
        ext = {"offset": "0", "group": "NoSuchGroup", "delayLevel": "0"}
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert "subscription group not exist, NoSuchGroup" in r.remark
    async with broker_and_wire(str(tmp_path / "b"), store=SHORT_DELAY_STORE, brokerPermission=4) as (b, w):
        ext = {"offset": "0", "group": "G", "delayLevel": "0"}
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
        assert r.code == ResponseCode.NO_PERMISSION and "sending message is forbidden" in r.remark


async def test_retry_topic_write_permission_is_honoured(tmp_path):
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        orig = await consume_one(w, "T", b"x")
        tc = b.topic_config_manager.create_topic_in_send_message_back_method("%RETRY%RO", 1, 4)
        assert tc.perm == 4
        r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(orig, "RO"))
        assert r.code == ResponseCode.NO_PERMISSION and "%RETRY%RO" in r.remark


async def test_send_back_of_a_retried_message_keeps_one_real_topic(tmp_path):
    """Properties are a map in Java: a second schedule pass replaces REAL_TOPIC/REAL_QID."""
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        orig = await consume_one(w, "T", b"twice")
        await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(orig, "G"))
        (r1,) = await pull_until(w, "%RETRY%G", group="G")
        await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, java_back(r1, "G"))
        (r2,) = await pull_until(w, "%RETRY%G", offset=1, group="G")
    assert r2.properties_str.count("REAL_TOPIC\x01") == 1 and r2.properties_str.count("REAL_QID\x01") == 1
    assert r2.properties_str.count("WAIT\x01") == 1 and r2.properties_str.count("RETRY_TOPIC\x01") == 1
