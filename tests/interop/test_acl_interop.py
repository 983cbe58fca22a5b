"""ACL with the real clients: the C++ client (``set_session_credentials(ak, sk, "ALIYUN")``) and
ali-ons (``accessKey``/``secretKey``) against an in-process broker with ``aclEnable=true``.

An allowed account produces and consumes; a wrong secret, an unknown key or a DENY topic is
refused and nothing is stored; an account whose ``whiteRemoteAddress`` covers 127.0.0.1 works
without a valid signature.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.testing import Cluster
from tests.acl_support import acl_cluster
from tests.interop import drivers

pytestmark = pytest.mark.interop

ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {
            "accessKey": "RocketMQ",
            "secretKey": "12345678",
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["AclOk=PUB|SUB", "AclDeny=DENY"],
        },
        # the white list covers the test's peer: its requests need no valid signature
        {
            "accessKey": "whitelisted",
            "secretKey": "not-used-here",
            "whiteRemoteAddress": "127.0.0.1",
            "admin": True,
        },
        # white-listed elsewhere: from 127.0.0.1 it needs a valid signature like any account
        {
            "accessKey": "elsewhere",
            "secretKey": "elsewhere-secret",
            "whiteRemoteAddress": "192.168.1.*",
            "admin": True,
        },
    ],
}
N = 5


@pytest.fixture
async def acl(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with acl_cluster(tmp_path, ACL, ("AclOk", "AclDeny", "AclWhite")) as c:
        yield c


def stored(c: Cluster, topic: str) -> int:
    return sum(c.brokers[0].store.get_max_offset_in_queue(topic, q) for q in range(2))


def creds(ak: str, sk: str) -> list[str]:
    return ["--access-key", ak, "--secret-key", sk]


@pytest.mark.parametrize("client", ["cpp", "js"])
async def test_allowed_account_produces_and_consumes(
    acl: Cluster, client: drivers.Client, tmp_path: Path
) -> None:
    drivers.available(client)
    ns = acl.namesrv_addr
    sent = await drivers.produce_async(client, ns, "AclOk", N, extra=creds("RocketMQ", "12345678"))
    assert len(sent.sent) == N and stored(acl, "AclOk") == N
    opts = {"from_where": "first"} if client == "js" else {}
    consumer = await drivers.start_consumer_async(
        client, ns, "AclOk", expect=N, timeout=90, extra=creds("RocketMQ", "12345678"), **opts
    )
    async with consumer:
        await consumer.wait_started()
        result = await consumer.wait()
    assert result.ok, result.describe()
    assert len({m["identity"] for m in result.messages}) == N


@pytest.mark.parametrize("client", ["cpp", "js"])
@pytest.mark.parametrize(
    ("ak", "sk", "topic"),
    [
        ("RocketMQ", "wrong-secret", "AclOk"),
        ("nobody12", "12345678", "AclOk"),
        ("RocketMQ", "12345678", "AclDeny"),
        ("elsewhere", "not-its-secret", "AclOk"),
    ],
    ids=["wrong-secret", "unknown-key", "deny-topic", "not-white-listed"],
)
async def test_refused_clients_store_nothing(
    acl: Cluster, client: drivers.Client, ak: str, sk: str, topic: str
) -> None:
    drivers.available(client)
    result = await drivers.produce_async(
        client, acl.namesrv_addr, topic, 2, check=False, timeout=90, extra=creds(ak, sk)
    )
    assert not result.ok and not result.sent, result.describe()
    assert stored(acl, topic) == 0
    check = acl.brokers[0].remoting_server.dispatcher.before_hooks[0]
    assert check.__self__.denied > 0  # the AclValidator refused them


@pytest.mark.parametrize("client", ["cpp", "js"])
async def test_whitelisted_address_needs_no_signature(acl: Cluster, client: drivers.Client) -> None:
    drivers.available(client)
    sent = await drivers.produce_async(
        client, acl.namesrv_addr, "AclWhite", N, extra=creds("whitelisted", "any-wrong-secret")
    )
    assert len(sent.sent) == N and stored(acl, "AclWhite") == N
