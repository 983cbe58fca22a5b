"""The mqadmin commands of client/admin/cli_extra.py against a real two-broker cluster: each
does what RocketMQ's command of the same name does, in text and with ``--json``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Message, Producer
from pocketmq.client.admin.admin import MQAdmin
from pocketmq.remoting.protocol.errors import QueryNotFoundError
from pocketmq.testing import cluster

if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.client.admin.cli_helpers import arun_cli  # noqa: E402

pytestmark = pytest.mark.integration


def json_cases(broker_addr: str, sent: list[Any]) -> dict[str, tuple[list[str], set[str]]]:
    """Arguments and top-level JSON keys of every command here, for test_mqadmin_json (topic J,
    consumer group CG-json, broker-a at ``broker_addr``)."""
    sends = {"topic", "size", "sends", "avgRtMs"}
    broker_rows = {"brokers"}
    return {
        "queryMsgByOffset": (["-t", "J", "-b", sent[0].message_queue.broker_name,
                              "-i", str(sent[0].message_queue.queue_id), "-o", str(sent[0].queue_offset)],
                             {"topic", "brokerName", "queueId", "offset", "messages"}),
        "printMsgByQueue": (["-t", "J", "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true"],
                            {"topic", "brokerName", "queueId", "minOffset", "maxOffset", "messages", "tagCounts"}),
        "checkMsgSendRT": (["-t", "J", "-a", "3", "-s", "16"], sends),
        "sendMsgStatus": (["-b", "broker-a", "-c", "2", "-s", "16"], sends),
        "clusterRT": (["-a", "2", "-s", "16"], {"rows"}),
        "updateKvConfig": (["-s", "NS_X", "-k", "k", "-v", "v"], {"namespace", "key", "value", "namesrvs"}),
        "deleteKvConfig": (["-s", "NS_X", "-k", "k"], {"namespace", "key", "namesrvs"}),
        "updateNamesrvConfig": (["-k", "orderMessageEnable", "-v", "false"], {"key", "value", "namesrvs"}),
        "getConsumerConfig": (["-g", "CG-json"], {"group", "brokers"}),
        "allocateMQ": (["-t", "J", "-i", "10.0.0.1,10.0.0.2"], {"topic", "result"}),
        "cleanExpiredCQ": (["-b", broker_addr], broker_rows),
        "cleanUnusedTopic": (["-b", broker_addr], broker_rows),
        "deleteExpiredCommitLog": (["-b", broker_addr], broker_rows),
    }  # fmt: skip


async def test_extra_commands_do_what_rocketmq_does(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c", brokers=2) as c:
        ns = ["-n", c.namesrv_addr]
        await c.create_topic("X", queues=4)
        async with Producer("PG-extra", namesrv=c.namesrv_addr) as producer:
            sent = [
                await producer.send(Message("X", b"x%d" % i, tags=f"T{i % 2}", keys=f"k{i}"))
                for i in range(8)
            ]
        first = sent[0]
        mq = first.message_queue

        doc = (await arun_cli("queryMsgByOffset", *ns, "-t", "X", "-b", mq.broker_name, "-i", str(mq.queue_id),
                              "-o", str(first.queue_offset), "--json")).json()  # fmt: skip
        assert [m["body"] for m in doc["messages"]] == ["x0"] and doc["messages"][0]["msgId"] == first.msg_id
        r = await arun_cli(
            "queryMsgByOffset", *ns, "-t", "X", "-b", mq.broker_name, "-i", str(mq.queue_id), "-o", "999"
        )
        assert r.code != 0 and "no message at offset 999" in r.err

        in_queue = [s for s in sent if s.message_queue == mq]
        doc = (await arun_cli("printMsgByQueue", *ns, "-t", "X", "-a", mq.broker_name, "-i", str(mq.queue_id),
                              "-p", "true", "-d", "true", "--json")).json()  # fmt: skip
        assert [m["msgId"] for m in doc["messages"]] == [s.msg_id for s in in_queue]
        assert sum(doc["tagCounts"].values()) == len(in_queue)
        text = (await arun_cli("printMsgByQueue", *ns, "-t", "X", "-a", mq.broker_name, "-i", str(mq.queue_id),
                               "-d", "true")).out  # fmt: skip
        assert any(line.startswith("T") for line in text.splitlines())

        doc = (await arun_cli("checkMsgSendRT", *ns, "-t", "X", "-a", "5", "-s", "32", "--json")).json()
        assert len(doc["sends"]) == 5 and all(s["sendStatus"] == "SEND_OK" for s in doc["sends"])
        doc = (await arun_cli("sendMsgStatus", *ns, "-b", "broker-b", "-c", "3", "--json")).json()
        assert {s["brokerName"] for s in doc["sends"]} == {"broker-b"} and doc["topic"] == "broker-b"
        doc = (await arun_cli("clusterRT", *ns, "-a", "2", "--json")).json()
        assert {(r["brokerName"], r["successCount"], r["failCount"]) for r in doc["rows"]} == {
            ("broker-a", 2, 0), ("broker-b", 2, 0)}  # fmt: skip

        assert (
            await arun_cli("updateKvConfig", *ns, "-s", "ORDER_TOPIC_CONFIG", "-k", "X", "-v", "broker-a:4")
        ).ok
        async with MQAdmin(c.namesrv_addr) as admin:
            assert await admin.api.get_kv_config("ORDER_TOPIC_CONFIG", "X") == "broker-a:4"
            assert (await arun_cli("deleteKvConfig", *ns, "-s", "ORDER_TOPIC_CONFIG", "-k", "X")).ok
            with pytest.raises(QueryNotFoundError):
                await admin.api.get_kv_config("ORDER_TOPIC_CONFIG", "X")
        assert (await arun_cli("updateNamesrvConfig", *ns, "-k", "orderMessageEnable", "-v", "true")).ok
        got = (await arun_cli("getNamesrvConfig", *ns, "--json")).json()
        assert got["namesrvs"][0]["config"]["orderMessageEnable"] == "true"

        assert (await arun_cli("updateSubGroup", *ns, "-c", "DefaultCluster", "-g", "CG-extra", "-r", "5")).ok
        doc = (await arun_cli("getConsumerConfig", *ns, "-g", "CG-extra", "--json")).json()
        assert {b["brokerName"] for b in doc["brokers"]} == {"broker-a", "broker-b"}
        assert all(b["config"]["retryMaxTimes"] == 5 for b in doc["brokers"])
        r = await arun_cli("getConsumerConfig", *ns, "-g", "CG-nobody")
        assert r.code != 0

        doc = (
            await arun_cli("allocateMQ", *ns, "-t", "X", "-i", "10.0.0.1,10.0.0.2,10.0.0.3", "--json")
        ).json()
        shares = doc["result"]
        assert [len(shares[ip]) for ip in ("10.0.0.1", "10.0.0.2", "10.0.0.3")] == [3, 3, 2]
        assert sorted((q["brokerName"], q["queueId"]) for qs in shares.values() for q in qs) == sorted(
            (b, q) for b in ("broker-a", "broker-b") for q in range(4))  # fmt: skip

        for name in ("cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"):
            doc = (await arun_cli(name, *ns, "-c", "DefaultCluster", "--json")).json()
            assert sorted(b["addr"] for b in doc["brokers"]) == sorted(c.broker_addrs), name
            assert all(b["result"] for b in doc["brokers"]), (name, doc)


async def test_reset_of_an_offline_group_reports_its_old_offsets(tmp_path: Path) -> None:
    """The broker leaves an offline group's offsets alone (CONSUMER_NOT_ONLINE, as Java), so the
    tool's own fallback reads the real old offsets before it commits the new ones."""
    async with cluster(tmp_path / "c") as c:
        ns = ["-n", c.namesrv_addr]
        await c.create_topic("R", queues=1)
        async with Producer("PG-reset", namesrv=c.namesrv_addr) as producer:
            for i in range(5):
                await producer.send(Message("R", b"r%d" % i))
        c.brokers[0].consumer_offset_manager.commit_offset("CG-off", "R", 0, 2)
        doc = (await arun_cli("skipAccumulatedMessage", *ns, "-g", "CG-off", "-t", "R", "--json")).json()
        assert [(q["consumerOffset"], q["offset"]) for q in doc["queues"]] == [(2, 5)]
        assert c.brokers[0].consumer_offset_manager.query_offset("CG-off", "R", 0) == 5
