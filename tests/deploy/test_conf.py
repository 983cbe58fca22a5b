"""conf/: every sample loads with the real loaders; a Java broker.conf loads unchanged; real but
unimplemented RocketMQ keys are warnings, misspelled keys are errors naming the closest key."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.broker.config import ConfigError, load_broker_config
from pocketmq.namesrv.config import load_namesrv_config

CONF = Path(__file__).resolve().parents[2] / "conf"
BROKER_FILES = sorted(
    p for p in CONF.rglob("*") if p.suffix in (".conf", ".properties") and p.name != "namesrv.conf"
)


def test_the_expected_samples_exist() -> None:
    names = {str(p.relative_to(CONF)) for p in CONF.rglob("*") if p.is_file()}
    assert {
        "namesrv.conf", "broker-a.conf", "broker-a-s.conf", "logging.ini", "examples/rocketmq-broker.conf",
        "2m-2s-sync/broker-a.properties", "2m-2s-sync/broker-a-s.properties", "2m-2s-sync/broker-b.properties",
        "2m-2s-sync/broker-b-s.properties", "2m-2s-async/broker-a.properties", "2m-2s-async/broker-a-s.properties",
        "2m-2s-async/broker-b.properties", "2m-2s-async/broker-b-s.properties", "2m-noslave/broker-a.properties",
        "2m-noslave/broker-b.properties",
    } <= names  # fmt: skip


def _rel(path: Path) -> str:
    return str(path.relative_to(CONF))


@pytest.mark.parametrize("path", BROKER_FILES, ids=_rel)
def test_every_broker_sample_loads(path: Path) -> None:
    assert "is not supported yet" not in path.read_text()
    config = load_broker_config(path)
    assert config.broker_cluster_name == "DefaultCluster"
    assert config.broker_name.startswith("broker-")


def test_namesrv_conf_loads() -> None:
    config = load_namesrv_config(str(CONF / "namesrv.conf"))
    assert config.listen_port == 9876


@pytest.mark.parametrize(
    ("rel", "name", "broker_id", "role"),
    [
        ("2m-2s-sync/broker-a.properties", "broker-a", 0, "SYNC_MASTER"),
        ("2m-2s-sync/broker-b-s.properties", "broker-b", 1, "SLAVE"),
        ("2m-2s-async/broker-b.properties", "broker-b", 0, "ASYNC_MASTER"),
        ("2m-2s-async/broker-a-s.properties", "broker-a", 1, "SLAVE"),
        ("2m-noslave/broker-b.properties", "broker-b", 0, "ASYNC_MASTER"),
        ("broker-a.conf", "broker-a", 0, "ASYNC_MASTER"),
        ("broker-a-s.conf", "broker-a", 1, "SLAVE"),
    ],
)
def test_sample_roles(rel: str, name: str, broker_id: int, role: str) -> None:
    config = load_broker_config(CONF / rel)
    assert (config.broker_name, config.broker_id, config.store.broker_role.value) == (name, broker_id, role)
    assert config.store.flush_disk_type.value == "ASYNC_FLUSH"


def test_rocketmq_distribution_broker_conf_loads_unchanged() -> None:
    config = load_broker_config(CONF / "examples" / "rocketmq-broker.conf")
    assert (config.broker_name, config.store.delete_when, config.store.file_reserved_time) == (
        "broker-a",
        "04",
        48,
    )


def test_real_unimplemented_keys_warn_and_known_keys_apply(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = load_broker_config(CONF / "examples" / "rocketmq-broker-full.conf")
    warned = " ".join(r.getMessage() for r in caplog.records)
    for key in ("sendMessageThreadPoolNums", "serverWorkerThreads"):
        assert key in warned
    assert "waitTimeMillsInSendQueue" not in warned  # flow control: a real key (broker.flow_control)
    assert config.wait_time_mills_in_send_queue == 200 and config.wait_time_mills_in_pull_queue == 5000
    assert "storePathRootDir" not in warned and "fileReservedTime" not in warned
    assert config.store.max_message_size == 4194304 and config.default_topic_queue_nums == 8
    assert config.store.message_delay_level.startswith("1s 5s 10s")


def test_misspelled_key_is_an_error_naming_the_closest_key(tmp_path: Path) -> None:
    text = (CONF / "examples" / "rocketmq-broker.conf").read_text() + "fileReservedTme = 12\n"
    bad = tmp_path / "broker.conf"
    bad.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_broker_config(bad)
    msg = str(err.value)
    assert "'fileReservedTme'" in msg and "fileReservedTime" in msg and f"{bad}:" in msg


def test_logging_ini_is_a_valid_file_config() -> None:
    code = (
        "import logging, logging.config, sys; "
        f"logging.config.fileConfig({str(CONF / 'logging.ini')!r}, disable_existing_loggers=False); "
        "logging.getLogger('pocketmq.broker').info('broker-info'); "
        "logging.getLogger('pocketmq.remoting.x').info('remoting-info'); "
        "logging.getLogger('pocketmq.remoting.x').warning('remoting-warning')"
    )
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr
    assert "broker-info" in err and "remoting-warning" in err and "remoting-info" not in err
    assert "[pocketmq.broker]" in err
