"""mqadmin ACL commands against a broker with aclEnable=true: updateAclConfig, deleteAclConfig,
updateGlobalWhiteAddr, clusterAclConfigVersion, getAclConfig (text and --json), credentials from the
environment or tools.yml, and an admin-only refusal for a normal account."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.testing import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.acl_support import acl_cluster  # noqa: E402
from tests.client.admin.cli_helpers import arun_cli  # noqa: E402

pytestmark = pytest.mark.integration

ACL = {
    "accounts": [
        {"accessKey": "adminKey", "secretKey": "adminSecret", "admin": True},
        {"accessKey": "normalKey", "secretKey": "normalSecret", "defaultTopicPerm": "PUB"},
    ]
}
ADMIN_ENV = {"ROCKETMQ_ACCESS_KEY": "adminKey", "ROCKETMQ_SECRET_KEY": "adminSecret", "ROCKETMQ_HOME": None}
NORMAL_ENV = {
    "ROCKETMQ_ACCESS_KEY": "normalKey",
    "ROCKETMQ_SECRET_KEY": "normalSecret",
    "ROCKETMQ_HOME": None,
}


@pytest.fixture
async def acl(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with acl_cluster(tmp_path, ACL, ("T",), queues=1) as c:
        yield c


async def test_acl_commands_json_and_effects(acl: Cluster, tmp_path: Path) -> None:
    ns = ["-n", acl.namesrv_addr]
    addr = acl.broker_addrs[0]
    plain = tmp_path / "home" / "conf" / "plain_acl.yml"
    cases: list[tuple[str, list[str], set[str]]] = [
        ("updateAclConfig", ["-b", addr, "-a", "newUser1", "-s", "newSecret1", "-i", "PUB", "-t", "T=PUB,X=DENY"],
         {"accessKey", "brokers"}),
        ("updateGlobalWhiteAddr", ["-c", "DefaultCluster", "-g", "10.1.1.*,192.168.0.1-9"],
         {"globalWhiteRemoteAddresses", "brokers"}),
        ("clusterAclConfigVersion", ["-c", "DefaultCluster"], {"brokers"}),
        ("getAclConfig", ["-b", addr], {"brokers"}),
    ]  # fmt: skip
    docs = {}
    for name, args, keys in cases:
        r = await arun_cli(name, *ns, *args, "--json", env=ADMIN_ENV)
        assert r.code == 0, (name, r.err)
        docs[name] = r.json()
        assert set(docs[name]) == keys, name
    written = yaml.safe_load(plain.read_text())
    assert written["globalWhiteRemoteAddresses"] == ["10.1.1.*", "192.168.0.1-9"]
    assert {"accessKey": "newUser1", "secretKey": "newSecret1"}.items() <= written["accounts"][-1].items()
    assert written["dataVersion"][0]["counter"] == 2
    version = docs["clusterAclConfigVersion"]["brokers"][0]
    assert version["brokerAddr"] == addr and version["files"][str(plain)]["counter"] == 2
    accounts = docs["getAclConfig"]["brokers"][0]["plainAccessConfigs"]
    assert {a["accessKey"] for a in accounts} == {"adminKey", "normalKey", "newUser1"}
    assert {a["secretKey"] for a in accounts} == {"******"}
    # the new account works at once (no reload wait: the broker switched rules when it wrote)
    async with Producer("PG", namesrv=acl.namesrv_addr, access_key="newUser1", secret_key="newSecret1") as p:
        assert (await p.send(Message("T", b"x"))).send_status is SendStatus.SEND_OK
    # text output as RocketMQ's tools print it, secrets never shown
    r = await arun_cli("getAclConfig", *ns, "-b", addr, env=ADMIN_ENV)
    assert "globalWhiteRemoteAddresses: [10.1.1.*, 192.168.0.1-9]" in r.out
    assert (
        "  accessKey         : newUser1" in r.out and "newSecret1" not in r.out and "adminSecret" not in r.out
    )
    r = await arun_cli("clusterAclConfigVersion", *ns, "-b", addr, env=ADMIN_ENV)
    assert "#AclConfigVersionNum" in r.out and str(plain) in r.out
    # delete, then deleting again fails with RocketMQ's code and remark
    r = await arun_cli("deleteAclConfig", *ns, "-b", addr, "-a", "newUser1", "--json", env=ADMIN_ENV)
    assert r.code == 0 and set(r.json()) == {"accessKey", "brokers"}
    r = await arun_cli("deleteAclConfig", *ns, "-b", addr, "-a", "newUser1", env=ADMIN_ENV)
    assert (
        r.code == 1
        and "The accesskey[newUser1] corresponding to accessConfig has been deleted failed." in r.err
    )
    assert "code 210" in r.err
    # bad input is refused with the reason, nothing written
    before = plain.read_text()
    r = await arun_cli(
        "updateAclConfig", *ns, "-b", addr, "-a", "someone1", "-s", "secret12", "-t", "T=WRITE", env=ADMIN_ENV
    )
    assert r.code == 1 and "Parse resource permission error" in r.err and "code 209" in r.err
    r = await arun_cli("updateGlobalWhiteAddr", *ns, "-b", addr, "-g", "1.2.3", env=ADMIN_ENV)
    assert r.code == 1 and "code 211" in r.err
    assert plain.read_text() == before


async def test_normal_account_and_tools_yml(acl: Cluster, tmp_path: Path) -> None:
    ns = ["-n", acl.namesrv_addr]
    addr = acl.broker_addrs[0]
    r = await arun_cli(
        "updateAclConfig", *ns, "-b", addr, "-a", "sneaky12", "-s", "sneaky12", "-m", "true", env=NORMAL_ENV
    )
    assert (
        r.code == 1 and "Need admin permission for request code=50, but accessKey=normalKey is not" in r.err
    )
    r = await arun_cli("getAclConfig", *ns, "-b", addr, env=NORMAL_ENV)
    assert r.code == 1 and "Need admin permission" in r.err
    r = await arun_cli("updateTopic", *ns, "-b", addr, "-t", "New", env=NORMAL_ENV)
    assert r.code == 1 and "Need admin permission for request code=17" in r.err
    # no credentials at all
    r = await arun_cli(
        "getAclConfig", *ns, "-b", addr, env={"ROCKETMQ_HOME": None, "ROCKETMQ_ACCESS_KEY": None}
    )
    assert r.code == 1 and "No accessKey is configured" in r.err
    # $ROCKETMQ_HOME/conf/tools.yml, as RocketMQ's tools read it
    tools_home = tmp_path / "tools"
    (tools_home / "conf").mkdir(parents=True)
    (tools_home / "conf" / "tools.yml").write_text("accessKey: adminKey\nsecretKey: adminSecret\n")
    env = {"ROCKETMQ_HOME": str(tools_home), "ROCKETMQ_ACCESS_KEY": None, "ROCKETMQ_SECRET_KEY": None}
    r = await arun_cli("clusterAclConfigVersion", *ns, "-b", addr, env=env)
    assert r.code == 0, r.err
