"""Pure tables: topics, subscription groups, consumer offsets, client channels, queue locks."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from pocketmq.broker.client_manager import (
    CHANNEL_EXPIRED_TIMEOUT_MS,
    ClientChannelInfo,
    ConsumerManager,
    ProducerManager,
)
from pocketmq.broker.offset_manager import ConsumerOffsetManager
from pocketmq.broker.rebalance_lock import RebalanceLockManager
from pocketmq.broker.subscription import SubscriptionGroupManager
from pocketmq.broker.topic_config import TopicConfigManager
from pocketmq.remoting.common.clock import FakeClock
from pocketmq.remoting.common.persist import PersistCorruptError
from pocketmq.remoting.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from pocketmq.remoting.protocol.route import PermName, TopicConfig


def tcm(path=None, **kw) -> TopicConfigManager:
    clock = FakeClock()
    return TopicConfigManager(
        str(path) if path else None,
        broker_name="broker-a",
        cluster_name="C1",
        now_ms=clock.now_ms,
        fsync=False,
        **kw,
    )


# ------------------------------------------------------------------------------ topics


def test_builtin_topics_like_a_java_broker():
    m = tcm()
    t = m.topic_config_table
    assert t["TBW102"].perm == 7 and t["TBW102"].write_queue_nums == 8
    assert t["SELF_TEST_TOPIC"].write_queue_nums == 1
    assert t["SCHEDULE_TOPIC_XXXX"].read_queue_nums == 18
    assert t["C1"].perm == PermName.PERM_INHERIT | 6 and t["C1"].write_queue_nums == 16
    assert t["broker-a"].perm == 7 and t["broker-a"].write_queue_nums == 1
    assert "C1_REPLY_TOPIC" in t and "OFFSET_MOVED_EVENT" in t and "BenchmarkTest" in t
    assert "TBW102" not in tcm(auto_create_topic_enable=False).topic_config_table
    assert tcm(cluster_topic_enable=False).topic_config_table["C1"].perm == PermName.PERM_INHERIT


def test_auto_create_rules_and_versions():
    m = tcm()
    calls = []
    m.on_change = lambda: calls.append(1)
    v0 = m.data_version
    tc = m.create_topic_in_send_message_method("New", "TBW102", 4)
    assert (tc.read_queue_nums, tc.perm) == (4, 6)
    assert m.data_version.counter == v0.counter + 1 and m.dirty and calls == [1]
    assert m.create_topic_in_send_message_method("New", "TBW102", 2) is tc  # exists: unchanged
    assert m.create_topic_in_send_message_method("X", "missing", 4) is None
    assert m.create_topic_in_send_message_method("Y", "SELF_TEST_TOPIC", 4) is None  # no INHERIT
    assert m.create_topic_in_send_message_method("Z", "broker-a", 4).write_queue_nums == 1


def test_topics_json_round_trip_and_backup(tmp_path):
    m = tcm(tmp_path)
    m.update_topic_config(TopicConfig("Kept", 3, 5, 6, order=True))
    m.persist()
    raw = (tmp_path / "topics.json").read_text()
    assert json.loads(raw)["topicConfigTable"]["Kept"]["writeQueueNums"] == 5
    m2 = tcm(tmp_path)
    assert m2.load()
    assert m2.topic_config_table["Kept"] == TopicConfig("Kept", 3, 5, 6, order=True)
    assert m2.data_version == m.data_version
    # a torn main file falls back to the .bak of the previous write
    m.update_topic_config(TopicConfig("Later", 1, 1))
    m.persist()
    (tmp_path / "topics.json").write_text("{garbage")
    m3 = tcm(tmp_path)
    assert m3.load() and "Kept" in m3.topic_config_table
    (tmp_path / "topics.json.bak").write_text("{garbage")
    with pytest.raises(PersistCorruptError):
        tcm(tmp_path).load()


def test_replace_all_adopts_a_masters_table_in_place():
    master, slave = tcm(), tcm()
    master.update_topic_config(TopicConfig("FromMaster", 2, 2))
    table = slave.topic_config_table
    slave.replace_all(master.build_wrapper())
    assert slave.topic_config_table is table and table == master.topic_config_table
    assert slave.data_version == master.data_version and slave.dirty
    groups = SubscriptionGroupManager(None, now_ms=FakeClock().now_ms, fsync=False)
    groups.replace_all(SubscriptionGroupWrapper({"G": SubscriptionGroupConfig("G")}, master.data_version))
    assert list(groups.subscription_group_table) == ["G"] and groups.data_version == master.data_version


def test_order_topic_flags_follow_the_kv_table():
    m = tcm()
    m.update_topic_config(TopicConfig("O", 4, 4))
    m.update_order_topic_config({"O"})
    assert m.is_order_topic("O")
    m.update_order_topic_config(set())
    assert not m.is_order_topic("O")


# ------------------------------------------------------------------------------ groups


def test_subscription_groups_auto_create_and_persist(tmp_path):
    clock = FakeClock()
    m = SubscriptionGroupManager(str(tmp_path), now_ms=clock.now_ms, fsync=False)
    assert m.contains("TOOLS_CONSUMER")
    g = m.find_subscription_group_config("G1")
    assert g is not None and g.retry_max_times == 16 and m.dirty
    m.persist()
    m2 = SubscriptionGroupManager(str(tmp_path), now_ms=clock.now_ms, fsync=False)
    assert m2.load() and m2.contains("G1")
    off = SubscriptionGroupManager(None, now_ms=clock.now_ms, auto_create_subscription_group=False)
    assert off.find_subscription_group_config("G1") is None
    assert off.find_subscription_group_config("CID_RMQ_SYS_TRANS") is not None


# ------------------------------------------------------------------------------ offsets


def test_offsets_commit_query_and_java_file_shape(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path), fsync=False)
    assert m.query_offset("G", "T", 0) == -1
    m.commit_offset("G", "T", 0, 10)
    m.commit_offset("G", "T", 1, 7)
    m.commit_offset("G2", "T", 0, 3)
    assert m.query_offsets("G", "T") == {0: 10, 1: 7}
    assert m.topics_of_group("G") == {"T"} and m.groups_of_topic("T") == {"G", "G2"}
    m.persist()
    text = (tmp_path / "consumerOffset.json").read_text()
    assert '"T@G":{' in text.replace("\t", "").replace("\n", "") and "0:10" in text  # bare int keys
    m2 = ConsumerOffsetManager(str(tmp_path), fsync=False)
    assert m2.load() and m2.query_offset("G", "T", 1) == 7 and not m2.dirty


def test_offsets_read_java_written_and_quoted_keys(tmp_path):
    (tmp_path / "consumerOffset.json").write_text('{\n\t"offsetTable":{\n\t\t"T@G":{0:5,"1":6}\n\t}\n}')
    m = ConsumerOffsetManager(str(tmp_path), fsync=False)
    assert m.load() and m.query_offsets("G", "T") == {0: 5, 1: 6}
    assert m.remove_group("G") == 1 and m.query_offset("G", "T", 0) == -1


async def test_persist_async_writes_a_snapshot(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path), fsync=False)
    m.commit_offset("G", "T", 0, 1)
    await m.persist_async()
    assert not m.dirty and (tmp_path / "consumerOffset.json").exists()


# ------------------------------------------------------------------------------ clients


def info(conn, cid="c1", t=0) -> ClientChannelInfo:
    return ClientChannelInfo(conn, cid, 0, 409, t)


def reg(m: ConsumerManager, group, conn, subs, t=0, cid="c1") -> bool:
    return m.register_consumer(
        group, info(conn, cid, t), ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, subs,
    )  # fmt: skip


def test_consumer_membership_changes():
    m = ConsumerManager(channel_expired_timeout_ms=120_000)
    a, b = object(), object()
    s1 = SubscriptionData.build("T", "TagA", sub_version=1)
    assert reg(m, "G", a, [s1], cid="ca")  # new channel
    assert not reg(m, "G", a, [s1], t=10, cid="ca")  # refresh
    assert reg(m, "G", b, [s1], cid="cb")
    assert m.get_consumer_group_info("G").client_ids() == ["ca", "cb"]
    s2 = SubscriptionData.build("T", "TagB", sub_version=2)
    assert not reg(m, "G", a, [s2], cid="ca")  # newer version replaces silently
    assert m.find_subscription_data("G", "T").tags_set == ("TagB",)
    assert reg(m, "G", a, [s2, SubscriptionData.build("U", "*")], cid="ca")  # topic set changed
    assert m.do_channel_close_event(b) == ["G"]
    assert m.unregister_consumer("G", a) and m.get_consumer_group_info("G") is None


def test_close_event_forgets_the_connection_in_each_of_its_groups():
    m, p = ConsumerManager(), ProducerManager()
    a, b, idle = object(), object(), object()
    for group in ("G1", "G2", "G3"):
        reg(m, group, a, [])
    reg(m, "G2", b, [], cid="cb")
    p.register_producer("PG", info(a))
    p.register_producer("PG", info(b, "cb"))
    assert m.do_channel_close_event(idle) == [] and p.do_channel_close_event(idle) == []
    assert m.unregister_consumer("G3", a)  # left before its close: no change to report
    assert m.do_channel_close_event(a) == ["G1", "G2"]
    assert m.do_channel_close_event(a) == []  # (closed once)
    assert sorted(m.table) == ["G2"] and m.get_consumer_group_info("G2").client_ids() == ["cb"]
    assert p.do_channel_close_event(a) == ["PG"] and [i.conn for i in p.get_channels("PG")] == [b]
    # evicted for silence, then back on the same connection before it closed
    assert [g for g, _ in m.scan_not_active_channel(CHANNEL_EXPIRED_TIMEOUT_MS + 1)] == ["G2"]
    reg(m, "G1", b, [], cid="cb")
    assert m.do_channel_close_event(b) == ["G1"] and m.table == {}


def test_channel_expiry_uses_last_heartbeat():
    m = ConsumerManager(channel_expired_timeout_ms=1000)
    p = ProducerManager(channel_expired_timeout_ms=1000)
    a, b = object(), object()
    reg(m, "G", a, [], t=0)
    reg(m, "G", b, [], t=800, cid="c2")
    p.register_producer("PG", info(a, t=0))
    assert m.scan_not_active_channel(1000) == []
    expired = m.scan_not_active_channel(1001)
    assert [(g, i.conn) for g, i in expired] == [("G", a)]
    assert m.get_consumer_group_info("G").client_ids() == ["c2"]
    assert [g for g, _ in p.scan_not_active_channel(1001)] == ["PG"] and p.get_channels("PG") == []


def test_rebalance_locks():
    m = RebalanceLockManager(lock_max_live_ms=100)
    q0, q1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    assert m.try_lock_batch("G", [q0, q1], "c1", 0) == [q0, q1]
    assert m.try_lock_batch("G", [q0], "c2", 50) == []
    assert m.try_lock_batch("G", [q0], "c1", 90) == [q0]  # renew
    assert m.try_lock_batch("G", [q1], "c2", 150) == [q1]  # expired
    m.unlock_batch("G", [q0], "c2")  # not the owner
    assert m.is_locked("G", q0, "c1", 100)
    m.unlock_batch("G", [q0], "c1")
    assert not m.is_locked("G", q0, "c1", 100)


# ------------------------------------------------------------------ durable before the reply (issue 23)


async def test_auto_created_topics_and_groups_coalesce_into_one_write(tmp_path, monkeypatch):
    from pocketmq.broker.config_file import reply_when_durable

    m = tcm(tmp_path)
    writes: list[bytes] = []
    real_write = m._write
    monkeypatch.setattr(m, "_write", lambda data: (writes.append(data), real_write(data))[1])
    assert m.durable is None
    assert reply_when_durable("steady", m) == "steady"  # nothing pending: no awaitable, no cost
    m.create_topic_in_send_message_method("A", "TBW102", 4)
    first = m.durable
    assert first is not None
    m.create_topic_in_send_message_method("B", "TBW102", 4)
    m.create_topic_in_send_message_back_method("%RETRY%G", 1, 6)
    assert m.durable is first  # concurrent creations join the scheduled write
    assert await reply_when_durable("ok", m) == "ok"
    assert len(writes) == 1 and m.durable is None and not m.dirty
    on_disk = json.loads((tmp_path / "topics.json").read_text())["topicConfigTable"]
    assert {"A", "B", "%RETRY%G"} <= set(on_disk)

    g = SubscriptionGroupManager(str(tmp_path), now_ms=FakeClock().now_ms, fsync=False)
    g.find_subscription_group_config("NewGroup")
    assert g.durable is not None
    await reply_when_durable("ok", g)
    assert "NewGroup" in (tmp_path / "subscriptionGroup.json").read_text()


async def test_a_change_during_a_write_gets_its_own_write(tmp_path, monkeypatch):
    m = tcm(tmp_path)
    gate, taken = threading.Event(), threading.Event()
    snapshots: list[bytes] = []
    real_write = m._write

    def slow_write(data: bytes) -> None:
        snapshots.append(data)
        taken.set()
        gate.wait(5)
        real_write(data)

    monkeypatch.setattr(m, "_write", slow_write)
    m.create_topic_in_send_message_method("A", "TBW102", 4)
    first = m.durable
    assert await asyncio.to_thread(taken.wait, 5)  # the first write has its snapshot (without B)
    m.create_topic_in_send_message_method("B", "TBW102", 4)
    second = m.durable
    assert second is not None and second is not first
    gate.set()
    await second
    assert len(snapshots) == 2 and b'"B"' in snapshots[1] and b'"B"' not in snapshots[0]


async def test_a_failed_write_answers_system_error(tmp_path, monkeypatch):
    from pocketmq.broker.config_file import reply_when_durable
    from pocketmq.remoting.protocol.errors import RemoteSystemError

    m = tcm(tmp_path)

    def broken(data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(m, "_write", broken)
    m.create_topic_in_send_message_method("A", "TBW102", 4)
    with pytest.raises(RemoteSystemError, match="topics.json"):
        await reply_when_durable("ok", m)
    assert m.dirty and m.durable is None  # the periodic persist retries
    # the write fails while the reply itself (e.g. a SYNC_FLUSH wait) is still pending: not missed
    m.create_topic_in_send_message_method("B", "TBW102", 4)
    deferred = reply_when_durable(asyncio.sleep(0.05, "ok"), m)
    with pytest.raises(RemoteSystemError, match="No space left"):
        await deferred


def test_restore_missing_topics_from_the_store(caplog):
    m = tcm()
    version = m.data_version
    restored = m.restore_missing({"Orphan": 3, "TBW102": 8, "%RETRY%G": 1, "bad/name": 1})
    assert restored == ["%RETRY%G", "Orphan"]
    tc = m.select_topic_config("Orphan")
    assert tc is not None and (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (3, 3, 6)
    assert m.select_topic_config("TBW102").write_queue_nums == 8  # existing configs are kept
    assert m.data_version != version and m.dirty
    assert sum("Orphan" in r.getMessage() for r in caplog.records if r.levelname == "WARNING") == 1
    assert m.restore_missing({"Orphan": 3}) == []
