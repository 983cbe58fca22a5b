"""No setting accepted and ignored: values asking for a feature not built yet (HA, ACL, TLS, LMQ)
stop mqbroker / mqnamesrv / pocketmq up / pocketmq cluster up with one line naming the key, and
UPDATE_BROKER_CONFIG refuses them (table: pocketmq.remoting.common.unsupported.REFUSALS)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.broker.config import ConfigError, load_broker_config
from pocketmq.namesrv.config import KNOWN_UNSUPPORTED_KEYS, NamesrvConfig, load_namesrv_config
from pocketmq.remoting.common.config import apply_config
from pocketmq.remoting.common.unsupported import REFUSALS
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode

#: One refused setting per row of REFUSALS (plus the second HA role).
REFUSED = [
    ("brokerRole", "SYNC_MASTER"),
    ("brokerRole", "SLAVE"),
    ("brokerId", "1"),
    ("enableSlaveActingMaster", "true"),
    ("enableControllerMode", "true"),
    ("tls.test.mode.enable", "true"),
    ("tls.server.keyPassword", "secret"),
    ("tls.client.keyPassword", "secret"),
    ("tls.config.file", "/etc/rocketmq/tls.properties"),
    ("enableConsumeQueueExt", "true"),
    ("transientStorePoolEnable", "true"),
    ("enableLmq", "true"),
    ("enableMultiDispatch", "true"),
    ("duplicationEnable", "true"),
    ("metricsExporterType", "OTLP_GRPC"),
    ("metricsExporterType", "LOG"),
]
#: The same keys at their defaults (or an "off" value): accepted.
ACCEPTED = [
    "brokerRole=ASYNC_MASTER", "brokerId=0", "enableSlaveActingMaster=false", "enableControllerMode=false",
    "aclEnable=false", "enablePropertyFilter=false", "useTLS=false", "tls.enable=false",
    "enableConsumeQueueExt=false", "transientStorePoolEnable=false", "enableLmq=false",
    "enableMultiDispatch=false", "duplicationEnable=false", "metricsExporterType=PROM",
    "metricsExporterType=DISABLE",
    "tls.server.mode=disabled", "tls.server.need.client.auth=none", "tls.server.certPath=",
    "tls.test.mode.enable=false", "tls.server.keyPassword=", "tls.config.file=",
]  # fmt: skip

BASE_CONF = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nbrokerRole=ASYNC_MASTER\n"


def _ids(row: tuple[str, str]) -> str:
    return f"{row[0]}={row[1]}"


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=timeout)


def _assert_one_line_refusal(out: subprocess.CompletedProcess[str], key: str, value: str) -> None:
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert f"{key}={value} is not supported yet" in lines[0] and "not built" in lines[0]
    assert "Traceback" not in out.stderr


def test_every_row_of_the_table_is_covered() -> None:
    covered = {k for k, _ in REFUSED}
    assert {row.key for row in REFUSALS} == covered


@pytest.mark.parametrize("row", REFUSED, ids=_ids)
def test_mqbroker_c_refuses_with_one_line(tmp_path: Path, row: tuple[str, str]) -> None:
    key, value = row
    conf = tmp_path / "broker.conf"
    body = BASE_CONF.replace("brokerId=0\n", "").replace("brokerRole=ASYNC_MASTER\n", "")
    conf.write_text(f"{body}{key}={value}\nstorePathRootDir={tmp_path / 'store'}\nlistenPort=0\n")
    out = _run("pocketmq.broker", "-c", str(conf))
    _assert_one_line_refusal(out, key, value)
    assert f"{conf}:" in out.stderr  # the source: file and line
    assert not (tmp_path / "store").exists()  # nothing started, nothing written


@pytest.mark.parametrize("row", REFUSED, ids=_ids)
def test_set_override_is_refused(row: tuple[str, str]) -> None:
    key, value = row
    with pytest.raises(ConfigError, match=f"override {key}: {key}={value} is not supported yet") as err:
        load_broker_config(None, [f"{key}={value}"])
    assert err.value.key == key


def test_mqbroker_set_refuses_with_one_line() -> None:
    out = _run("pocketmq.broker", "--set", "enableLmq=true")
    _assert_one_line_refusal(out, "enableLmq", "true")


def test_defaults_and_off_values_still_load() -> None:
    config = load_broker_config(None, ACCEPTED)
    assert config.broker_id == 0 and not config.acl_enable and not config.enable_property_filter
    assert config.store.broker_role.value == "ASYNC_MASTER"
    assert load_namesrv_config(None, ["tls.enable=false", "tls.server.mode=disabled"]).listen_port == 9876


def test_default_config_still_starts(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pocketmq.broker", "--set", "listenPort=0", "--set", "fastListenEnable=false",
         "--set", f"storePathRootDir={tmp_path}", "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "boot success" in line, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize(
    ("key", "value"),
    [("tls.test.mode.enable", "true"), ("tls.server.keyPassword", "pw")],
    ids=["set", "file"],
)
def test_mqnamesrv_refuses_tls(tmp_path: Path, key: str, value: str) -> None:
    if key == "tls.server.keyPassword":
        conf = tmp_path / "namesrv.conf"
        conf.write_text(f"listenPort=0\n{key}={value}\n")
        out = _run("pocketmq.namesrv", "-c", str(conf))
    else:
        out = _run("pocketmq.namesrv", "--set", "listenPort=0", "--set", f"{key}={value}")
    _assert_one_line_refusal(out, key, value)


def test_name_server_rows_are_scoped_and_update_refuses_tls() -> None:
    # aclEnable is no name server key: still the unknown-key error, not an ACL remark
    with pytest.raises(ConfigError, match="unknown config key 'aclEnable'"):
        load_namesrv_config(None, ["aclEnable=true"])
    base = NamesrvConfig()
    with pytest.raises(ConfigError, match="tls.test.mode.enable=true is not supported yet"):
        apply_config(base, {"tls.test.mode.enable": "true"}, known_foreign_keys=KNOWN_UNSUPPORTED_KEYS)


@pytest.mark.parametrize("row", [("enableLmq", "true"), ("tls.test.mode.enable", "true")], ids=_ids)
def test_pocketmq_up_refuses_before_starting(tmp_path: Path, row: tuple[str, str]) -> None:
    key, value = row
    out = _run(
        "pocketmq.deploy", "up", "--data-dir", str(tmp_path / "d"), "--namesrv-port", "0",
        "--broker-port", "0", "--set", f"{key}={value}",
    )  # fmt: skip
    _assert_one_line_refusal(out, key, value)
    assert not (tmp_path / "d").exists()


def test_pocketmq_cluster_up_refuses_before_starting(tmp_path: Path) -> None:
    root = tmp_path / "c"
    try:
        out = _run(
            "pocketmq.deploy", "cluster", "up", "--masters", "1", "--dir", str(root),
            "--namesrv-port", "0", "--broker-port", "0", "--set", "enableLmq=true",
        )  # fmt: skip
        _assert_one_line_refusal(out, "enableLmq", "true")
        assert not root.exists()
    finally:
        if root.exists():  # the refusal failed and a cluster started: stop it, leave no process
            _run("pocketmq.deploy", "cluster", "down", "--dir", str(root))


@pytest.mark.parametrize("row", REFUSED, ids=_ids)
async def test_update_broker_config_refuses(broker, wire, row: tuple[str, str]) -> None:
    key, value = row
    before = broker.config
    r = await wire.call(RequestCode.UPDATE_BROKER_CONFIG, None, f"{key}={value}\n".encode())
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert f"{key}={value} is not supported yet" in r.remark
    assert broker.config is before
