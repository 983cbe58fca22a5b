"""Delayed messages: SCHEDULE_TOPIC_XXXX on send, re-put when due, delayOffset.json, restarts.

Real in-process brokers on tmp stores with short ``messageDelayLevel``s (level 2 = 2 s, the
others 1 s); the schedule service's first run is 1 s after start, as RocketMQ's.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import time

from pocketmq.broker.processor.message_props import java_reput_properties
from pocketmq.broker.schedule import DelayOffsetManager, ScheduleMessageService
from pocketmq.broker.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS
from pocketmq.remoting.protocol.bodies import DelayOffsetTable
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import (
    decode_messages,
    encode_batch,
    java_string_hash,
    properties_to_string,
)
from pocketmq.remoting.protocol.route import KVTable
from pocketmq.store.log.layout import CQ_UNIT
from pocketmq.store.message_inner import MessageInner
from tests.broker.helpers import (
    SCHEDULE,
    SHORT_DELAY_STORE,
    Wire,
    broker_and_wire,
    pull_until,
    query_by_key,
    running_broker,
    stat_value,
)


def cq_units(store, topic: str, qid: int) -> list[tuple[int, int, int]]:
    d = os.path.join(store.config.consume_queue_dir, topic, str(qid))
    data = b"".join(pathlib.Path(d, n).read_bytes() for n in sorted(os.listdir(d)))
    return [u for u in CQ_UNIT.iter_unpack(data) if u[1] > 0]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def send_delayed(wire: Wire, topic: str, body: bytes, level: str, **kw) -> None:
    props = {"DELAY": level, **kw.pop("props", {})}
    r = await wire.send(topic, body, props=props, bornTimestamp=str(now_ms()), **kw)
    assert r.code == ResponseCode.SUCCESS, r.remark


async def test_delayed_message_waits_for_its_level_then_arrives_intact(tmp_path):
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        born = now_ms()
        r = await w.send(
            "DelayT", b"later", tags="TagA", keys="k1", queue_id=2, props={"DELAY": "2", "biz": "v"},
            bornTimestamp=str(born), flag="7",
        )  # fmt: skip
        assert r.code == ResponseCode.SUCCESS
        # stored in the schedule queue of level 2 (queue 1), not in the topic
        assert b.store.get_max_offset_in_queue(SCHEDULE, 1) == 1
        held = b.store.get_message("g", SCHEDULE, 1, 0, 1)
        assert held.message_count == 1
        (record,) = decode_messages(held.body)
        r = await w.pull("DelayT", 2, 0, sys_flag=0x4)
        assert r.code == ResponseCode.PULL_NOT_FOUND
        (m,) = await pull_until(w, "DelayT", 2)
        # stats as a Java broker keeps them: the send under the schedule topic, the re-put
        # (enableScheduleMessageStats) and the pull under the real topic
        for name, key in (
            (TOPIC_PUT_NUMS, SCHEDULE),
            (TOPIC_PUT_NUMS, "DelayT"),
            (GROUP_GET_NUMS, "DelayT@CG"),
        ):
            assert stat_value(b, name, key) == 1, (name, key)
        (unit,) = cq_units(b.store, "DelayT", 2)
    assert m.body == b"later" and m.topic == "DelayT" and m.queue_id == 2 and m.flag == 7
    assert m.born_timestamp == born and m.reconsume_times == 0
    p = m.properties
    assert (p["TAGS"], p["KEYS"], p["biz"], p["CLUSTER"]) == ("TagA", "k1", "v", "DefaultCluster")
    # as Apache's messageTimeup stores it: DELAY, REAL_TOPIC, REAL_QID kept (a Java consumer's
    # getDelayTimeLevel() is the level it was sent with) and the sender's WAIT (Java's send path
    # puts it back into the map the CommitLog's delay rewrite encodes)
    assert (p["REAL_TOPIC"], p["REAL_QID"], p["DELAY"], p["WAIT"]) == ("DelayT", "2", "2", "true")
    # byte for byte (order included) the schedule record's properties as Java re-serializes them
    # (tests/broker/test_java_property_order.py checks that against Apache's own strings)
    assert m.properties_str == java_reput_properties(record.properties_str)
    assert not m.properties_str.endswith("\x02") and m.properties_str.count("\x02") == len(p) - 1
    # the real-topic unit is a normal one: tagsCode is the TAGS hash, not a delivery time
    assert unit[2] == java_string_hash("TagA")
    # the level's delay (2 s) passed between the schedule record's store time and the re-put
    assert m.store_timestamp - born >= 2000


async def test_levels_run_independently_and_keep_order(tmp_path):
    async with broker_and_wire(str(tmp_path), store={"messageDelayLevel": "1s 3s"}) as (b, w):
        for i in range(6):
            await send_delayed(w, "Order", f"slow-{i}".encode(), "2")
            await send_delayed(w, "Order", f"fast-{i}".encode(), "1")
        msgs = await pull_until(w, "Order", 0, count=12, timeout=20)
    bodies = [m.body.decode() for m in msgs]
    assert bodies == [f"fast-{i}" for i in range(6)] + [f"slow-{i}" for i in range(6)]
    assert b.schedule_message_service is not None
    assert b.schedule_message_service.offset_table == {1: 6, 2: 6}


async def test_delay_level_bad_input(tmp_path):
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        # above the highest level: clamped to it (Java CommitLog.putMessage)
        await send_delayed(w, "Clamp", b"x", "99")
        assert b.store.get_max_offset_in_queue(SCHEDULE, 17) == 1
        held = b.store.look_message_by_offset(b.store.get_commit_log_offset_in_queue(SCHEDULE, 17, 0))
        assert held is not None and held.properties["DELAY"] == "18"
        # 0 and negative levels: no delay
        for level in ("0", "-3"):
            await send_delayed(w, "NoDelay", level.encode(), level)
        assert [m.body for m in await pull_until(w, "NoDelay", count=2)] == [b"0", b"-3"]
        # not an integer: Java's Integer.parseInt fails -> SYSTEM_ERROR
        for bad in ("abc", "1.5", " 2", ""):
            r = await w.send("BadDelay", b"x", props={"DELAY": bad})
            assert r.code == ResponseCode.SYSTEM_ERROR and "DELAY" in r.remark, bad
        # a delayed batch is illegal (CommitLog.asyncPutMessages)
        body = encode_batch([(0, b"a", "KEYS\x01a"), (0, b"b", "KEYS\x01b")])
        r = await w.send("Batch", body, m="true", props={"DELAY": "1"})
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        # the schedule topic itself cannot be sent to
        r = await w.send(SCHEDULE, b"x")
        assert r.code == ResponseCode.NO_PERMISSION
        r = await w.send("StillServing", b"ok")
        assert r.code == ResponseCode.SUCCESS


async def test_records_without_a_real_topic_are_discarded_not_blocking(tmp_path):
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        # what no send path writes, but a foreign or damaged store may hold
        bad = MessageInner(SCHEDULE, b"orphan", 0, properties="DELAY\x011")
        assert b.store.put_message(bad).status.is_ok
        await send_delayed(w, "AfterOrphan", b"good", "1")
        (m,) = await pull_until(w, "AfterOrphan")
        assert m.body == b"good"
        assert b.schedule_message_service is not None
        assert b.schedule_message_service.offset_table[1] == 2


async def test_refused_put_is_retried_from_the_same_message(tmp_path):
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        svc = b.schedule_message_service
        assert svc is not None
        svc.retry_interval_ms = 200
        await send_delayed(w, "Refused", b"m0", "1")
        await send_delayed(w, "Refused", b"m1", "1")
        b.store.disk_full = True  # every put refused (SERVICE_NOT_AVAILABLE)
        await asyncio.sleep(1.6)
        assert b.store.get_max_offset_in_queue("Refused", 0) == 0
        assert svc.offset_table.get(1, 0) == 0
        b.store.disk_full = False
        msgs = await pull_until(w, "Refused", count=2)
        assert [m.body for m in msgs] == [b"m0", b"m1"]


async def test_clean_restart_while_messages_wait_loses_and_repeats_nothing(tmp_path):
    root = str(tmp_path)
    async with broker_and_wire(root, store=SHORT_DELAY_STORE) as (b, w):
        for i in range(5):
            await send_delayed(w, "Restart", f"r{i}".encode(), "2", keys=f"r{i}")
        await send_delayed(w, "Restart", b"early", "1")
        # the level-1 message is delivered before the stop, the level-2 ones are not
        await pull_until(w, "Restart", count=1, timeout=10)
    saved = (tmp_path / "config" / "delayOffset.json").read_text()
    assert DelayOffsetTable.decode(saved).offset_table == {1: 1, 2: 0}
    assert "\t1:1" in saved.replace(" ", "")  # fastjson form: bare integer keys
    async with broker_and_wire(root, store=SHORT_DELAY_STORE) as (b, w):
        msgs = await pull_until(w, "Restart", count=6, timeout=15)
        await asyncio.sleep(1.2)  # a second delivery would show up by now
        assert b.store.get_max_offset_in_queue("Restart", 0) == 6
    assert sorted(m.body for m in msgs) == sorted([b"early"] + [f"r{i}".encode() for i in range(5)])
    async with running_broker(root, store=SHORT_DELAY_STORE) as b:
        await asyncio.sleep(1.3)
        assert b.store.get_max_offset_in_queue("Restart", 0) == 6
        assert b.schedule_message_service is not None
        assert b.schedule_message_service.offset_table == {1: 1, 2: 5}


async def test_java_delay_offset_file_and_admin_views(tmp_path):
    cfg = tmp_path / "config"
    cfg.mkdir()
    # as a Java broker writes it: fastjson, bare integer keys, tabs
    (cfg / "delayOffset.json").write_text('{\n\t"offsetTable":{3:0,1:0\n\t}\n}')
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        assert b.schedule_message_service is not None
        assert b.schedule_message_service.offset_table == {1: 0, 3: 0}
        await send_delayed(w, "Views", b"x", "3")
        r = await w.call(RequestCode.GET_ALL_DELAY_OFFSET)
        assert r.code == ResponseCode.SUCCESS
        assert DelayOffsetTable.decode(r.body).offset_table == {1: 0, 3: 0}
        await pull_until(w, "Views")
        r = await w.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        table = KVTable.decode(r.body).table
        assert table["scheduleMessageOffset_3"] == "1,1" and table["scheduleMessageOffset_1"] == "0,0"


async def test_offset_beyond_the_queue_is_corrected(tmp_path):
    cfg = tmp_path / "config"
    cfg.mkdir()
    # the store was replaced (or truncated) under a kept delayOffset.json
    (cfg / "delayOffset.json").write_text(json.dumps({"offsetTable": {"1": 40}}))
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        await send_delayed(w, "Corrected", b"x", "1")
        (m,) = await pull_until(w, "Corrected")
        assert m.body == b"x"
        assert b.schedule_message_service is not None
        assert b.schedule_message_service.offset_table[1] == 1


def test_delay_offset_manager_round_trip(tmp_path):
    m = DelayOffsetManager(str(tmp_path), fsync=False)
    assert m.load() is False
    m.offset_table.update({2: 5, 1: 3})
    m.persist()
    text = (tmp_path / "delayOffset.json").read_text()
    assert text.index("1:3") < text.index("2:5")
    again = DelayOffsetManager(str(tmp_path), fsync=False)
    assert again.load() and again.offset_table == {1: 3, 2: 5}


def test_delay_levels_parse_and_clamp():
    svc = ScheduleMessageService(None, None, message_delay_level="1s 5s 2m 1h 1d", now_ms=now_ms)
    assert svc.max_delay_level == 5
    assert svc.delay_levels_ms == [1000, 5000, 120_000, 3_600_000, 86_400_000]
    assert (svc.delay_ms(1), svc.delay_ms(9), svc.delay_ms(0)) == (1000, 86_400_000, 1000)


async def test_idle_broker_does_not_read_the_schedule_queues(tmp_path):
    async with running_broker(str(tmp_path), store=SHORT_DELAY_STORE) as b:
        before = b.store.stats.get_total_times
        await asyncio.sleep(1.5)  # first run at 1 s, then a poll every 100 ms
        assert b.store.stats.get_total_times == before
        assert b.schedule_message_service is not None and b.schedule_message_service.iterations >= 3


async def test_properties_survive_byte_for_byte(tmp_path):
    props = {"KEYS": "a b", "TAGS": "t", "UNIQ_KEY": "0A0000050000000000000000000000FF", "x": "\u00e9\u4e2d"}
    async with broker_and_wire(str(tmp_path), store=SHORT_DELAY_STORE) as (b, w):
        r = await w.send("Props", b"\x00\x01binary", props={**props, "DELAY": "1"})
        assert r.code == ResponseCode.SUCCESS
        (m,) = await pull_until(w, "Props")
        assert (await query_by_key(w, "Props", "b"))[0].body == b"\x00\x01binary"
    for k, v in props.items():
        assert m.properties[k] == v
    assert properties_to_string({k: m.properties[k] for k in props}) == properties_to_string(props)
