"""Every mqadmin command's ``--json`` document parses and has exactly its documented top-level
keys (the contract scripts rely on), against one real two-broker cluster."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.client.admin.cli import COMMANDS
from pocketmq.testing import cluster

if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.client.admin.cli_helpers import arun_cli  # noqa: E402
from tests.integration.test_mqadmin_extra import json_cases  # noqa: E402

pytestmark = pytest.mark.integration

MESSAGE_KEYS = {
    "msgId", "offsetMsgId", "topic", "tags", "keys", "queueId", "queueOffset", "commitLogOffset",
    "reconsumeTimes", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "sysFlag", "properties",
    "bodySize", "body", "bodyEncoding",
}  # fmt: skip


async def test_every_command_json_has_its_documented_keys(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c", brokers=2) as c:
        ns = ["-n", c.namesrv_addr]
        a_addr = c.broker_addrs[0]
        await c.create_topic("J", queues=2)
        async with Producer("PG-json", namesrv=c.namesrv_addr) as producer:
            sent = [await producer.send(Message("J", b"j%d" % i, tags="T", keys="key1")) for i in range(4)]
            async with Producer("PG-trace", namesrv=c.namesrv_addr, enable_msg_trace=True) as traced_producer:
                traced = await traced_producer.send(Message("J", b"traced"))  # its trace: queryMsgTraceById
            got: list[Any] = []

            async def listener(msgs: list[Any], ctx: Any) -> Any:
                got.extend(msgs)
                return CONSUME_SUCCESS

            pc = PushConsumer("CG-json", namesrv=c.namesrv_addr, listener=listener,
                              consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
            pc.subscribe("J", "*")
            await pc.start()
            try:
                for _ in range(400):
                    if len(got) >= 4:
                        break
                    await asyncio.sleep(0.05)
                await producer.instance.send_heartbeat_to_all_brokers()
                client_id = pc.instance.client_id

                cases: dict[str, tuple[list[str], set[str]]] = {
                    "updateTopic": (["-c", "DefaultCluster", "-t", "J2"], {"topicConfig", "brokers"}),
                    "topicList": (["-c"], {"topics", "rows"}),
                    "topicRoute": (["-t", "J"], {"topic", "brokerDatas", "queueDatas", "filterServerTable"}),
                    "topicStatus": (["-t", "J"], {"topic", "queues", "totalMessages"}),
                    "topicClusterList": (["-t", "J"], {"topic", "clusters"}),
                    "updateTopicPerm": (
                        ["-t", "J2", "-c", "DefaultCluster", "-p", "6"],
                        {"topic", "perm", "brokers"},
                    ),
                    "updateOrderConf": (
                        ["-t", "J2", "-m", "put", "-v", "broker-a:8"],
                        {"topic", "method", "orderConf"},
                    ),
                    "clusterList": ([], {"brokers"}),
                    "brokerStatus": (["-b", a_addr], {"brokers"}),
                    "getBrokerConfig": (["-b", a_addr], {"brokers"}),
                    "updateBrokerConfig": (
                        ["-b", a_addr, "-k", "fileReservedTime", "-v", "48"],
                        {"key", "value", "brokers"},
                    ),
                    "getNamesrvConfig": ([], {"namesrvs"}),
                    "brokerConsumeStats": (["-b", a_addr], {"brokerAddr", "diffTotal", "queues"}),
                    "statsAll": ([], {"rows"}),
                    "updateSubGroup": (["-c", "DefaultCluster", "-g", "CG-x"], {"groupConfig", "brokers"}),
                    "consumerProgress": (["-g", "CG-json"], {"group", "consumeTps", "diffTotal", "queues"}),
                    "consumerStatus": (
                        ["-g", "CG-json"],
                        {"group", "clients", "errors", "subscriptionConsistent"},
                    ),
                    "consumerConnection": (
                        ["-g", "CG-json"],
                        {
                            "group",
                            "connections",
                            "subscriptions",
                            "consumeType",
                            "messageModel",
                            "consumeFromWhere",
                        },
                    ),  # fmt: skip
                    "producerConnection": (["-g", "PG-json", "-t", "J"], {"group", "topic", "connections"}),
                    "resetOffsetByTime": (
                        ["-g", "CG-json", "-t", "J", "-s", "now", "--dry-run"],
                        {"group", "topic", "timestamp", "force", "dryRun", "queues"},
                    ),  # fmt: skip
                    "skipAccumulatedMessage": (
                        ["-g", "CG-json", "-t", "J", "--dry-run"],
                        {"group", "topic", "timestamp", "force", "dryRun", "queues"},
                    ),  # fmt: skip
                    "cloneGroupOffset": (
                        ["-s", "CG-json", "-d", "CG-clone", "-t", "J"],
                        {"srcGroup", "destGroup", "topic", "brokers"},
                    ),
                    "queryMsgById": (["-i", sent[0].offset_msg_id], {"messages"}),
                    "queryMsgByKey": (["-t", "J", "-k", "key1"], {"topic", "key", "messages"}),
                    "queryMsgByUniqueKey": (["-t", "J", "-i", sent[1].msg_id], {"messages"}),
                    "printMsg": (["-t", "J"], {"topic", "queues"}),
                    "consumeMessage": (["-t", "J", "-c", "2"], {"topic", "queues"}),
                    "sendMessage": (
                        ["-t", "J", "-p", "x"],
                        {"brokerName", "queueId", "sendStatus", "msgId", "offsetMsgId", "queueOffset"},
                    ),  # fmt: skip
                    "deleteSubGroup": (
                        ["-c", "DefaultCluster", "-g", "CG-x"],
                        {"group", "removeOffset", "brokers"},
                    ),
                    "wipeWritePerm": (["-b", "broker-b"], {"brokerName", "namesrvs"}),
                    "addWritePerm": (["-b", "broker-b"], {"brokerName", "namesrvs"}),
                    "deleteTopic": (["-t", "J2"], {"topic", "clusters", "brokers", "namesrvs"}),
                    "queryMsgTraceById": (["-i", traced.msg_id], {"msgId", "traceTopic", "hops"}),
                }
                cases.update(json_cases(a_addr, sent))  # client/admin/cli_extra.py
                # the ACL commands need aclEnable: their --json keys are checked in test_mqadmin_acl.py
                acl_commands = {n for n, (module, _, _) in COMMANDS.items() if module.endswith(".cli_acl")}
                assert set(cases) == set(COMMANDS) - acl_commands, set(COMMANDS) ^ set(cases)
                docs: dict[str, Any] = {}
                for name, (args, keys) in cases.items():
                    r = await arun_cli(name, *ns, *args, "--json")
                    doc = r.json()
                    assert set(doc) == keys, (name, set(doc) ^ keys)
                    docs[name] = doc
            finally:
                await pc.shutdown()
        assert client_id in docs["consumerStatus"]["clients"]
        for name in ("queryMsgById", "queryMsgByUniqueKey"):
            assert set(docs[name]["messages"][0]) == MESSAGE_KEYS | {"tracks"}
        assert set(docs["queryMsgByKey"]["messages"][0]) == MESSAGE_KEYS
        assert set(docs["printMsg"]["queues"][0]) == {
            "brokerName",
            "queueId",
            "minOffset",
            "maxOffset",
            "messages",
        }
        assert set(docs["topicStatus"]["queues"][0]) == {"brokerName", "queueId", "minOffset", "maxOffset",
                                                         "lastUpdateTimestamp"}  # fmt: skip
        assert set(docs["brokerStatus"]["brokers"][0]) == {"addr", "stats", "error"}
        assert set(docs["getBrokerConfig"]["brokers"][0]) == {"addr", "config"}
        assert set(docs["consumerProgress"]["queues"][0]) == {"topic", "brokerName", "queueId", "brokerOffset",
                                                              "consumerOffset", "diff", "lastTimestamp", "clientIp"}  # fmt: skip
        assert set(docs["topicList"]["rows"][0]) == {"cluster", "topic", "consumerGroup"}
        assert set(docs["statsAll"]["rows"][0]) == {"topic", "consumerGroup", "accumulation", "inTps", "outTps",
                                                    "inMsg24Hour", "outMsg24Hour"}  # fmt: skip
        assert set(docs["wipeWritePerm"]["namesrvs"][0]) == {"addr", "topicCount"}
