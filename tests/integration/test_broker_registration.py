"""Broker ⇄ name server: registration at start, after topic changes, periodically; unregistration."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.route import TopicRouteData
from pocketmq.testing import cluster
from pocketmq.testing.wire import Wire

pytest_plugins = ["pocketmq.testing.plugin"]
pytestmark = pytest.mark.integration


async def route(wire: Wire, topic: str) -> TopicRouteData | None:
    r = await wire.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if r.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert r.code == ResponseCode.SUCCESS, r.remark
    return TopicRouteData.decode(r.body)


async def wait_route(wire: Wire, topic: str, present: bool = True) -> TopicRouteData | None:
    for _ in range(300):
        rd = await route(wire, topic)
        if (rd is not None) == present:
            return rd
        await asyncio.sleep(0.01)
    raise AssertionError(f"route of {topic} {'never appeared' if present else 'never went away'}")


async def test_start_registers_builtin_topics_with_advertised_address(pocketmq_cluster):
    ns = Wire(pocketmq_cluster.namesrv_addr)
    try:
        rd = await wait_route(ns, "TBW102")
        broker = pocketmq_cluster.brokers[0]
        assert rd.broker_datas[0].broker_addrs == {0: broker.broker_addr}
        assert rd.broker_datas[0].broker_name == "broker-a" and rd.broker_datas[0].cluster == "DefaultCluster"
        assert rd.queue_datas[0].perm == 7 and rd.queue_datas[0].write_queue_nums == 8
    finally:
        await ns.close()


async def test_auto_created_topic_is_registered_at_once(pocketmq_cluster):
    ns, br = Wire(pocketmq_cluster.namesrv_addr), Wire(pocketmq_cluster.broker_addrs[0])
    try:
        assert await route(ns, "FreshTopic") is None
        assert (await br.send("FreshTopic", b"x")).code == ResponseCode.SUCCESS
        rd = await wait_route(ns, "FreshTopic")
        assert rd.queue_datas[0].write_queue_nums == 4 and rd.queue_datas[0].perm == 6
        await pocketmq_cluster.create_topic("Made", queues=3)
        assert (await route(ns, "Made")).queue_datas[0].read_queue_nums == 3
    finally:
        await ns.close()
        await br.close()


@pytest.mark.parametrize("pocketmq_cluster", [{"brokers": 2}], indirect=True)
async def test_two_brokers_and_clean_shutdown_unregisters(pocketmq_cluster):
    ns = Wire(pocketmq_cluster.namesrv_addr)
    try:
        await pocketmq_cluster.create_topic("Both", queues=2)
        rd = await route(ns, "Both")
        assert sorted(b.broker_name for b in rd.broker_datas) == ["broker-a", "broker-b"]
        await pocketmq_cluster.stop_broker(1)
        rd = await route(ns, "Both")
        assert [b.broker_name for b in rd.broker_datas] == ["broker-a"]
    finally:
        await ns.close()


async def test_registration_to_an_absent_name_server_does_not_block_the_live_one(tmp_path):
    async with cluster(tmp_path, brokers=0) as c:
        broker = await c.add_broker({"namesrvAddr": f"127.0.0.1:1;{c.namesrv_addr}"})
        ns = Wire(c.namesrv_addr)
        try:
            rd = await wait_route(ns, "TBW102")
            assert rd.broker_datas[0].broker_addrs[0] == broker.broker_addr
        finally:
            await ns.close()


async def test_periodic_registration_refreshes_the_name_server(tmp_path):
    async with cluster(tmp_path, broker_config={"registerNameServerPeriod": 10_000}) as c:
        broker = c.brokers[0]
        before = c.namesrv.route_info  # the same table object; count registrations through it
        calls = []
        original = broker.namesrv_api.register_broker_all

        async def counting(*args, **kwargs):
            calls.append(1)
            return await original(*args, **kwargs)

        broker.namesrv_api.register_broker_all = counting
        broker.trigger_register()
        for _ in range(200):
            if calls:
                break
            await asyncio.sleep(0.01)
        assert calls and before is c.namesrv.route_info


async def test_testing_cluster_restart_keeps_the_store(pocketmq_cluster):
    c = pocketmq_cluster
    br = Wire(c.broker_addrs[0])
    try:
        assert (await br.send("Kept", b"m0")).code == ResponseCode.SUCCESS
    finally:
        await br.close()
    broker = await c.restart_broker(0)
    ns, br = Wire(c.namesrv_addr), Wire(broker.broker_addr)
    try:
        rd = await wait_route(ns, "Kept")
        assert rd.broker_datas[0].broker_addrs[0] == broker.broker_addr
        r = await br.call(RequestCode.GET_MAX_OFFSET, {"topic": "Kept", "queueId": "0"})
        assert r.ext_fields["offset"] == "1"
    finally:
        await ns.close()
        await br.close()
