"""Master/slave replication through real in-process brokers and a name server (issue 16).

A SYNC_MASTER acknowledges a send only once its slave holds the bytes; the slave's CommitLog
is byte-identical to the master's, its ConsumeQueues are built by its own reput, it refuses
writes, registers as brokerId 1, copies the master's metadata, and serves consumers (with their
offset commits) when the master is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer, SendStatus
from pocketmq.client.admin.admin import MQAdmin
from pocketmq.client.admin.format import cluster_list_table
from pocketmq.remoting.protocol.bodies import SubscriptionGroupConfig
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.route import TopicConfig
from pocketmq.store import BrokerRole
from pocketmq.testing import Cluster, cluster
from pocketmq.testing.wire import Wire
from tests.integration.support import collecting_consumer, loop_clean_at_exit  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

SLAVE = {"brokerName": "broker-a", "brokerId": 1}


@pytest.fixture
async def pmq(tmp_path) -> AsyncIterator[Cluster]:
    async with cluster(tmp_path / "pmq", brokers=0) as c:
        yield c


async def _pair(
    c: Cluster, role: str = "SYNC_MASTER", **store: object
) -> tuple[BrokerController, BrokerController]:
    master = await c.add_broker(store_overrides={"brokerRole": role, **store})
    slave = await c.add_broker(SLAVE, store_overrides={"brokerRole": "SLAVE", **store})
    assert master.store.ha_master is not None
    await wait_until(lambda: master.store.ha_master is not None and master.store.ha_master.slave_count() == 1)
    return master, slave


def _log(broker: BrokerController, start: int, end: int) -> bytes:
    out = b""
    while start < end:
        data = broker.store.get_commit_log_data(start, end - start)
        assert data, start
        out += data
        start += len(data)
    return out


async def test_sync_master_replicates_and_the_slave_serves_after_the_master_is_gone(pmq: Cluster) -> None:
    master, slave = await _pair(pmq)
    # the slave learned the master's HA address from the name server's REGISTER_BROKER reply
    assert slave.store.ha_slave is not None and slave.store.ha_slave.master_address == master.ha_server_addr
    await pmq.create_topic("HaTopic", queues=4)
    async with Producer("HaPG", namesrv=pmq.namesrv_addr) as producer:
        sent = [await producer.send(Message("HaTopic", b"m%d" % i)) for i in range(150)]
        batch = await producer.send_batch([Message("HaTopic", b"b%d" % i) for i in range(32)])
    assert all(r.send_status is SendStatus.SEND_OK for r in [*sent, batch])
    end = master.store.get_max_phy_offset()
    # every acknowledged byte is on the slave, byte for byte; the slave's reput indexed it
    assert slave.store.get_max_phy_offset() == end
    assert _log(slave, 0, end) == _log(master, 0, end)
    await wait_until(lambda: slave.store.dispatch_behind_bytes == 0)
    for q in range(4):
        assert slave.store.get_max_offset_in_queue("HaTopic", q) == master.store.get_max_offset_in_queue(
            "HaTopic", q
        )
    # the route lists both: {0: master, 1: slave}
    route = pmq.namesrv.route_info.pickup_topic_route_data("HaTopic")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {0: master.broker_addr, 1: slave.broker_addr}
    # the master's figures for operators, and mqadmin clusterList's HA columns
    info = master.store.runtime_info()
    assert info["haSlaveCount"] == "1" and info["haSlaveAckOffset"] == str(end)
    async with MQAdmin(pmq.namesrv_addr) as admin:
        text = cluster_list_table(await admin.cluster_list(), 0)
    assert "#PutOffset" in text and f"slave of {master.ha_server_addr} (connected, reported {end})" in text
    assert "master: slaves 127.0.0.1:" in text and "lag 0 B" in text
    # the master goes away: a consumer reads everything from the slave
    await pmq.stop_broker(0)
    got: list = []
    consumer = collecting_consumer(pmq, "HaCG", "HaTopic", got)
    async with consumer:
        await wait_until(lambda: len({m.msg_id for m in got}) >= 182, timeout=30)
        # its offsets are committed on the slave
        await consumer.persist_consumer_offset()
        await wait_until(
            lambda: (
                sum(slave.consumer_offset_manager.query_offset("HaCG", "HaTopic", q) for q in range(4)) == 182
            ),
            timeout=15,
        )
    assert sorted(m.body for m in got if m.body.startswith(b"m")) == sorted(b"m%d" % i for i in range(150))


async def test_sync_master_without_a_slave_answers_slave_not_available(pmq: Cluster) -> None:
    await pmq.add_broker(store_overrides={"brokerRole": "SYNC_MASTER"})
    await pmq.create_topic("Lonely", queues=1)
    async with Producer("LPG", namesrv=pmq.namesrv_addr) as producer:
        r = await producer.send(Message("Lonely", b"x"))
    assert r.send_status is SendStatus.SLAVE_NOT_AVAILABLE  # stored, but not replicated


async def test_async_master_slave_follows_and_refuses_writes(pmq: Cluster) -> None:
    master, slave = await _pair(pmq, "ASYNC_MASTER")
    await pmq.create_topic("AsyncHa", queues=2)
    async with Producer("APG", namesrv=pmq.namesrv_addr) as producer:
        for i in range(50):
            assert (await producer.send(Message("AsyncHa", b"%d" % i))).send_status is SendStatus.SEND_OK
    await wait_until(lambda: slave.store.get_max_phy_offset() == master.store.get_max_phy_offset())
    # a producer is never given the slave; a direct send is refused (14)
    wire = Wire(slave.broker_addr)
    try:
        reply = await wire.call(
            RequestCode.SEND_MESSAGE_V2,
            {
                "a": "PG",
                "b": "AsyncHa",
                "c": "TBW102",
                "d": "4",
                "e": "0",
                "f": "0",
                "g": "0",
                "h": "0",
                "i": "",
                "j": "0",
                "k": "false",
                "m": "false",
            },
            b"body",
        )
    finally:
        await wire.close()
    assert reply.code == 14 and "slave" in (reply.remark or "")


async def test_slave_copies_the_masters_metadata(pmq: Cluster) -> None:
    master, slave = await _pair(pmq, "ASYNC_MASTER")
    master.topic_config_manager.update_topic_config(TopicConfig("OnlyOnMaster", 3, 3, 6))
    master.subscription_group_manager.update_subscription_group_config(
        SubscriptionGroupConfig("GroupOnMaster")
    )
    master.consumer_offset_manager.commit_offset("GroupOnMaster", "OnlyOnMaster", 1, 42)
    await slave.slave_sync.sync_all()
    assert slave.slave_sync.master_addr == master.broker_addr
    assert "OnlyOnMaster" in slave.topic_config_manager.table
    assert slave.topic_config_manager.data_version == master.topic_config_manager.data_version
    assert "GroupOnMaster" in slave.subscription_group_manager.table
    assert slave.consumer_offset_manager.query_offset("GroupOnMaster", "OnlyOnMaster", 1) == 42
    await asyncio.sleep(0)


async def test_master_suggests_the_slave_for_old_data_and_the_sdk_follows(tmp_path) -> None:
    # accessMessageInMemoryMaxRatio=0: any data behind the CommitLog head counts as "not in memory"
    async with cluster(
        tmp_path / "c",
        brokers=0,
        broker_config={"slaveReadEnable": True},
        store_config={"accessMessageInMemoryMaxRatio": 0},
    ) as c:
        master, slave = await _pair(c, "ASYNC_MASTER")
        await c.create_topic("OldData", queues=1)
        async with Producer("OPG", namesrv=c.namesrv_addr) as producer:
            for i in range(100):
                await producer.send(Message("OldData", b"%d" % i))
        await wait_until(lambda: slave.store.get_max_phy_offset() == master.store.get_max_phy_offset())
        got: list = []
        async with collecting_consumer(c, "OCG", "OldData", got, pull_batch_size=10):
            await wait_until(lambda: len(got) >= 100)
        # the first pull went to the master, which suggested brokerId 1; the rest read the slave
        assert slave.store.transferred_msg_count >= 50
        assert master.store.transferred_msg_count < 100


async def test_a_slave_started_before_its_master_follows_it_within_seconds(pmq: Cluster) -> None:
    slave = await pmq.add_broker(SLAVE, store_overrides={"brokerRole": "SLAVE"})
    assert slave.store.ha_slave is not None and slave.store.ha_slave.master_address is None
    master = await pmq.add_broker({"brokerName": "broker-a"}, store_overrides={"brokerRole": "SYNC_MASTER"})
    # the slave asks the name server again every 2 s until a master is named (not every 30 s)
    await wait_until(lambda: slave.store.ha_slave is not None and slave.store.ha_slave.connected, timeout=10)
    assert slave.store.ha_slave.master_address == master.ha_server_addr


async def test_manual_failover_a_slave_restarted_as_master_keeps_every_acknowledged_message(
    pmq: Cluster,
) -> None:
    master, slave = await _pair(pmq)
    await pmq.create_topic("Failover", queues=2)
    async with Producer("FoPG", namesrv=pmq.namesrv_addr) as producer:
        sent = [await producer.send(Message("Failover", b"f%d" % i)) for i in range(60)]
    assert all(r.send_status is SendStatus.SEND_OK for r in sent)
    await wait_until(lambda: slave.store.dispatch_behind_bytes == 0)
    await pmq.stop_broker(0)  # the master is gone for good
    # RocketMQ 4.x's manual failover: the slave restarts on its own store as brokerId 0
    await slave.shutdown()
    cfg = slave.config
    promoted = BrokerController(
        cfg.model_copy(
            update={
                "broker_id": 0,
                "listen_port": 0,
                "store": cfg.store.model_copy(update={"broker_role": BrokerRole.ASYNC_MASTER}),
            }
        ),
        fsync=False,
    )
    await promoted.start()
    pmq.brokers[1] = promoted
    assert promoted.store.ha_master is not None and promoted.store.ha_slave is None
    assert "Failover" in promoted.topic_config_manager.table  # its own topics.json
    got: list = []
    async with collecting_consumer(pmq, "FoCG", "Failover", got):
        await wait_until(lambda: len({m.body for m in got}) >= 60, timeout=30)
    assert {m.body for m in got} == {b"f%d" % i for i in range(60)}
    # and it takes new sends as the group's master
    async with Producer("FoPG2", namesrv=pmq.namesrv_addr) as producer:
        r = await producer.send(Message("Failover", b"after"))
    assert r.send_status is SendStatus.SEND_OK and r.message_queue.broker_name == "broker-a"
