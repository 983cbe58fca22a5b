"""mqadmin against a real in-process cluster of two broker groups: topics, clusters, brokers,
write permission. The CLI runs in a worker thread (its own loop) while the servers keep serving
on the test's loop; a few commands run as the installed ``mqadmin`` script."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pocketmq.client import Message, Producer
from pocketmq.client.admin import MQAdmin
from pocketmq.testing import Cluster

# tests/integration is not a package: make the repository root importable for tests.* helpers
if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.client.admin.cli_helpers import arun_cli, arun_script  # noqa: E402
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def one_line(text: str) -> str:
    found = [line for line in text.splitlines() if line.strip()]
    assert len(found) == 1 and "Traceback" not in text, text
    return found[0]


async def test_topic_lifecycle(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    a_addr, b_addr = two.broker_addrs

    # create 8 queues on every master of the cluster (the installed script, in a subprocess)
    r = await arun_script(
        "updateTopic", *ns, "-c", "DefaultCluster", "-t", "Life", "-r", "8", "-w", "8", "--json"
    )
    doc = r.json()
    assert sorted(doc["brokers"]) == sorted(two.broker_addrs)
    assert doc["topicConfig"]["readQueueNums"] == 8 and doc["topicConfig"]["writeQueueNums"] == 8

    # the route shows both broker groups with 8 queues each
    route = (await arun_cli("topicRoute", *ns, "-t", "Life", "--json")).json()
    assert {q["brokerName"]: (q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]} == {
        "broker-a": (8, 8, 6), "broker-b": (8, 8, 6)
    }  # fmt: skip
    assert sorted(b["brokerAddrs"]["0"] for b in route["brokerDatas"]) == sorted(two.broker_addrs)
    table = await arun_cli("topicRoute", *ns, "-t", "Life", "-l")
    assert "broker-a" in table.out and "broker-b" in table.out and table.out.splitlines()[-1].split()[:4] == [
        "Total:", "2", "16", "16"
    ]  # fmt: skip
    assert (await arun_cli("topicClusterList", *ns, "-t", "Life")).out == "DefaultCluster\n"
    assert "Life" in (await arun_cli("topicList", *ns)).out.split()

    # status shows offsets after sends, per queue
    sent: dict[tuple[str, int], int] = {}
    async with Producer("PG", namesrv=two.namesrv_addr) as producer:
        for i in range(40):
            res = await producer.send(Message("Life", b"m%d" % i))
            key = (res.message_queue.broker_name, res.message_queue.queue_id)
            sent[key] = sent.get(key, 0) + 1
    status = (await arun_cli("topicStatus", *ns, "-t", "Life", "--json")).json()
    assert len(status["queues"]) == 16 and status["totalMessages"] == 40
    got = {(q["brokerName"], q["queueId"]): q["maxOffset"] - q["minOffset"] for q in status["queues"]}
    assert {k: v for k, v in got.items() if v} == sent
    human = await arun_cli("topicStatus", *ns, "-t", "Life")
    assert human.out.startswith("#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated")
    assert len(human.out.splitlines()) == 17

    # delete removes it from every broker and from the name server
    r = await arun_cli("deleteTopic", *ns, "-t", "Life")
    assert r.code == 0 and "delete topic [Life] from cluster [DefaultCluster] success." in r.out
    gone = await arun_cli("topicRoute", *ns, "-t", "Life")
    assert gone.code == 1 and "'Life' does not exist" in one_line(gone.err)
    async with MQAdmin(two.namesrv_addr) as admin:
        assert await admin.topic_config(a_addr, "Life") is None
        assert await admin.topic_config(b_addr, "Life") is None
        assert "Life" not in await admin.topic_list()
    st = await arun_cli("topicStatus", *ns, "-t", "Life")
    assert st.code == 1 and "does not exist" in one_line(st.err)


async def test_update_topic_perm_and_order(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    a_addr = two.broker_addrs[0]
    assert (await arun_cli("updateTopic", *ns, "-b", a_addr, "-t", "Perm", "-w", "4", "-r", "4")).ok
    r = await arun_cli("updateTopicPerm", *ns, "-b", a_addr, "-t", "Perm", "-p", "4", "--json")
    assert r.json()["brokers"] == [{"addr": a_addr, "oldPerm": 6, "newPerm": 4}]

    async def route_perm() -> bool:
        doc = (await arun_cli("topicRoute", *ns, "-t", "Perm", "--json")).json()
        return [q["perm"] for q in doc["queueDatas"]] == [4]

    await wait_until(route_perm)
    human = await arun_cli("updateTopicPerm", *ns, "-c", "DefaultCluster", "-t", "Perm", "-p", "6")
    # broker-b does not have the topic: a clear failure naming it
    assert human.code == 1 and "has no topic 'Perm'" in one_line(human.err)
    ordered = await arun_cli(
        "updateTopic", *ns, "-c", "DefaultCluster", "-t", "Ordered", "-o", "true", "-w", "2"
    )
    assert ordered.ok and "order=true" in ordered.out
    conf = (await arun_cli("updateOrderConf", *ns, "-t", "Ordered", "-m", "get", "--json")).json()
    assert conf["orderConf"] == "broker-a:2;broker-b:2"


async def test_cluster_list_broker_status_and_configs(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    await two.create_topic("Tps", queues=4)
    async with Producer("PG", namesrv=two.namesrv_addr) as producer:
        for i in range(20):
            await producer.send(Message("Tps", b"x%d" % i))

    doc = (await arun_script("clusterList", *ns, "--json")).json()
    brokers = {b["brokerName"]: b for b in doc["brokers"]}
    assert set(brokers) == {"broker-a", "broker-b"}
    for b in brokers.values():
        assert b["error"] is None and b["cluster"] == "DefaultCluster" and b["brokerId"] == 0
        for key in (
            "putTps",
            "getTransferedTps",
            "msgPutTotalTodayNow",
            "brokerVersionDesc",
            "commitLogDiskRatio",
        ):
            assert key in b["stats"], key
    assert sum(int(b["stats"]["msgPutTotalTodayNow"]) for b in brokers.values()) >= 20
    assert sum(b["inTotalToday"] for b in brokers.values()) >= 20
    human = (await arun_cli("clusterList", *ns)).out.splitlines()
    assert human[0].startswith("#Cluster Name") and "#InTPS(LOAD)" in human[0] and len(human) == 3
    assert "#InTotalToday" in (await arun_cli("clusterList", *ns, "-m")).out

    status = (await arun_cli("brokerStatus", *ns, "-b", two.broker_addrs[0], "--json")).json()
    assert "putTps" in status["brokers"][0]["stats"] and "bootTimestamp" in status["brokers"][0]["stats"]
    text = (await arun_cli("brokerStatus", *ns, "-c", "DefaultCluster")).out
    assert text.count("putTps") == 2

    r = await arun_cli(
        "updateBrokerConfig", *ns, "-c", "DefaultCluster", "-k", "fileReservedTime", "-v", "24"
    )
    assert r.code == 0 and r.out.count("update broker config success") == 2
    cfg = (await arun_cli("getBrokerConfig", *ns, "-b", two.broker_addrs[1], "--json")).json()
    assert cfg["brokers"][0]["config"]["fileReservedTime"] == "24"
    bad = await arun_cli(
        "updateBrokerConfig", *ns, "-b", two.broker_addrs[1], "-k", "fileReservedTme", "-v", "1"
    )
    assert bad.code == 1 and "fileReservedTme" in one_line(bad.err)
    ns_cfg = (await arun_cli("getNamesrvConfig", *ns, "--json")).json()
    assert (
        ns_cfg["namesrvs"][0]["addr"] == two.namesrv_addr and "listenPort" in ns_cfg["namesrvs"][0]["config"]
    )


async def test_wipe_write_perm_moves_producers_to_the_other_broker_group(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    await two.create_topic("Drain", queues=4)
    r = await arun_cli("wipeWritePerm", *ns, "-b", "broker-a")
    assert r.code == 0 and r.out.startswith(
        f"wipe write perm of broker[broker-a] in name server[{two.namesrv_addr}] OK, "
    )
    assert int(r.out.split()[-1]) >= 1
    route = (await arun_cli("topicRoute", *ns, "-t", "Drain", "--json")).json()
    assert {q["brokerName"]: q["perm"] for q in route["queueDatas"]} == {"broker-a": 4, "broker-b": 6}
    async with Producer("PG-drain", namesrv=two.namesrv_addr) as producer:
        results = [await producer.send(Message("Drain", b"%d" % i)) for i in range(16)]
    assert {res.message_queue.broker_name for res in results} == {"broker-b"}

    r = await arun_cli("addWritePerm", *ns, "-b", "broker-a", "--json")
    assert r.json()["namesrvs"][0]["topicCount"] >= 1
    route = (await arun_cli("topicRoute", *ns, "-t", "Drain", "--json")).json()
    assert {q["brokerName"]: q["perm"] for q in route["queueDatas"]} == {"broker-a": 6, "broker-b": 6}
    async with Producer("PG-drain2", namesrv=two.namesrv_addr) as producer:
        results = [await producer.send(Message("Drain", b"%d" % i)) for i in range(16)]
    assert {res.message_queue.broker_name for res in results} == {"broker-a", "broker-b"}
