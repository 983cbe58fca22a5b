"""Broker ACL over the wire with the SDK (aclEnable=true, plain_acl.yml under rocketmqHome).

Every peer here is 127.0.0.1; the accounts' white lists point elsewhere unless a test says so.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer, SendStatus
from pocketmq.client.acl import AclClientRPCHook
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.transport.client import RemotingClient
from pocketmq.testing import Cluster, cluster
from tests.acl_support import acl_cluster, write_acl
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {
            "accessKey": "RocketMQ",
            "secretKey": "12345678",
            "admin": False,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["TopicOk=PUB|SUB", "TopicDeny=DENY"],
            "groupPerms": ["GroupDeny=DENY"],
        },
        {"accessKey": "rocketmq2", "secretKey": "87654321", "admin": True},
        {
            "accessKey": "whiteonly",
            "secretKey": "whiteonly",
            "whiteRemoteAddress": "192.168.1.*",
            "admin": True,
        },
    ],
}


@pytest.fixture
async def acl(tmp_path: Path) -> AsyncIterator[Cluster]:
    topics = ("TopicOk", "TopicDeny", "TopicOther")
    async with acl_cluster(tmp_path, ACL, topics, aclFileWatchIntervalMs=100) as c:
        yield c


def stored(c: Cluster, topic: str) -> int:
    return sum(c.brokers[0].store.get_max_offset_in_queue(topic, q) for q in range(2))


def producer(c: Cluster, ak: str | None = "RocketMQ", sk: str | None = "12345678", **kw) -> Producer:
    return Producer(
        "PG", namesrv=c.namesrv_addr, access_key=ak, secret_key=sk, retry_times_when_send_failed=0, **kw
    )


async def raw_call(
    c: Cluster, code: int, ext: dict[str, str], hook: AclClientRPCHook | None
) -> RemotingCommand:
    cli = RemotingClient(hooks=[hook] if hook else [])
    try:
        return await cli.invoke(c.broker_addrs[0], RemotingCommand.request(code, dict(ext)), 5.0)
    finally:
        await cli.close()


async def test_allowed_account_produces_and_consumes(acl: Cluster) -> None:
    async with producer(acl) as p:
        r = await p.send(Message("TopicOk", b"hello"))
        assert r.send_status is SendStatus.SEND_OK
    got: list = []

    async def listener(msgs, ctx):
        got.extend(msgs)
        return CONSUME_SUCCESS

    consumer = PushConsumer(
        "GroupOk", namesrv=acl.namesrv_addr, listener=listener, access_key="RocketMQ", secret_key="12345678",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )  # fmt: skip
    consumer.subscribe("TopicOk", "*")
    async with consumer:
        await wait_until(lambda: got)
    assert got[0].body == b"hello"


@pytest.mark.parametrize(
    ("ak", "sk", "topic", "remark"),
    [
        ("RocketMQ", "wrong-secret", "TopicOk", "Check signature failed for accessKey=RocketMQ"),
        ("nobody12", "12345678", "TopicOk", "No acl config for nobody12"),
        ("RocketMQ", "12345678", "TopicDeny", "No default permission for topic:TopicDeny"),
        ("RocketMQ", "12345678", "TopicOther", "No default permission for topic:TopicOther"),
        (None, None, "TopicOk", "No accessKey is configured"),
    ],
    ids=["wrong-secret", "unknown-key", "deny-topic", "default-deny", "unsigned"],
)
async def test_refused_sends_store_nothing(
    acl: Cluster, caplog: pytest.LogCaptureFixture, ak: str | None, sk: str | None, topic: str, remark: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="pocketmq.broker.acl.audit"):
        async with producer(acl, ak, sk) as p:
            with pytest.raises(Exception) as err:
                await p.send(Message(topic, b"x"))
    assert remark in str(err.value) and "AclException" in str(err.value)
    assert stored(acl, topic) == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "pocketmq.broker.acl.audit"]
    assert any(remark in line and "addr=127.0.0.1:" in line for line in lines), lines
    assert "12345678" not in caplog.text and "wrong-secret" not in caplog.text


async def test_admin_request_from_normal_account_and_replay(acl: Cluster) -> None:
    ext = {"topic": "NewTopic", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
           "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}  # fmt: skip
    r = await raw_call(
        acl, RequestCode.UPDATE_AND_CREATE_TOPIC, ext, AclClientRPCHook("RocketMQ", "12345678")
    )
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert "Need admin permission for request code=17, but accessKey=RocketMQ is not" in (r.remark or "")
    assert acl.brokers[0].topic_config_manager.select_topic_config("NewTopic") is None
    admin = AclClientRPCHook("rocketmq2", "87654321")
    r = await raw_call(acl, RequestCode.UPDATE_AND_CREATE_TOPIC, ext, admin)
    assert r.code == ResponseCode.SUCCESS
    # ACL 1.0 signs no nonce or time: the same signed request is accepted again (wire-compatible)
    signed = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, dict(ext))
    admin.before_request("", signed)
    assert signed.ext_fields is not None
    again = await raw_call(acl, RequestCode.UPDATE_AND_CREATE_TOPIC, signed.ext_fields, None)
    assert again.code == ResponseCode.SUCCESS


async def test_white_lists(acl: Cluster, tmp_path: Path) -> None:
    # an account white list that does not cover 127.0.0.1: the signature is still required
    r = await raw_call(
        acl, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"AccessKey": "whiteonly", "consumerGroup": "G"}, None
    )
    assert r.code == ResponseCode.SYSTEM_ERROR and "Check signature failed for accessKey=whiteonly" in (
        r.remark or ""
    )
    doc = yaml.safe_load((tmp_path / "home" / "conf" / "plain_acl.yml").read_text())
    doc["accounts"][2]["whiteRemoteAddress"] = "127.0.0.1"
    write_acl(tmp_path / "home", doc)
    manager = acl.brokers[0].acl_manager
    assert manager is not None
    await wait_until(lambda: manager.reloads >= 1)
    r = await raw_call(
        acl, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"AccessKey": "whiteonly", "consumerGroup": "G"}, None
    )
    assert "AclException" not in (r.remark or ""), r.remark  # served: "no consumer for this group"
    # the global white list: no account at all
    async with producer(acl, None, None) as p:
        with pytest.raises(Exception, match="No accessKey is configured"):
            await p.send(Message("TopicOk", b"x"))
        doc["globalWhiteRemoteAddresses"] = ["127.0.0.*"]
        write_acl(tmp_path / "home", doc)
        await wait_until(lambda: manager.reloads >= 2)
        assert (await p.send(Message("TopicOther", b"x"))).send_status is SendStatus.SEND_OK


async def test_hot_reload_while_producing_and_broken_edit(acl: Cluster, tmp_path: Path, caplog) -> None:
    manager = acl.brokers[0].acl_manager
    assert manager is not None
    home = tmp_path / "home"
    async with producer(acl) as p:
        assert (await p.send(Message("TopicOk", b"1"))).send_status is SendStatus.SEND_OK
        conns_before = set(acl.brokers[0].remoting_server.connections)
        doc = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
        doc["accounts"][0]["topicPerms"] = ["TopicOk=DENY"]
        write_acl(home, doc)
        await wait_until(lambda: manager.reloads >= 1)
        with pytest.raises(Exception, match="No default permission for topic:TopicOk"):
            await p.send(Message("TopicOk", b"2"))
        # a broken edit keeps the last good rules and says why
        with caplog.at_level(logging.ERROR, logger="pocketmq.broker.acl.manager"):
            (home / "conf" / "plain_acl.yml").write_text("accounts: [ {accessKey: RocketMQ\n")
            await wait_until(lambda: "keeping the last good rules" in caplog.text)
        with pytest.raises(Exception, match="No default permission for topic:TopicOk"):
            await p.send(Message("TopicOk", b"3"))
        doc["accounts"][0]["topicPerms"] = ["TopicOk=PUB"]
        write_acl(home, doc)
        await wait_until(lambda: manager.reloads >= 2)
        assert (await p.send(Message("TopicOk", b"4"))).send_status is SendStatus.SEND_OK
        # the producer's connection survived every reload
        assert conns_before & set(acl.brokers[0].remoting_server.connections)


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        (None, "no ACL file"),
        ("accounts: [ {accessKey: x\n", "not valid YAML"),
        ({"accounts": [{"accessKey": "short"}]}, "longer than 6"),
    ],
    ids=["missing", "unparsable", "bad-account"],
)
async def test_broken_configuration_refuses_to_start(tmp_path: Path, doc, fragment: str) -> None:
    from pocketmq.remoting.common.config import ConfigError

    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    if isinstance(doc, str):
        (home / "conf" / "plain_acl.yml").write_text(doc)
    elif doc is not None:
        write_acl(home, doc)
    with pytest.raises(ConfigError, match=fragment) as err:
        async with cluster(tmp_path / "c", broker_config={"aclEnable": True, "rocketmqHome": str(home)}):
            pass
    assert err.value.key == "aclEnable"
    with pytest.raises(ConfigError, match="rocketmqHome") as err:
        async with cluster(tmp_path / "c2", broker_config={"aclEnable": True, "rocketmqHome": None}):
            pass
    assert err.value.key == "rocketmqHome"
