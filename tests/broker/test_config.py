"""BrokerConfig: RocketMQ keys and defaults, the flat-file split, overrides and errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pocketmq.broker.config import BrokerConfig, ConfigError, load_broker_config, local_address
from pocketmq.store.config import BrokerRole, FlushDiskType

JAVA_BROKER_CONF = """\
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = ASYNC_FLUSH
# keys of NettyServerConfig / BrokerConfig that pocketmq does not implement
sendMessageThreadPoolNums=16
serverWorkerThreads=8
listenPort=10921
brokerIP1=10.1.2.3
mappedFileSizeCommitLog=1048576
storePathRootDir=/tmp/pocketmq-conf-test
"""


def test_defaults_are_rocketmq_defaults(monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    c = BrokerConfig(brokerName="b")
    assert (c.broker_cluster_name, c.broker_id, c.listen_port, c.broker_permission) == (
        "DefaultCluster",
        0,
        10911,
        6,
    )
    assert c.auto_create_topic_enable and c.auto_create_subscription_group and c.long_polling_enable
    assert (c.default_topic_queue_nums, c.register_name_server_period, c.flush_consumer_offset_interval) == (
        8,
        30000,
        5000,
    )
    assert c.short_polling_time_mills == 1000 and c.max_message_size == 4 * 1024 * 1024
    assert (
        c.store.flush_disk_type is FlushDiskType.ASYNC_FLUSH
        and c.store.broker_role is BrokerRole.ASYNC_MASTER
    )
    assert c.namesrv_addr is None
    assert c.broker_ip1 == local_address()  # a non-loopback IPv4 when the host has one


def test_java_broker_conf_loads_and_splits(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text(JAVA_BROKER_CONF)
    c = load_broker_config(path, ["flushDiskType=SYNC_FLUSH"], namesrv_addr="127.0.0.1:9876;127.0.0.2:9876")
    assert c.broker_name == "broker-a" and c.listen_port == 10921 and c.broker_ip1 == "10.1.2.3"
    assert c.store.file_reserved_time == 48 and c.store.mapped_file_size_commit_log == 1 << 20
    assert c.store.flush_disk_type is FlushDiskType.SYNC_FLUSH  # --set wins over the file
    assert c.namesrv_addr_list == ["127.0.0.1:9876", "127.0.0.2:9876"]
    assert c.store.ha_listen_port == 10922 and c.ha_server_addr == "10.1.2.3:10922"  # derived
    assert c.broker_addr == "10.1.2.3:10921"
    assert c.config_dir.endswith("pocketmq-conf-test/config")
    props = c.properties()
    assert props["brokerIP1"] == "10.1.2.3" and props["flushDiskType"] == "SYNC_FLUSH"


def test_env_namesrv_is_a_default_below_file_and_flag(monkeypatch, tmp_path):
    monkeypatch.setenv("NAMESRV_ADDR", "1.1.1.1:9876")
    assert load_broker_config().namesrv_addr == "1.1.1.1:9876"
    assert load_broker_config(namesrv_addr="2.2.2.2:9876").namesrv_addr == "2.2.2.2:9876"


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["listenPrt=1"], "did you mean 'listenPort'"),
        (["listenPort=abc"], "listenPort"),
        (["brokerId=-1"], "brokerId"),
        (["namesrvAddr=nohostport"], "namesrvAddr"),
        (["flushDiskType=FAST"], "flushDiskType"),
        (["noequals"], "expected key=value"),
    ],
)
def test_bad_keys_and_values_name_the_key(overrides, needle):
    with pytest.raises(ConfigError) as err:
        load_broker_config(None, overrides)
    assert needle in str(err.value)


def test_with_updates_routes_keys_to_both_parts():
    c = BrokerConfig(brokerName="b")
    d = c.with_updates({"brokerPermission": "4", "maxMessageSize": "2048", "serverWorkerThreads": "3"})
    assert d.broker_permission == 4 and d.max_message_size == 2048 and c.broker_permission == 6
    with pytest.raises(ConfigError):
        c.with_updates({"bogus": "1"})


def test_register_period_is_clamped():
    assert BrokerConfig(brokerName="b", registerNameServerPeriod=1000).register_period_ms == 10_000
    assert BrokerConfig(brokerName="b", registerNameServerPeriod=600_000).register_period_ms == 60_000


def test_mqbroker_print_and_error_exit_codes(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text(JAVA_BROKER_CONF)
    out = subprocess.run(
        [sys.executable, "-m", "pocketmq.broker", "-c", str(path), "-p"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "listenPort=10921" in out.stdout and "fileReservedTime=48" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "pocketmq.broker", "--set", "brokerNme=x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "brokerNme" in bad.stderr and "brokerName" in bad.stderr


# ------------------------------------------------------------ old and new RocketMQ spellings


def test_rocketmq_4_2_maped_spellings_load(tmp_path, caplog):
    conf = tmp_path / "old.conf"
    conf.write_text("mapedFileSizeCommitLog=1048576\nmapedFileSizeConsumeQueue=6000\n")
    cfg = load_broker_config(conf)
    assert cfg.store.mapped_file_size_commit_log == 1048576
    assert cfg.store.mapped_file_size_consume_queue == 6000
    props = cfg.properties()
    assert props["mappedFileSizeCommitLog"] == "1048576" and "mapedFileSizeCommitLog" not in props
    # both spellings: the current one wins, wherever it is
    conf.write_text("mappedFileSizeCommitLog=2097152\nmapedFileSizeCommitLog=1048576\n")
    assert load_broker_config(conf).store.mapped_file_size_commit_log == 2097152
    # a bad value names the old key and its line
    conf.write_text("brokerName=b\nmapedFileSizeConsumeQueue=3\n")
    with pytest.raises(ConfigError) as err:
        load_broker_config(conf)
    assert "mapedFileSizeConsumeQueue" in str(err.value) and f"{conf}:2" in str(err.value)
    # UPDATE_BROKER_CONFIG accepts it too
    assert cfg.with_updates({"mapedFileSizeCommitLog": "8192"}).store.mapped_file_size_commit_log == 8192


def test_rocketmq_5_keys_load_only_at_their_default(tmp_path, caplog):
    conf = tmp_path / "five.conf"
    conf.write_text("timerWheelEnable=false\nenableRemoteEscape=false\nbrokerNotActiveTimeoutMillis=10000\n")
    load_broker_config(conf)
    conf.write_text("timerWheelEnable=true\n")
    with pytest.raises(ConfigError, match=r"timerWheelEnable=true is not supported.*\(false\)") as err:
        load_broker_config(conf)
    assert err.value.key == "timerWheelEnable" and f"{conf}:1" in str(err.value)


def test_feature_keys_without_a_field_accept_only_rocketmq_defaults(tmp_path):
    """No setting is accepted and ignored: a RocketMQ feature pocketmq lacks loads at its default
    (so an unchanged Java broker.conf starts) and any other value stops startup naming the key."""
    conf = tmp_path / "b.conf"
    conf.write_text("traceTopicName=RMQ_SYS_TRACE_TOPIC\nmaxDelayTime=40.0\nenableCalcFilterBitMap=FALSE\n")
    load_broker_config(conf)
    for line in ("traceTopicName=MyTrace", "maxDelayTime=10", "enableCalcFilterBitMap=true"):
        conf.write_text(line + "\n")
        with pytest.raises(ConfigError, match="only RocketMQ's default"):
            load_broker_config(conf)
    cfg = load_broker_config(None)
    with pytest.raises(ConfigError, match="maxDelayTime"):
        cfg.with_updates({"maxDelayTime": "5"})


def test_java_tuning_knobs_load_with_a_warning(tmp_path, caplog):
    conf = tmp_path / "b.conf"
    conf.write_text("sendMessageThreadPoolNums=16\nserverWorkerThreads=32\n")
    with caplog.at_level("WARNING"):
        load_broker_config(conf)
    for key in ("sendMessageThreadPoolNums", "serverWorkerThreads"):
        assert any(key in r.getMessage() and "no effect" in r.getMessage() for r in caplog.records)


def test_store_fields_kept_for_java_confs_accept_only_rocketmq_defaults(tmp_path):
    conf = tmp_path / "b.conf"
    conf.write_text("useReentrantLockWhenPutMessage=true\nosPageCacheBusyTimeOutMills=1000\ndLegerGroup=\n")
    load_broker_config(conf)
    conf.write_text("transientStorePoolSize=1\n")
    with pytest.raises(ConfigError, match="transientStorePoolSize=1 is not supported") as err:
        load_broker_config(conf)
    assert f"{conf}:1" in str(err.value)


def test_flow_control_keys_are_real_and_validated(tmp_path):
    """waitTimeMillsIn*Queue, brokerFastFailureEnable and osPageCacheBusyTimeOutMills take
    effect (broker.flow_control), so a value other than RocketMQ's default loads, and a bad one
    is a startup error naming the key."""
    conf = tmp_path / "b.conf"
    conf.write_text(
        "waitTimeMillsInSendQueue=350\nwaitTimeMillsInPullQueue=6000\nosPageCacheBusyTimeOutMills=1500\n"
        "brokerFastFailureEnable=false\nwaitTimeMillsInHeartbeatQueue=1000\nwaitTimeMillsInTransactionQueue=9\n"
    )
    cfg = load_broker_config(conf)
    assert (cfg.wait_time_mills_in_send_queue, cfg.wait_time_mills_in_pull_queue) == (350, 6000)
    assert cfg.store.os_page_cache_busy_time_out_mills == 1500 and not cfg.broker_fast_failure_enable
    for bad in (
        "waitTimeMillsInSendQueue=0",
        "osPageCacheBusyTimeOutMills=-5",
        "brokerFastFailureEnable=maybe",
    ):
        conf.write_text(bad + "\n")
        with pytest.raises(ConfigError, match=bad.split("=")[0]):
            load_broker_config(conf)


# ------------------------------------------------------------------------------- logging

LOGGING_INI = """\
[loggers]
keys = root
[handlers]
keys = h
[formatters]
keys = f
[logger_root]
level = INFO
handlers = h
[handler_h]
class = StreamHandler
formatter = f
args = (sys.stderr,)
[formatter_f]
format = FROM-INI %(name)s %(message)s
"""


def test_mqbroker_uses_logging_ini_from_rocketmq_home_or_the_conf_dir(tmp_path):
    from pocketmq.remoting.common.logsetup import logging_file as _logging_file

    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "logging.ini").write_text(LOGGING_INI)
    side = tmp_path / "side"
    side.mkdir()
    (side / "broker.conf").write_text("brokerName=b\n")
    (side / "logging.ini").write_text(LOGGING_INI.replace("FROM-INI", "SIDE-INI"))
    import os

    old = os.environ.pop("ROCKETMQ_HOME", None)
    try:
        assert _logging_file(str(side / "broker.conf")) == side / "logging.ini"
        assert _logging_file(None) is None
        os.environ["ROCKETMQ_HOME"] = str(home)
        assert _logging_file(str(side / "broker.conf")) == home / "conf" / "logging.ini"
        (home / "conf" / "logging.json").write_text("{}")
        assert _logging_file(None) == home / "conf" / "logging.json"
    finally:
        os.environ.pop("ROCKETMQ_HOME", None)
        if old is not None:
            os.environ["ROCKETMQ_HOME"] = old

    def print_config() -> subprocess.CompletedProcess[str]:
        """``python -m pocketmq.broker -c side/broker.conf -p`` without ROCKETMQ_HOME."""
        return subprocess.run(
            [sys.executable, "-m", "pocketmq.broker", "-c", str(side / "broker.conf"), "-p"],
            capture_output=True, text=True, timeout=60,
            env={k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"},
        )  # fmt: skip

    # applied: the warning about a foreign key comes out in the ini's format
    (side / "broker.conf").write_text("brokerName=b\nserverWorkerThreads=8\n")
    out = print_config()
    assert out.returncode == 0 and "SIDE-INI" in out.stderr and "serverWorkerThreads" in out.stderr
    # a broken logging file is a startup error naming it (exit 2), nothing starts
    (side / "logging.ini").write_text("[loggers]\nkeys = root\n")
    out = print_config()
    assert out.returncode == 2 and "bad logging config" in out.stderr
