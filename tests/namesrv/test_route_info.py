from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from pocketmq.namesrv.config import KNOWN_UNSUPPORTED_KEYS, NamesrvConfig, load_namesrv_config
from pocketmq.namesrv.kv_config import KVConfigManager
from pocketmq.namesrv.route_info import RegistrationError, RouteInfoManager
from pocketmq.remoting.common.clock import FakeClock
from pocketmq.remoting.common.config import ConfigError, render_config
from pocketmq.remoting.protocol.route import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicSysFlag,
)
from tests.namesrv.test_processor import A_MASTER, A_SLAVE, B_MASTER, wrapper

REPO = Path(__file__).resolve().parents[2]


class Channel:
    """Stands in for a transport connection; identity is what counts."""

    def __init__(self, name: str) -> None:
        self.name = name


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rim(clock: FakeClock) -> RouteInfoManager:
    return RouteInfoManager(NamesrvConfig(), clock=clock)


def register_cluster(rim: RouteInfoManager) -> None:
    rim.register_broker("DefaultCluster", A_MASTER, "broker-a", 0, "10.0.0.1:10912", wrapper("T1", "T2"))
    rim.register_broker("DefaultCluster", A_SLAVE, "broker-a", 1, "10.0.0.2:10912", wrapper("T1", "T2"))
    rim.register_broker("DefaultCluster", B_MASTER, "broker-b", 0, "10.0.0.3:10912", wrapper("T2", "T3"))


def tables(rim: RouteInfoManager) -> dict[str, Any]:
    return copy.deepcopy(
        {
            "topics": rim.topic_queue_table,
            "brokers": {k: (v.cluster, dict(v.broker_addrs)) for k, v in rim.broker_addr_table.items()},
            "clusters": rim.cluster_addr_table,
            "live": {
                k: (v.last_update_ms, v.data_version, v.ha_server_addr)
                for k, v in rim.broker_live_table.items()
            },
            "filters": rim.filter_server_table,
        }
    )


def assert_empty(rim: RouteInfoManager) -> None:
    assert rim.topic_queue_table == {}
    assert rim.broker_addr_table == {}
    assert rim.cluster_addr_table == {}
    assert rim.broker_live_table == {}
    assert rim.filter_server_table == {}


# -- registration -----------------------------------------------------------------------------


def test_master_registration_builds_every_table(rim: RouteInfoManager) -> None:
    result = rim.register_broker(
        "DefaultCluster", A_MASTER, "broker-a", 0, "10.0.0.1:10912", wrapper("T1", TopicConfig("T2", 8, 2, 4))
    )
    assert result.master_addr is None and result.ha_server_addr is None and result.kv_table is None
    assert rim.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: A_MASTER}
    assert rim.topic_queue_table["T2"] == {"broker-a": QueueData("broker-a", 8, 2, 4, 0)}
    live = rim.broker_live_table[A_MASTER]
    assert live.data_version == DataVersion(1_700_000_000_000, 1)
    assert live.ha_server_addr == "10.0.0.1:10912"
    route = rim.pickup_topic_route_data("T1")
    assert route is not None
    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6, 0)]
    assert [b.broker_addrs for b in route.broker_datas] == [{0: A_MASTER}]
    assert rim.pickup_topic_route_data("nope") is None


def test_slave_registration_result_and_queue_data_from_master_only(rim: RouteInfoManager) -> None:
    rim.register_broker("DefaultCluster", A_MASTER, "broker-a", 0, "10.0.0.1:10912", wrapper("T1"))
    result = rim.register_broker(
        "DefaultCluster",
        A_SLAVE,
        "broker-a",
        1,
        "10.0.0.2:10912",
        wrapper(TopicConfig("T1", 99, 99), "SLAVE_ONLY"),
    )
    assert result.master_addr == A_MASTER
    assert result.ha_server_addr == "10.0.0.1:10912"
    assert rim.topic_queue_table["T1"]["broker-a"].read_queue_nums == 4  # the slave's 99 is ignored
    assert "SLAVE_ONLY" not in rim.topic_queue_table
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: A_MASTER, 1: A_SLAVE}


def test_slave_without_live_master_gets_no_master(rim: RouteInfoManager) -> None:
    result = rim.register_broker("DefaultCluster", A_SLAVE, "broker-a", 1, "10.0.0.2:10912", wrapper("T1"))
    assert result.master_addr is None and result.ha_server_addr is None
    assert rim.pickup_topic_route_data("T1") is None  # no master registered queue data yet


def test_queue_data_rebuilt_only_when_data_version_changes(rim: RouteInfoManager) -> None:
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1", version=1))
    assert rim.wipe_write_perm_of_broker("broker-a") == 1
    # same version: the periodic re-registration does not undo an operator's wipe (as in Java)
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1", version=1))
    assert rim.topic_queue_table["T1"]["broker-a"].perm == 4
    assert not rim.is_broker_topic_config_changed(A_MASTER, DataVersion(1_700_000_000_000, 1))
    # a new version rebuilds: perm comes back, a new topic appears, queue counts change
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper(TopicConfig("T1", 2, 2), "T9", version=2))
    assert rim.topic_queue_table["T1"]["broker-a"] == QueueData("broker-a", 2, 2, 6, 0)
    assert "T9" in rim.topic_queue_table
    assert rim.query_broker_topic_config(A_MASTER) == DataVersion(1_700_000_000_000, 2)


def test_topics_missing_from_registration_stay_unless_configured(clock: FakeClock) -> None:
    rim = RouteInfoManager(NamesrvConfig(), clock=clock)
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1", "T2", version=1))
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1", version=2))
    assert "T2" in rim.topic_queue_table  # 4.x behaviour: only DELETE_TOPIC removes it
    strict = RouteInfoManager(NamesrvConfig(delete_topic_with_broker_registration=True), clock=clock)
    strict.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1", "T2", version=1))
    strict.register_broker("C", B_MASTER, "broker-b", 0, None, wrapper("T2", version=1))
    strict.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1", version=2))
    assert strict.topic_queue_table["T2"] == {"broker-b": QueueData("broker-b", 4, 4, 6, 0)}


def test_slave_promoted_to_master_drops_its_old_id(rim: RouteInfoManager) -> None:
    register_cluster(rim)
    rim.unregister_broker("DefaultCluster", A_MASTER, "broker-a", 0)
    rim.register_broker("DefaultCluster", A_SLAVE, "broker-a", 0, "10.0.0.2:10912", wrapper("T1", version=7))
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: A_SLAVE}


def test_master_replaced_by_new_address(rim: RouteInfoManager) -> None:
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1"))
    rim.register_broker("C", "10.0.0.9:10911", "broker-a", 0, None, wrapper("T1", version=2))
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.9:10911"}
    # the old instance's late unregister must not remove its successor
    assert rim.unregister_broker("C", A_MASTER, "broker-a", 0) is not None
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.9:10911"}
    assert "T1" in rim.topic_queue_table


def test_broker_moving_to_another_cluster_leaves_the_old_one(rim: RouteInfoManager) -> None:
    rim.register_broker("C1", A_MASTER, "broker-a", 0, None, wrapper("T1"))
    rim.register_broker("C2", A_MASTER, "broker-a", 0, None, wrapper("T1"))
    assert rim.cluster_addr_table == {"C2": {"broker-a"}}
    assert rim.broker_addr_table["broker-a"].cluster == "C2"


def test_filter_servers(rim: RouteInfoManager) -> None:
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1"), ["10.0.0.1:3000"])
    route = rim.pickup_topic_route_data("T1")
    assert route is not None and route.filter_server_table == {A_MASTER: ["10.0.0.1:3000"]}
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1"), [])
    assert rim.filter_server_table == {}
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1"), None)  # None: unchanged
    assert rim.filter_server_table == {}


BAD_REGISTRATIONS: list[tuple[str, dict[str, Any]]] = [
    ("clusterName is missing", {"cluster_name": ""}),
    ("brokerName is missing", {"broker_name": ""}),
    ("brokerName", {"broker_name": "   "}),
    ("brokerName", {"broker_name": "x" * 300}),
    ("brokerAddr is missing", {"broker_addr": ""}),
    ("not host:port", {"broker_addr": "10.0.0.1"}),
    ("not host:port", {"broker_addr": "10.0.0.1:99999"}),
    ("negative", {"broker_id": -1}),
    ("brokerId must be an integer", {"broker_id": "0"}),
    ("filter servers", {"filter_server_list": ["x:1"] * 2000}),
    ("readQueueNums", {"topic_config_wrapper": wrapper(TopicConfig("T1", 10**6, 4))}),
    ("topic name", {"topic_config_wrapper": wrapper(TopicConfig("", 4, 4))}),
    ("negative perm", {"topic_config_wrapper": wrapper(TopicConfig("T1", 4, 4, -1))}),
]


@pytest.mark.parametrize(("remark", "change"), BAD_REGISTRATIONS)
def test_bad_registrations_leave_tables_unchanged(
    rim: RouteInfoManager, remark: str, change: dict[str, Any]
) -> None:
    register_cluster(rim)
    before = tables(rim)
    args: dict[str, Any] = {
        "cluster_name": "DefaultCluster",
        "broker_addr": "10.0.0.7:10911",
        "broker_name": "broker-x",
        "broker_id": 0,
        "ha_server_addr": None,
        "topic_config_wrapper": wrapper("T1", "T7"),
        "filter_server_list": None,
    }
    args.update(change)
    with pytest.raises(RegistrationError) as info:
        rim.register_broker(**args)
    assert remark in info.value.remark
    assert isinstance(info.value, ValueError)
    assert tables(rim) == before


# -- liveness ---------------------------------------------------------------------------------


def test_expiry_at_120_s_and_not_before(rim: RouteInfoManager, clock: FakeClock) -> None:
    register_cluster(rim)
    clock.advance(60)
    rim.register_broker(
        "DefaultCluster", B_MASTER, "broker-b", 0, None, wrapper("T2", "T3")
    )  # b is refreshed
    clock.advance(60)  # a: exactly 120 s since its last registration
    assert rim.scan_not_active_brokers() == []
    clock.advance_ms(1)
    removed = rim.scan_not_active_brokers()
    assert sorted(r.broker_addr for r in removed) == [A_MASTER, A_SLAVE]
    assert all(r.broker_name == "broker-a" for r in removed)
    assert any(r.broker_name_removed for r in removed)
    assert "broker-a" not in rim.broker_addr_table
    assert rim.cluster_addr_table == {"DefaultCluster": {"broker-b"}}
    assert "T1" not in rim.topic_queue_table  # its only broker is gone
    assert rim.topic_queue_table["T2"] == {"broker-b": QueueData("broker-b", 4, 4, 6, 0)}
    clock.advance(60)
    assert [r.broker_addr for r in rim.scan_not_active_brokers()] == [B_MASTER]
    assert_empty(rim)


def test_scan_with_explicit_now_and_configured_expiry(clock: FakeClock) -> None:
    rim = RouteInfoManager(NamesrvConfig(broker_channel_expired_time=5_000), clock=clock)
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1"))
    now = clock.monotonic_ms()
    assert rim.scan_not_active_brokers(now + 5_000) == []
    assert len(rim.scan_not_active_brokers(now + 5_001)) == 1
    assert_empty(rim)


def test_wall_clock_jump_does_not_expire_brokers(rim: RouteInfoManager, clock: FakeClock) -> None:
    register_cluster(rim)
    clock.set_wall_ms(clock.now_ms() + 10 * 3600 * 1000)
    assert rim.scan_not_active_brokers() == []


def test_query_data_version_refreshes_liveness_when_unchanged(
    rim: RouteInfoManager, clock: FakeClock
) -> None:
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1", version=3))
    clock.advance(100)
    changed, stored = rim.query_data_version(A_MASTER, DataVersion(1_700_000_000_000, 3))
    assert (changed, stored) == (False, DataVersion(1_700_000_000_000, 3))
    clock.advance(100)
    assert rim.scan_not_active_brokers() == []  # 100 s since the query
    changed, _ = rim.query_data_version(A_MASTER, DataVersion(1_700_000_000_000, 4))
    assert changed
    clock.advance(21)
    assert len(rim.scan_not_active_brokers()) == 1  # a changed version does not count as alive
    assert rim.query_data_version(A_MASTER, DataVersion()) == (True, None)


def test_channel_close_removes_broker_at_once(rim: RouteInfoManager) -> None:
    ch_a, ch_b = Channel("a"), Channel("b")
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1"), channel=ch_a)
    rim.register_broker("C", B_MASTER, "broker-b", 0, None, wrapper("T1"), channel=ch_b)
    removed = rim.on_channel_destroy("10.0.0.1:53211", ch_a)  # remote addr is the ephemeral port
    assert removed is not None and removed.broker_addr == A_MASTER and removed.channel is ch_a
    assert rim.topic_queue_table["T1"] == {"broker-b": QueueData("broker-b", 4, 4, 6, 0)}
    assert rim.on_channel_destroy("10.0.0.1:53211", ch_a) is None  # already gone
    assert rim.on_channel_destroy(B_MASTER) is not None  # by address when no channel is known
    assert_empty(rim)


def test_closing_a_stale_channel_keeps_the_reregistered_broker(rim: RouteInfoManager) -> None:
    old, new = Channel("old"), Channel("new")
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1"), channel=old)
    rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1"), channel=new)
    assert rim.on_channel_destroy("10.0.0.1:40000", old) is None
    assert rim.broker_live_table[A_MASTER].channel is new
    assert rim.pickup_topic_route_data("T1") is not None


def test_on_channel_destroy_of_unknown_peer(rim: RouteInfoManager) -> None:
    register_cluster(rim)
    before = tables(rim)
    assert rim.on_channel_destroy("10.9.9.9:1234", Channel("client")) is None
    assert rim.on_channel_destroy(None) is None
    assert tables(rim) == before


# -- unregister -------------------------------------------------------------------------------


def test_master_gone_slave_kept_then_all_gone(rim: RouteInfoManager) -> None:
    register_cluster(rim)
    removed = rim.unregister_broker("DefaultCluster", A_MASTER, "broker-a", 0)
    assert removed is not None and not removed.broker_name_removed
    assert rim.broker_addr_table["broker-a"].broker_addrs == {1: A_SLAVE}
    route = rim.pickup_topic_route_data("T1")
    assert route is not None  # consumers can still read from the slave
    assert route.broker_datas[0].master_addr is None
    assert rim.topic_queue_table["T1"] == {"broker-a": QueueData("broker-a", 4, 4, 6, 0)}
    removed = rim.unregister_broker("DefaultCluster", A_SLAVE, "broker-a", 1)
    assert removed is not None and removed.broker_name_removed
    assert "T1" not in rim.topic_queue_table
    assert rim.topic_queue_table["T2"].keys() == {"broker-b"}
    rim.unregister_broker("DefaultCluster", B_MASTER, "broker-b", 0)
    assert_empty(rim)
    assert rim.unregister_broker("DefaultCluster", B_MASTER, "broker-b", 0) is None


def test_slave_reregistration_after_master_gone(rim: RouteInfoManager) -> None:
    register_cluster(rim)
    rim.unregister_broker("DefaultCluster", A_MASTER, "broker-a", 0)
    result = rim.register_broker("DefaultCluster", A_SLAVE, "broker-a", 1, "10.0.0.2:10912", wrapper("T1"))
    assert result.master_addr is None


# -- queries ----------------------------------------------------------------------------------


def test_cluster_info(rim: RouteInfoManager) -> None:
    register_cluster(rim)
    rim.register_broker("Other", "10.0.1.1:10911", "broker-z", 0, None, wrapper("TZ"))
    info = rim.get_all_cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a", "broker-b"], "Other": ["broker-z"]}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: A_MASTER, 1: A_SLAVE}
    assert info.encode(standard_json=False).startswith(b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:')
    info.broker_addr_table["broker-a"].broker_addrs.clear()  # a copy: tables are untouched
    assert rim.broker_addr_table["broker-a"].broker_addrs


def test_topic_lists(rim: RouteInfoManager) -> None:
    register_cluster(rim)
    rim.register_broker("Other", "10.0.1.1:10911", "broker-z", 0, None, wrapper("TZ"))
    assert rim.get_all_topic_list().topic_list == ["T1", "T2", "T3", "TZ"]
    assert rim.get_topics_by_cluster("DefaultCluster").topic_list == ["T1", "T2", "T3"]
    assert rim.get_topics_by_cluster("Other").topic_list == ["TZ"]
    assert rim.get_topics_by_cluster("missing").topic_list == []
    system = rim.get_system_topic_list()
    assert system.topic_list == ["DefaultCluster", "broker-a", "broker-b", "Other", "broker-z"]
    assert system.broker_addr == A_MASTER


def test_unit_topic_lists(rim: RouteInfoManager) -> None:
    rim.register_broker(
        "C",
        A_MASTER,
        "broker-a",
        0,
        None,
        wrapper(
            TopicConfig("UNIT", topic_sys_flag=TopicSysFlag.FLAG_UNIT),
            TopicConfig("SUB", topic_sys_flag=TopicSysFlag.FLAG_UNIT_SUB),
            TopicConfig("BOTH", topic_sys_flag=TopicSysFlag.build(True, True)),
            "PLAIN",
        ),
    )
    assert rim.get_unit_topics().topic_list == ["BOTH", "UNIT"]
    assert rim.get_has_unit_sub_topic_list().topic_list == ["BOTH", "SUB"]
    assert rim.get_has_unit_sub_un_unit_topic_list().topic_list == ["SUB"]


def test_delete_topic_everywhere_and_per_cluster(rim: RouteInfoManager) -> None:
    register_cluster(rim)
    rim.register_broker("Other", "10.0.1.1:10911", "broker-z", 0, None, wrapper("T2"))
    assert rim.delete_topic("T2", "Other")
    assert rim.topic_queue_table["T2"].keys() == {"broker-a", "broker-b"}
    assert not rim.delete_topic("T2", "Other")
    assert rim.delete_topic("T2", "DefaultCluster")
    assert "T2" not in rim.topic_queue_table
    assert rim.delete_topic("T1")
    assert rim.pickup_topic_route_data("T1") is None
    assert not rim.delete_topic("T1")
    # brokers stay registered after their topics are deleted
    assert set(rim.broker_addr_table) == {"broker-a", "broker-b", "broker-z"}


def test_wipe_and_add_write_perm(rim: RouteInfoManager) -> None:
    register_cluster(rim)
    assert rim.wipe_write_perm_of_broker("broker-a") == 2
    assert {t: q["broker-a"].perm for t, q in rim.topic_queue_table.items() if "broker-a" in q} == {
        "T1": 4,
        "T2": 4,
    }
    assert rim.topic_queue_table["T2"]["broker-b"].perm == 6
    assert rim.wipe_write_perm_of_broker("missing") == 0
    assert rim.add_write_perm_of_broker("broker-a") == 2
    assert rim.topic_queue_table["T1"]["broker-a"].perm == 6


def test_route_json_golden_from_tables(rim: RouteInfoManager) -> None:
    register_cluster(rim)
    route = rim.pickup_topic_route_data("T1")
    assert route is not None
    assert route.encode(standard_json=False) == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
        b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    t2 = rim.pickup_topic_route_data("T2")
    assert t2 is not None
    assert [q.broker_name for q in t2.queue_datas] == ["broker-a", "broker-b"]
    assert [b.broker_name for b in t2.broker_datas] == ["broker-a", "broker-b"]


def test_order_topic_conf_from_kv(clock: FakeClock) -> None:
    kv = KVConfigManager(None)
    kv.put_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, "T1", "broker-a:4")
    plain = RouteInfoManager(NamesrvConfig(), clock=clock, kv=kv)
    ordered = RouteInfoManager(NamesrvConfig(order_message_enable=True), clock=clock, kv=kv)
    for rim in (plain, ordered):
        result = rim.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1", "T2"))
        assert result.kv_table is not None and result.kv_table.table == {"T1": "broker-a:4"}
    r1 = plain.pickup_topic_route_data("T1")
    assert r1 is not None and r1.order_topic_conf is None
    r2 = ordered.pickup_topic_route_data("T1")
    assert r2 is not None and r2.order_topic_conf == "broker-a:4"
    assert b'"orderTopicConf":"broker-a:4"' in r2.encode()
    r3 = ordered.pickup_topic_route_data("T2")
    assert r3 is not None and r3.order_topic_conf is None
    quiet = RouteInfoManager(NamesrvConfig(return_order_topic_config_to_broker=False), clock=clock, kv=kv)
    assert quiet.register_broker("C", A_MASTER, "broker-a", 0, None, wrapper("T1")).kv_table is None


# -- config -----------------------------------------------------------------------------------


def test_namesrv_config_defaults() -> None:
    conf = NamesrvConfig()
    assert conf.listen_port == 9876
    assert conf.broker_channel_expired_time == 120_000
    assert conf.scan_not_active_broker_interval == 10_000
    assert conf.kv_config_path.endswith("namesrv/kvConfig.json")
    assert conf.config_black_list_keys == {"configBlackList", "configStorePath", "kvConfigPath"}


def test_shipped_namesrv_conf_loads() -> None:
    conf = load_namesrv_config(str(REPO / "conf" / "namesrv.conf"))
    assert conf.listen_port == 9876
    assert conf.order_message_enable is False


def test_java_namesrv_conf_with_netty_keys(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.conf"
    path.write_text(
        "listenPort=19876\nserverWorkerThreads=16\nkvConfigPath=/tmp/kv.json\norderMessageEnable=true\n"
        "clientRequestThreadPoolNums=8\n"
    )
    conf = load_namesrv_config(str(path), ["brokerChannelExpiredTime=30000"])
    assert (conf.listen_port, conf.kv_config_path, conf.order_message_enable) == (19876, "/tmp/kv.json", True)
    assert conf.broker_channel_expired_time == 30_000
    assert "serverWorkerThreads" in KNOWN_UNSUPPORTED_KEYS
    path.write_text("listenPrt=1\n")
    with pytest.raises(ConfigError, match="listenPort"):
        load_namesrv_config(str(path))
    with pytest.raises(ConfigError, match="scanNotActiveBrokerInterval"):
        load_namesrv_config(None, ["scanNotActiveBrokerInterval=0"])
    assert "listenPort=9876" in render_config(NamesrvConfig()).splitlines()
