"""Name-server request processors over a real server on 127.0.0.1:0, driven with real frames.

Every test runs a :class:`NamesrvController` in-process (its tables are inspected directly
where that is the point) and talks to it through a :class:`RemotingClient`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.namesrv.processor import FAQ_URL
from pocketmq.remoting.common import properties
from pocketmq.remoting.common.clock import FakeClock
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.route import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    ClusterInfo,
    DataVersion,
    KVTable,
    PermName,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    TopicSysFlag,
)
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig
from tests.waiting import wait_until
from tests.wire_calls import remoting_client

CLUSTER = "DefaultCluster"
A_MASTER = "10.0.0.1:10911"
A_SLAVE = "10.0.0.2:10911"
B_MASTER = "10.0.0.3:10911"


# ---- request builders (also used by the subprocess and interop tests) --------------------------


def wrapper(*topics: str | TopicConfig, version: int = 1) -> TopicConfigSerializeWrapper:
    table = {}
    for t in topics:
        tc = t if isinstance(t, TopicConfig) else TopicConfig(t, 4, 4)
        table[tc.topic_name] = tc
    return TopicConfigSerializeWrapper(table, DataVersion(1_700_000_000_000, version))


def register_request(
    broker_name: str,
    broker_addr: str,
    topics: TopicConfigSerializeWrapper | None = None,
    *,
    broker_id: int | str = 0,
    cluster: str = CLUSTER,
    ha_addr: str | None = None,
    compressed: bool = False,
    body: bytes | None = None,
    crc: int | None = None,
    version: int = 409,
    filter_servers: list[str] | None = None,
) -> RemotingCommand:
    """A REGISTER_BROKER request as a Java broker builds it (``body`` overrides the encoding)."""
    if body is None:
        wrap = topics if topics is not None else wrapper()
        body = RegisterBrokerBody(wrap, list(filter_servers or [])).encode(compress=compressed)
    ext = {
        "brokerName": broker_name,
        "brokerAddr": broker_addr,
        "clusterName": cluster,
        "haServerAddr": ha_addr or broker_addr.rsplit(":", 1)[0] + ":10912",
        "brokerId": str(broker_id),
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc),
    }
    cmd = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)
    cmd.version = version
    return cmd


def route_request(topic: str, *, version: int = 409, accept_standard: str | None = None) -> RemotingCommand:
    ext = {"topic": topic}
    if accept_standard is not None:
        ext["acceptStandardJsonOnly"] = accept_standard
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
    cmd.version = version
    return cmd


def request(code: int, ext: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand.request(code, ext, body)


# ---- fixtures ----------------------------------------------------------------------------------


def ns_config(tmp_path: Path, **overrides: Any) -> NamesrvConfig:
    return NamesrvConfig(
        listen_port=0,
        bind_address="127.0.0.1",
        kv_config_path=str(tmp_path / "kvConfig.json"),
        config_store_path=str(tmp_path / "namesrv.properties"),
        **overrides,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def ns(tmp_path: Path, clock: FakeClock) -> AsyncIterator[NamesrvController]:
    controller = NamesrvController(
        ns_config(tmp_path, scan_not_active_broker_interval=100), clock=clock, fsync=False
    )
    await controller.start()
    yield controller
    await controller.shutdown()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with remoting_client(10.0) as cli:
        yield cli


async def call(client: RemotingClient, ns: NamesrvController, cmd: RemotingCommand) -> RemotingCommand:
    return await client.invoke(ns.addr, cmd)


async def ok(client: RemotingClient, ns: NamesrvController, cmd: RemotingCommand) -> RemotingCommand:
    reply = await call(client, ns, cmd)
    assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)
    return reply


async def put_order_conf(client: RemotingClient, ns: NamesrvController, topic: str, conf: str) -> None:
    """PUT_KV_CONFIG of a topic's order config (the ORDER_TOPIC_CONFIG namespace)."""
    ext = {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": topic, "value": conf}
    await ok(client, ns, request(RequestCode.PUT_KV_CONFIG, ext))


async def route(client: RemotingClient, ns: NamesrvController, topic: str) -> TopicRouteData | None:
    reply = await call(client, ns, route_request(topic))
    if reply.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert reply.code == ResponseCode.SUCCESS and reply.body
    return TopicRouteData.decode(reply.body)


async def register_cluster(client: RemotingClient, ns: NamesrvController) -> None:
    await ok(client, ns, register_request("broker-a", A_MASTER, wrapper("T1", "T2")))
    await ok(client, ns, register_request("broker-a", A_SLAVE, wrapper("T1", "T2"), broker_id=1))
    await ok(client, ns, register_request("broker-b", B_MASTER, wrapper("T2", "T3")))


def tables(ns: NamesrvController) -> dict[str, Any]:
    rim = ns.route_info
    return copy.deepcopy(
        {
            "topics": rim.topic_queue_table,
            "brokers": {k: (v.cluster, dict(v.broker_addrs)) for k, v in rim.broker_addr_table.items()},
            "clusters": rim.cluster_addr_table,
            "live": {k: (v.last_update_ms, v.data_version) for k, v in rim.broker_live_table.items()},
            "filters": rim.filter_server_table,
        }
    )


# ---- routes ------------------------------------------------------------------------------------


async def test_register_and_route_both_json_forms(ns: NamesrvController, client: RemotingClient) -> None:
    await register_cluster(client, ns)
    standard = await ok(client, ns, route_request("T2"))
    assert b'"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}' in (standard.body or b"")
    json.loads(standard.body or b"")  # valid JSON for clients at version >= 401
    legacy = await ok(client, ns, route_request("T2", version=333))  # what the C++ client sends
    assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in (legacy.body or b"")
    flagged = await ok(client, ns, route_request("T2", version=121, accept_standard="true"))
    assert flagged.body == standard.body
    assert legacy.version == 409 and legacy.language == 0  # replies speak as a Java 4.9.8 server
    data = TopicRouteData.decode(legacy.body or b"")
    assert [q.broker_name for q in data.queue_datas] == ["broker-a", "broker-b"]
    assert [b.broker_addrs for b in data.broker_datas] == [{0: A_MASTER, 1: A_SLAVE}, {0: B_MASTER}]
    assert data.queue_datas[0].write_queue_nums == 4 and data.queue_datas[0].perm == PermName.DEFAULT
    assert data.filter_server_table == {} and data.order_topic_conf is None


async def test_unknown_topic_is_topic_not_exist(ns: NamesrvController, client: RemotingClient) -> None:
    reply = await call(client, ns, route_request("NoSuchTopic"))
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST and reply.body is None
    assert reply.remark == (
        f"No topic route info in name server for the topic: NoSuchTopic\nSee {FAQ_URL} for further details."
    )
    missing = await call(client, ns, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}))
    assert missing.code == ResponseCode.SYSTEM_ERROR and "<topic>" in (missing.remark or "")


async def test_slave_gets_master_addresses_and_kv_table(
    ns: NamesrvController, client: RemotingClient
) -> None:
    master = await ok(client, ns, register_request("broker-a", A_MASTER, wrapper("T1")))
    assert not master.ext_fields and master.body is None  # no ORDER_TOPIC_CONFIG namespace yet
    await put_order_conf(client, ns, "T1", "broker-a:4")
    slave = await ok(client, ns, register_request("broker-a", A_SLAVE, wrapper("T1"), broker_id=1))
    assert slave.ext_fields == {"haServerAddr": "10.0.0.1:10912", "masterAddr": A_MASTER}
    assert KVTable.decode(slave.body or b"").table == {"T1": "broker-a:4"}


async def test_compressed_body_crc_and_old_versions(ns: NamesrvController, client: RemotingClient) -> None:
    await ok(client, ns, register_request("broker-a", A_MASTER, wrapper("TZ"), compressed=True))
    assert (await route(client, ns, "TZ")) is not None
    bad = await call(client, ns, register_request("broker-b", B_MASTER, wrapper("TX"), crc=12345))
    assert bad.code == ResponseCode.SYSTEM_ERROR and bad.remark == "crc32 not match"
    assert (await route(client, ns, "TX")) is None
    await ok(client, ns, register_request("broker-b", B_MASTER, wrapper("TX"), crc=0))  # 0 = unchecked
    assert (await route(client, ns, "TX")) is not None
    # Before V3_0_11 (37) the body is a bare TopicConfigSerializeWrapper.
    bare = wrapper("TOld").encode()
    await ok(client, ns, register_request("broker-c", "10.0.0.9:10911", body=bare, version=36))
    assert (await route(client, ns, "TOld")) is not None
    # No body at all: the broker is known, with no topics.
    empty = register_request("broker-d", "10.0.0.8:10911", body=b"", crc=0)
    empty.body = None
    await ok(client, ns, empty)
    assert "broker-d" in ns.route_info.broker_addr_table


async def test_route_cache_follows_every_change(ns: NamesrvController, client: RemotingClient) -> None:
    await register_cluster(client, ns)
    before = await route(client, ns, "T1")
    assert before is not None and before.queue_datas[0].write_queue_nums == 4
    # A new data version with other queue numbers rebuilds the queue data.
    await ok(client, ns, register_request("broker-a", A_MASTER, wrapper(TopicConfig("T1", 8, 8), version=2)))
    after = await route(client, ns, "T1")
    assert after is not None and after.queue_datas[0].write_queue_nums == 8
    # Write permission wiped and restored.
    wiped = await ok(client, ns, request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-b"}))
    assert wiped.ext_fields == {"wipeTopicCount": "2"}
    t2 = await route(client, ns, "T2")
    assert t2 is not None and [q.perm for q in t2.queue_datas] == [6, PermName.PERM_READ]
    added = await ok(client, ns, request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-b"}))
    assert added.ext_fields == {"addTopicCount": "2"}
    t2 = await route(client, ns, "T2")
    assert t2 is not None and [q.perm for q in t2.queue_datas] == [6, 6]
    # Order topic config appears once the feature is on and the KV entry exists.
    await ok(client, ns, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n"))
    await put_order_conf(client, ns, "T2", "broker-a:4;broker-b:4")
    t2 = await route(client, ns, "T2")
    assert t2 is not None and t2.order_topic_conf == "broker-a:4;broker-b:4"
    # Unregistering the only master of T3 removes the topic.
    await ok(
        client,
        ns,
        request(
            RequestCode.UNREGISTER_BROKER,
            {"brokerName": "broker-b", "brokerAddr": B_MASTER, "clusterName": CLUSTER, "brokerId": "0"},
        ),
    )
    assert (await route(client, ns, "T3")) is None
    t2 = await route(client, ns, "T2")
    assert t2 is not None and [b.broker_name for b in t2.broker_datas] == ["broker-a"]


# ---- cluster info and topic lists --------------------------------------------------------------


async def test_cluster_info_and_topic_lists(ns: NamesrvController, client: RemotingClient) -> None:
    await register_cluster(client, ns)
    unit = TopicConfig("TUnit", 2, 2, topic_sys_flag=TopicSysFlag.build(True, False))
    unit_sub = TopicConfig("TUnitSub", 2, 2, topic_sys_flag=TopicSysFlag.build(False, True))
    await ok(
        client, ns, register_request("broker-c", "10.0.0.7:10911", wrapper(unit, unit_sub), cluster="Other")
    )
    info = ClusterInfo.decode(
        (await ok(client, ns, request(RequestCode.GET_BROKER_CLUSTER_INFO))).body or b""
    )
    assert info.cluster_addr_table == {CLUSTER: ["broker-a", "broker-b"], "Other": ["broker-c"]}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: A_MASTER, 1: A_SLAVE}

    async def topics(code: int, ext: dict[str, str] | None = None) -> TopicList:
        return TopicList.decode((await ok(client, ns, request(code, ext))).body or b"")

    everything = await topics(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert everything.topic_list == ["T1", "T2", "T3", "TUnit", "TUnitSub"]
    by_cluster = await topics(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "Other"})
    assert by_cluster.topic_list == ["TUnit", "TUnitSub"]
    system = await topics(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    assert system.topic_list == [CLUSTER, "broker-a", "broker-b", "Other", "broker-c"]
    assert system.broker_addr == A_MASTER
    assert (await topics(RequestCode.GET_UNIT_TOPIC_LIST)).topic_list == ["TUnit"]
    assert (await topics(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST)).topic_list == ["TUnitSub"]
    assert (await topics(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)).topic_list == ["TUnitSub"]


async def test_delete_topic(ns: NamesrvController, client: RemotingClient) -> None:
    await register_cluster(client, ns)
    await ok(client, ns, register_request("broker-c", "10.0.0.7:10911", wrapper("T2"), cluster="Other"))
    await ok(
        client, ns, request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T2", "clusterName": "Other"})
    )
    t2 = await route(client, ns, "T2")
    assert t2 is not None and [q.broker_name for q in t2.queue_datas] == ["broker-a", "broker-b"]
    await ok(client, ns, request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T2"}))
    assert (await route(client, ns, "T2")) is None
    await ok(client, ns, request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "NeverThere"}))


# ---- KV config ---------------------------------------------------------------------------------


async def test_kv_config_round_trip_and_persistence(
    ns: NamesrvController, client: RemotingClient, tmp_path: Path
) -> None:
    get = {"namespace": "ns1", "key": "k1"}
    absent = await call(client, ns, request(RequestCode.GET_KV_CONFIG, get))
    assert absent.code == ResponseCode.QUERY_NOT_FOUND
    assert absent.remark == "No config item, Namespace: ns1 Key: k1"
    listing = await call(client, ns, request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns1"}))
    assert listing.code == ResponseCode.QUERY_NOT_FOUND and listing.remark == "No config item, Namespace: ns1"

    await ok(client, ns, request(RequestCode.PUT_KV_CONFIG, {**get, "value": "v1"}))
    await ok(client, ns, request(RequestCode.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k2", "value": "v2"}))
    # Persisted before the reply: the file already holds both entries.
    on_disk = json.loads((tmp_path / "kvConfig.json").read_text())
    assert on_disk == {"configTable": {"ns1": {"k1": "v1", "k2": "v2"}}}
    got = await ok(client, ns, request(RequestCode.GET_KV_CONFIG, get))
    assert got.ext_fields == {"value": "v1"}
    table = await ok(client, ns, request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns1"}))
    assert KVTable.decode(table.body or b"").table == {"k1": "v1", "k2": "v2"}
    await ok(client, ns, request(RequestCode.DELETE_KV_CONFIG, get))
    assert (
        await call(client, ns, request(RequestCode.GET_KV_CONFIG, get))
    ).code == ResponseCode.QUERY_NOT_FOUND
    missing_field = await call(
        client, ns, request(RequestCode.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k"})
    )
    assert missing_field.code == ResponseCode.SYSTEM_ERROR and "<value>" in (missing_field.remark or "")

    # Concurrent writers: every reply comes after a snapshot holding its own change.
    puts = [
        call(
            client,
            ns,
            request(RequestCode.PUT_KV_CONFIG, {"namespace": "bulk", "key": f"k{i}", "value": str(i)}),
        )
        for i in range(50)
    ]
    assert {r.code for r in await asyncio.gather(*puts)} == {0}
    assert json.loads((tmp_path / "kvConfig.json").read_text())["configTable"]["bulk"] == {
        f"k{i}": str(i) for i in range(50)
    }

    # A new name server on the same file starts with the table.
    again = NamesrvController(ns_config(tmp_path), fsync=False)
    await again.start()
    try:
        reply = await client.invoke(
            again.addr, request(RequestCode.GET_KV_CONFIG, {"namespace": "ns1", "key": "k2"})
        )
        assert reply.code == 0 and reply.ext_fields == {"value": "v2"}
    finally:
        await again.shutdown()


# ---- name server config ------------------------------------------------------------------------


async def test_get_and_update_namesrv_config(
    ns: NamesrvController, client: RemotingClient, tmp_path: Path
) -> None:
    async def current() -> dict[str, str]:
        return properties.loads((await ok(client, ns, request(RequestCode.GET_NAMESRV_CONFIG))).body or b"")

    props = await current()
    assert props["listenPort"] == "0" and props["orderMessageEnable"] == "false"
    assert props["kvConfigPath"] == str(tmp_path / "kvConfig.json")

    body = b"orderMessageEnable=true\nbrokerChannelExpiredTime=60000\nserverWorkerThreads=8\n"
    await ok(client, ns, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body))
    props = await current()
    assert props["orderMessageEnable"] == "true" and props["brokerChannelExpiredTime"] == "60000"
    assert ns.route_info.broker_channel_expired_ms == 60000  # effective at once
    stored = properties.loads((tmp_path / "namesrv.properties").read_bytes())
    assert stored["orderMessageEnable"] == "true"

    for black in (
        b"kvConfigPath=/tmp/elsewhere\n",
        b"kv_config_path=/tmp/elsewhere\n",
        b"configBlackList=\n",
    ):
        refused = await call(client, ns, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=black))
        assert refused.code == ResponseCode.NO_PERMISSION
        assert (refused.remark or "").startswith("Can not update config in black list")
    unknown = await call(client, ns, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"noSuchKey=1\n"))
    assert unknown.code == ResponseCode.SYSTEM_ERROR and "noSuchKey" in (unknown.remark or "")
    bad_value = await call(
        client, ns, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"brokerChannelExpiredTime=soon\n")
    )
    assert bad_value.code == ResponseCode.SYSTEM_ERROR and "brokerChannelExpiredTime" in (
        bad_value.remark or ""
    )
    props_after = await current()
    assert props_after == props  # refused updates changed nothing
    # Pipelined updates of different keys both stick (none is built on a stale config).
    await asyncio.gather(
        ok(client, ns, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"productEnvName=one\n")),
        ok(client, ns, request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"clusterTest=true\n")),
    )
    props = await current()
    assert props["productEnvName"] == "one" and props["clusterTest"] == "true"
    stored = properties.loads((tmp_path / "namesrv.properties").read_bytes())
    assert stored["productEnvName"] == "one" and stored["clusterTest"] == "true"
    assert (await call(client, ns, request(RequestCode.UPDATE_NAMESRV_CONFIG))).code == 0  # empty body: no-op


# ---- liveness ----------------------------------------------------------------------------------


async def test_query_data_version_and_expiry(
    ns: NamesrvController, client: RemotingClient, clock: FakeClock
) -> None:
    broker = RemotingClient(RemotingClientConfig(request_timeout=5.0))
    try:
        version = DataVersion(1_700_000_000_000, 1)
        await ok(broker, ns, register_request("broker-a", A_MASTER, wrapper("T1")))
        conn = await broker.get_connection(ns.addr)
        ext = {"brokerName": "broker-a", "brokerAddr": A_MASTER, "clusterName": CLUSTER, "brokerId": "0"}
        clock.advance(100)
        same = await ok(broker, ns, request(RequestCode.QUERY_DATA_VERSION, ext, version.encode()))
        assert same.ext_fields == {"changed": "false"} and DataVersion.decode(same.body or b"") == version
        other = await ok(broker, ns, request(RequestCode.QUERY_DATA_VERSION, ext, DataVersion(1, 9).encode()))
        assert other.ext_fields == {"changed": "true"}
        # The unchanged query counted as a heartbeat: 130 s after registering it is still alive.
        clock.advance(30)
        await asyncio.sleep(0.3)  # a few scans
        assert (await route(client, ns, "T1")) is not None
        clock.advance(91)
        await wait_until(lambda: A_MASTER not in ns.route_info.broker_live_table)
        assert (await route(client, ns, "T1")) is None
        # The expired broker's connection was closed by the name server.
        await asyncio.wait_for(conn.wait_closed(), 3)
    finally:
        await broker.close()


async def test_closed_broker_connection_removes_broker(ns: NamesrvController, client: RemotingClient) -> None:
    broker = RemotingClient()
    await ok(broker, ns, register_request("broker-a", A_MASTER, wrapper("T1")))
    await ok(client, ns, register_request("broker-b", B_MASTER, wrapper("T1")))
    t1 = await route(client, ns, "T1")
    assert t1 is not None and len(t1.broker_datas) == 2
    await broker.close()

    async def only_b() -> bool:
        data = await route(client, ns, "T1")
        return data is not None and [b.broker_name for b in data.broker_datas] == ["broker-b"]

    await wait_until(only_b)
    assert "broker-a" not in ns.route_info.broker_addr_table
    # Plain client connections closing do not disturb anything.
    other = RemotingClient()
    await ok(other, ns, route_request("T1"))
    await other.close()
    await asyncio.sleep(0.1)
    assert "broker-b" in ns.route_info.broker_addr_table


async def test_unknown_code_is_request_code_not_supported(
    ns: NamesrvController, client: RemotingClient
) -> None:
    reply = await call(client, ns, request(9999))
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert reply.remark == " request type 9999 not supported"


# ---- bad input ---------------------------------------------------------------------------------


def _topic_json(name: str, read: int | str = 4) -> str:
    return (
        f'"{name}":{{"order":false,"perm":6,"readQueueNums":{read},"topicFilterType":"SINGLE_TAG",'
        f'"topicName":"{name}","topicSysFlag":0,"writeQueueNums":4}}'
    )


def big_register_body(megabytes: float, *, last: str | None = None) -> tuple[bytes, int]:
    """A plain register body of about ``megabytes`` MB; ``last`` replaces the final topic entry."""
    one = len(_topic_json("T0000000"))
    count = int(megabytes * 1024 * 1024 / (one + 1))
    entries = [_topic_json(f"T{i:07d}") for i in range(count)]
    if last is not None:
        entries[-1] = last
    body = (
        '{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},'
        '"topicConfigTable":{' + ",".join(entries) + "}}}"
    )
    return body.encode(), count


BAD_REGISTRATIONS = {
    "malformed json": (
        register_request(
            "broker-x", "10.0.0.5:10911", body=b'{"topicConfigSerializeWrapper":{"topicConfigTable":{'
        ),
        "unparseable body",
    ),
    "body is an array": (
        register_request("broker-x", "10.0.0.5:10911", body=b"[1,2,3]"),
        "expected an object",
    ),
    "queue nums not a number": (
        register_request(
            "broker-x",
            "10.0.0.5:10911",
            body=b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"readQueueNums":"many"}}}}',
        ),
        "readQueueNums",
    ),
    "empty cluster name": (
        register_request("broker-x", "10.0.0.5:10911", cluster=""),
        "clusterName is missing",
    ),
    "blank broker name": (register_request("  ", "10.0.0.5:10911"), "brokerName"),
    "negative broker id": (
        register_request("broker-x", "10.0.0.5:10911", broker_id=-1),
        "brokerId -1 is negative",
    ),
    "broker id not a number": (register_request("broker-x", "10.0.0.5:10911", broker_id="one"), "brokerId"),
    "address without port": (register_request("broker-x", "10.0.0.5"), "brokerAddr"),
    "compressed garbage": (
        register_request("broker-x", "10.0.0.5:10911", body=b"\x00garbage", compressed=True),
        "not a zlib stream",
    ),
    "compressed truncated": (
        register_request(
            "broker-x",
            "10.0.0.5:10911",
            body=RegisterBrokerBody(wrapper("T1", "T2")).encode(compress=True)[:-6],
            compressed=True,
        ),
        "truncated",
    ),
    "negative queue count": (
        register_request("broker-x", "10.0.0.5:10911", wrapper(TopicConfig("T", -1, 4))),
        "readQueueNums",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_REGISTRATIONS))
async def test_bad_registrations_change_nothing(
    ns: NamesrvController, client: RemotingClient, case: str
) -> None:
    await register_cluster(client, ns)
    before = tables(ns)
    cmd, remark_part = BAD_REGISTRATIONS[case]
    reply = await call(client, ns, cmd)
    assert reply.code == ResponseCode.SYSTEM_ERROR, reply
    assert remark_part in (reply.remark or ""), reply.remark
    assert tables(ns) == before
    assert (await route(client, ns, "T2")) is not None  # still serving, on the same connection


async def test_missing_header_fields(ns: NamesrvController, client: RemotingClient) -> None:
    cmd = register_request("broker-x", "10.0.0.5:10911")
    assert cmd.ext_fields is not None
    del cmd.ext_fields["clusterName"]
    reply = await call(client, ns, cmd)
    assert reply.code == ResponseCode.SYSTEM_ERROR and "<clusterName>" in (reply.remark or "")
    assert ns.route_info.broker_addr_table == {}


async def test_ten_megabyte_topic_lists(ns: NamesrvController, client: RemotingClient) -> None:
    await register_cluster(client, ns)
    before = tables(ns)
    # 10 MB of topics whose very last entry is invalid: refused as a whole.
    body, count = big_register_body(10, last=_topic_json("TBad", read=-5))
    assert len(body) > 10_000_000
    reply = await call(client, ns, register_request("broker-x", "10.0.0.5:10911", body=body))
    assert reply.code == ResponseCode.SYSTEM_ERROR and "readQueueNums: -5" in (reply.remark or "")
    assert tables(ns) == before
    # 10 MB of topic names that are far too long (each name appears twice: key and topicName).
    huge_name = "T" * 1_000_000
    body = (
        '{"topicConfigSerializeWrapper":{"topicConfigTable":{'
        + ",".join(_topic_json(f"{huge_name}{i}") for i in range(5))
        + "}}}"
    ).encode()
    reply = await call(client, ns, register_request("broker-x", "10.0.0.5:10911", body=body))
    assert len(body) > 10_000_000
    assert reply.code == ResponseCode.SYSTEM_ERROR and "longer than" in (reply.remark or "")
    assert tables(ns) == before
    # The same 10 MB of valid topics is a legitimate (large) broker: accepted, like Java does.
    body, count = big_register_body(10)
    await ok(client, ns, register_request("broker-x", "10.0.0.5:10911", body=body))
    assert len(ns.route_info.topic_queue_table) == count + 3  # plus T1..T3 of broker-a/b
    last = await route(client, ns, f"T{count - 1:07d}")
    assert last is not None and last.broker_datas[0].broker_addrs == {0: "10.0.0.5:10911"}
    assert (await route(client, ns, "T2")) is not None


async def test_unknown_body_fields_are_ignored(ns: NamesrvController, client: RemotingClient) -> None:
    """Newer brokers add fields (5.x: topicQueueMappingInfoMap, attributes...): accepted, as fastjson does."""
    body = json.dumps(
        {
            "filterServerList": [],
            "someFutureField": {"x": 1},
            "topicConfigSerializeWrapper": {
                "dataVersion": {"counter": 3, "timestamp": 5, "stateVersion": 0},
                "topicConfigTable": {
                    "TNew": {
                        "topicName": "TNew",
                        "readQueueNums": 2,
                        "writeQueueNums": 2,
                        "attributes": {"+a": "b"},
                    }
                },
                "topicQueueMappingInfoMap": {},
            },
        }
    ).encode()
    await ok(client, ns, register_request("broker-n", "10.0.0.6:10911", body=body))
    data = await route(client, ns, "TNew")
    assert data is not None and data.queue_datas[0].read_queue_nums == 2
    header_extra = register_request("broker-m", "10.0.0.4:10911", wrapper("TM"))
    assert header_extra.ext_fields is not None
    header_extra.ext_fields["unknownHeaderField"] = "x"
    await ok(client, ns, header_extra)


async def test_framing_garbage_closes_only_that_connection(
    ns: NamesrvController, client: RemotingClient
) -> None:
    await register_cluster(client, ns)
    host, port = ns.addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"\x7f\xff\xff\xff" + b"x" * 64)  # a 2 GiB length prefix
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 3) == b""  # closed by the server
    writer.close()
    assert (await route(client, ns, "T1")) is not None
    assert fastjson.loads((await ok(client, ns, request(RequestCode.GET_BROKER_CLUSTER_INFO))).body or b"")
