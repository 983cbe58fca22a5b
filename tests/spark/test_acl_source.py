"""The Spark source's reads against a broker with aclEnable=true: the accessKey/secretKey options sign
every metadata call and pull; without them (or with a wrong secret) the broker refuses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.client import Message, Producer
from pocketmq.client.message import MessageQueue
from pocketmq.spark.errors import InvalidOptionError
from pocketmq.spark.metadata import ClusterClient
from pocketmq.spark.options import parse_options
from pocketmq.spark.reader import PullSettings, read_range
from pocketmq.testing import Cluster
from tests.acl_support import acl_cluster

pytestmark = pytest.mark.integration

ACL = {
    "accounts": [
        {
            "accessKey": "sparkUser",
            "secretKey": "sparkSecret",
            "defaultTopicPerm": "SUB",
            "defaultGroupPerm": "SUB",
        },
        {"accessKey": "writer1", "secretKey": "writer12", "defaultTopicPerm": "PUB"},
    ]
}


@pytest.fixture
async def acl(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with acl_cluster(tmp_path, ACL, ("S",), queues=1) as c:
        async with Producer("PG", namesrv=c.namesrv_addr, access_key="writer1", secret_key="writer12") as p:
            for i in range(5):
                await p.send(Message("S", b"m%d" % i))
        yield c


def _options(c: Cluster, **extra: str) -> dict[str, str]:
    return {"nameServer": c.namesrv_addr, "topic": "S", **extra}


async def test_signed_reads(acl: Cluster) -> None:
    opts = parse_options(_options(acl, accessKey="sparkUser", secretKey="sparkSecret"), "batch")
    assert "sparkSecret" not in repr(opts)
    snap = await asyncio.to_thread(
        lambda: ClusterClient(opts.name_servers, signer=opts.signer()).snapshot(opts.topics, strict=True)
    )
    ((key, state),) = snap.queues.items()
    assert state.max_offset == 5
    s = PullSettings(
        opts.name_servers,
        "spark-acl",
        "*",
        32,
        3000,
        True,
        False,
        access_key=opts.access_key,
        secret_key=opts.secret_key,
    )
    addrs = snap.broker_addrs[key.broker_name]
    rows = await asyncio.to_thread(
        lambda: [r for b in read_range(s, key, 0, 5, addrs) for r in b.to_pylist()]
    )
    assert [r["body"] for r in rows] == [b"m%d" % i for i in range(5)]
    # unsigned, or a wrong secret: the broker refuses the pull
    for ak, sk in ((None, None), ("sparkUser", "wrongSecret")):
        bad = PullSettings(
            opts.name_servers, "spark-acl", "*", 32, 3000, True, False, access_key=ak, secret_key=sk
        )
        with pytest.raises(Exception, match="AclException"):
            await asyncio.to_thread(
                lambda b=bad: list(read_range(b, MessageQueue("S", key.broker_name, 0), 0, 5, addrs))
            )


def test_credentials_come_in_pairs() -> None:
    with pytest.raises(InvalidOptionError, match="secretKey"):
        parse_options({"nameServer": "127.0.0.1:9876", "topic": "S", "accessKey": "a"}, "batch")
