"""ACL admin codes and security settings on a broker without ACL, and the startup refusals of
mqbroker / mqnamesrv (one line naming the key, exit code 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode

ACL_CODES = [
    (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "someone1", "secretKey": "secret12"},
     ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED),
    (RequestCode.DELETE_ACL_CONFIG, {"accessKey": "someone1"}, ResponseCode.DELETE_ACL_CONFIG_FAILED),
    (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, ResponseCode.SYSTEM_ERROR),
    (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.0.0.*"},
     ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED),
    (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}, ResponseCode.SYSTEM_ERROR),
]  # fmt: skip


@pytest.mark.parametrize(("code", "ext", "expected"), ACL_CODES, ids=lambda v: str(v))
async def test_acl_codes_without_acl_say_so(
    broker, wire, code: int, ext: dict[str, str], expected: int
) -> None:
    r = await wire.call(code, ext)
    assert r.code == expected
    assert r.remark == "ACL is not enabled on this broker (aclEnable=false)"


@pytest.mark.parametrize(
    "kv", ["aclEnable=true", "tls.server.mode=enforcing", "useTLS=true", "tls.enable=true"]
)
async def test_security_settings_are_not_changed_live(broker, wire, kv: str) -> None:
    r = await wire.call(RequestCode.UPDATE_BROKER_CONFIG, None, f"{kv}\n".encode())
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert f"{kv.split('=', maxsplit=1)[0]} is read at startup only" in (r.remark or "")
    assert not broker.config.acl_enable and broker.config.tls_server_mode == "disabled"
    # the same value as now is no change: accepted
    same = kv.split("=", maxsplit=1)[0] + "=" + ("disabled" if "mode" in kv else "false")
    assert (
        await wire.call(RequestCode.UPDATE_BROKER_CONFIG, None, f"{same}\n".encode())
    ).code == ResponseCode.SUCCESS


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=60)


def test_mqbroker_refuses_acl_without_files(tmp_path: Path) -> None:
    (tmp_path / "home" / "conf").mkdir(parents=True)
    out = _run(
        "pocketmq.broker", "--set", "listenPort=0", "--set", "fastListenEnable=false",
        "--set", f"storePathRootDir={tmp_path / 'store'}", "--set", "aclEnable=true",
        "--set", f"rocketmqHome={tmp_path / 'home'}", "--log-level", "WARNING",
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "aclEnable=true: no ACL file" in lines[0] and "Traceback" not in out.stderr


def test_mqnamesrv_refuses_enforcing_tls_without_certificate(tmp_path: Path) -> None:
    out = _run(
        "pocketmq.namesrv", "--set", "listenPort=0", "--set", "tls.server.mode=enforcing",
        "--set", f"kvConfigPath={tmp_path / 'kv.json'}", "--set", f"configStorePath={tmp_path / 'ns.properties'}", "--log-level", "WARNING",
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "tls.server.certPath" in lines[0] and "Traceback" not in out.stderr
