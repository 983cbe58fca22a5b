"""mqadmin consumer-group commands against a real in-process cluster (two broker groups) with
live producers and push consumers: lag, connections, status, offset resets, subscription groups."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.testing import Cluster

if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.client.admin.cli_helpers import arun_cli, arun_script  # noqa: E402
from tests.integration.support import collecting_consumer, loop_clean_at_exit  # noqa: E402, F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def consumer(c: Cluster, group: str, topic: str, got: list[Any]) -> PushConsumer:
    return collecting_consumer(
        c, group, topic, got, persist_consumer_offset_interval=200, rebalance_interval=1000
    )


async def send(c: Cluster, topic: str, n: int, tag: str = "TagA") -> dict[tuple[str, int], int]:
    per_queue: dict[tuple[str, int], int] = {}
    async with Producer("PG-admin", namesrv=c.namesrv_addr) as producer:
        for i in range(n):
            res = await producer.send(Message(topic, b"%s-%d" % (tag.encode(), i), tags=tag, keys=f"k{i}"))
            key = (res.message_queue.broker_name, res.message_queue.queue_id)
            per_queue[key] = per_queue.get(key, 0) + 1
    return per_queue


async def backlog_and_consumer(
    c: Cluster, topic: str, queues: int, n: int, group: str
) -> tuple[list[Any], PushConsumer]:
    """A new ``topic`` holding ``n`` TagA messages and a (not started) collecting consumer of it."""
    await c.create_topic(topic, queues=queues)
    await send(c, topic, n)
    got: list[Any] = []
    return got, consumer(c, group, topic, got)


async def test_lag_connections_status_and_reset(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    got, pc = await backlog_and_consumer(two, "Lag", 4, 20, "CG-lag")
    await pc.start()
    try:
        await wait_until(lambda: len(got) >= 20)
        # live group: connection, status, progress with client IPs
        conn = (await arun_cli("consumerConnection", *ns, "-g", "CG-lag", "--json")).json()
        assert len(conn["connections"]) == 1
        # (and the group's %RETRY%)
        assert {"topic": "Lag", "subExpression": "*", "expressionType": "TAG"} in conn["subscriptions"]
        assert conn["messageModel"] == "CLUSTERING" and conn["consumeType"] == "CONSUME_PASSIVELY"
        client_id = conn["connections"][0]["clientId"]
        status = (await arun_cli("consumerStatus", *ns, "-g", "CG-lag", "--json")).json()
        assert list(status["clients"]) == [client_id] and status["subscriptionConsistent"] is True
        assert {q["topic"] for q in status["clients"][client_id]["mqTable"]} >= {"Lag"}
        detail = await arun_cli("consumerStatus", *ns, "-g", "CG-lag", "-i", client_id)
        assert "#Consumer MQ Detail#" in detail.out and "Same subscription" in detail.out
        summary = (await arun_cli("consumerProgress", *ns, "--json")).json()
        mine = [g for g in summary["groups"] if g["group"] == "CG-lag"]
        assert mine and mine[0]["count"] == 1 and mine[0]["consumeType"] == "PUSH"
        with_ip = (
            await arun_cli("consumerProgress", *ns, "-g", "CG-lag", "-t", "Lag", "-s", "--json")
        ).json()
        assert all(q["clientIp"] for q in with_ip["queues"])
    finally:
        await pc.shutdown()  # persists its offsets

    # offline group: lag = what was sent minus what was consumed, per queue
    more = await send(two, "Lag", 12, tag="TagB")
    progress = (await arun_script("consumerProgress", *ns, "-g", "CG-lag", "-t", "Lag", "--json")).json()
    assert progress["diffTotal"] == 12
    lag = {(q["brokerName"], q["queueId"]): q["diff"] for q in progress["queues"]}
    assert {k: v for k, v in lag.items() if v} == more
    assert all(q["brokerOffset"] - q["consumerOffset"] == q["diff"] for q in progress["queues"])
    assert sum(q["consumerOffset"] for q in progress["queues"]) == 20
    human = await arun_cli("consumerProgress", *ns, "-g", "CG-lag")
    assert "Consume Diff Total: 12" in human.out and human.out.startswith("#Topic")
    offline = await arun_cli("consumerConnection", *ns, "-g", "CG-lag")
    assert offline.code == 1 and "not online" in offline.err

    # a dry run changes nothing
    dry = (
        await arun_cli("skipAccumulatedMessage", *ns, "-g", "CG-lag", "-t", "Lag", "--dry-run", "--json")
    ).json()
    assert dry["dryRun"] is True and sum(q["offset"] - q["consumerOffset"] for q in dry["queues"]) == 12
    again = (await arun_cli("consumerProgress", *ns, "-g", "CG-lag", "-t", "Lag", "--json")).json()
    assert again["diffTotal"] == 12

    # consume the backlog live, then rewind the live group to the beginning: it re-consumes
    got.clear()
    pc = consumer(two, "CG-lag", "Lag", got)
    await pc.start()
    try:
        await wait_until(lambda: len(got) >= 12)
        assert {m.tags for m in got} == {"TagB"}
        got.clear()
        r = await arun_cli("resetOffsetByTime", *ns, "-g", "CG-lag", "-t", "Lag", "-s", "0", "--json")
        doc = r.json()
        assert (
            doc["dryRun"] is False
            and all(q["offset"] == 0 for q in doc["queues"])
            and len(doc["queues"]) == 8
        )
        await wait_until(lambda: len({m.body for m in got}) >= 32)
        assert {m.tags for m in got} == {"TagA", "TagB"}
    finally:
        await pc.shutdown()


async def test_reset_to_a_time_and_skip_for_an_offline_group(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    got, pc = await backlog_and_consumer(two, "Rewind", 2, 6, "CG-rw")
    async with pc:
        await wait_until(lambda: len(got) >= 6)
    await asyncio.sleep(0.01)
    middle = int(time.time() * 1000)
    await asyncio.sleep(0.01)
    await send(two, "Rewind", 4, tag="TagB")
    # before `middle` every message was consumed; rewinding to it exposes only the later four again
    stamp = time.strftime("%Y-%m-%d#%H:%M:%S", time.localtime(middle / 1000)) + f":{middle % 1000:03d}"
    r = await arun_cli("resetOffsetByTime", *ns, "-g", "CG-rw", "-t", "Rewind", "-s", stamp, "--dry-run")
    assert r.code == 0 and "#newOffset" in r.out and "dry run" in r.out
    r = await arun_cli("resetOffsetByTime", *ns, "-g", "CG-rw", "-t", "Rewind", "-s", stamp)
    assert r.code == 0 and r.out.startswith("#brokerName")
    progress = (await arun_cli("consumerProgress", *ns, "-g", "CG-rw", "-t", "Rewind", "--json")).json()
    assert progress["diffTotal"] == 4
    r = await arun_cli("skipAccumulatedMessage", *ns, "-g", "CG-rw", "-t", "Rewind", "--json")
    assert r.ok
    progress = (await arun_cli("consumerProgress", *ns, "-g", "CG-rw", "-t", "Rewind", "--json")).json()
    assert progress["diffTotal"] == 0
    stats = (await arun_cli("brokerConsumeStats", *ns, "-b", two.broker_addrs[0], "--json")).json()
    assert stats["brokerAddr"] == two.broker_addrs[0]
    assert {(q["topic"], q["group"]) for q in stats["queues"]} >= {("Rewind", "CG-rw")}
    assert all(q["diff"] == 0 for q in stats["queues"] if q["group"] == "CG-rw")
    all_stats = (await arun_cli("statsAll", *ns, "-t", "Rewind", "--json")).json()
    assert [(row["topic"], row["consumerGroup"], row["accumulation"]) for row in all_stats["rows"]] == [
        ("Rewind", "CG-rw", 0)
    ]
    # TPS and 24 h counts come from the brokers' 10-second stats samples: none has passed yet
    assert isinstance(all_stats["rows"][0]["inMsg24Hour"], int) and isinstance(
        all_stats["rows"][0]["inTps"], float
    )


async def test_producer_connection_and_subscription_groups(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    await two.create_topic("Prod", queues=2)
    async with Producer("PG-live", namesrv=two.namesrv_addr) as producer:
        await producer.send(Message("Prod", b"x"))
        await producer.instance.send_heartbeat_to_all_brokers()
        doc = (await arun_cli("producerConnection", *ns, "-g", "PG-live", "-t", "Prod", "--json")).json()
        assert len(doc["connections"]) == 1 and doc["connections"][0]["versionDesc"].startswith("V4_")
    none = await arun_cli("producerConnection", *ns, "-g", "PG-nobody", "-t", "Prod")
    assert none.code == 1 and "PG-nobody" in none.err

    r = await arun_cli(
        "updateSubGroup", *ns, "-c", "DefaultCluster", "-g", "CG-made", "-r", "3", "-q", "2", "--json"
    )
    doc = r.json()
    assert sorted(doc["brokers"]) == sorted(two.broker_addrs)
    assert doc["groupConfig"]["retryMaxTimes"] == 3 and doc["groupConfig"]["consumeBroadcastEnable"] is False
    for broker in two.brokers:
        cfg = broker.subscription_group_manager.subscription_group_table["CG-made"]
        assert cfg.retry_max_times == 3 and cfg.retry_queue_nums == 2
    r = await arun_cli("deleteSubGroup", *ns, "-c", "DefaultCluster", "-g", "CG-made")
    assert r.code == 0 and r.out.count("success") == 2
    assert all("CG-made" not in b.subscription_group_manager.subscription_group_table for b in two.brokers)
    unknown = await arun_cli("consumerProgress", *ns, "-g", "CG-never")
    assert unknown.code == 1 and "'CG-never' has no consume offsets for any topic" in unknown.err
    # with a topic, as in RocketMQ: a group without offsets lags by everything stored
    assert (await arun_cli("consumerProgress", *ns, "-g", "CG-never", "-t", "Prod", "--json")).json()[
        "diffTotal"
    ] == 1
