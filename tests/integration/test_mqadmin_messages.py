"""mqadmin message commands against a real in-process cluster (two broker groups): look-ups by
offset id, key and unique key, consumption tracks, printMsg ranges, consumeMessage, sendMessage."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer, SendResult
from pocketmq.testing import Cluster

if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.client.admin.cli_helpers import arun_cli, arun_script  # noqa: E402

pytestmark = pytest.mark.integration


async def send_all(c: Cluster, topic: str, msgs: list[Message]) -> list[SendResult]:
    async with Producer("PG-msg", namesrv=c.namesrv_addr) as producer:
        return [await producer.send(m) for m in msgs]


async def test_find_a_sent_message_by_id_key_and_unique_key(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    await two.create_topic("Find", queues=4)
    results = await send_all(
        two,
        "Find",
        [Message("Find", f"body-{i}".encode(), tags="TagA", keys=[f"order-{i}", "shared"]) for i in range(6)],
    )
    target = results[3]

    by_id = (await arun_cli("queryMsgById", *ns, "-i", target.offset_msg_id, "--json")).json()
    (msg,) = by_id["messages"]
    assert (msg["msgId"], msg["offsetMsgId"], msg["body"], msg["tags"]) == (
        target.msg_id, target.offset_msg_id, "body-3", "TagA"
    )  # fmt: skip
    assert msg["queueId"] == target.message_queue.queue_id and msg["queueOffset"] == target.queue_offset
    assert msg["tracks"] == []  # nobody consumes the topic yet
    human = await arun_script("queryMsgById", *ns, "-i", target.offset_msg_id)
    assert human.code == 0 and "Message Body:        body-3" in human.out and "WARN: No Consumer" in human.out
    # the producer's msgId works too once the topic is given
    by_uniq_as_id = (await arun_cli("queryMsgById", *ns, "-i", target.msg_id, "-t", "Find", "--json")).json()
    assert [m["offsetMsgId"] for m in by_uniq_as_id["messages"]] == [target.offset_msg_id]

    by_key = (await arun_cli("queryMsgByKey", *ns, "-t", "Find", "-k", "order-3", "--json")).json()
    assert [m["msgId"] for m in by_key["messages"]] == [target.msg_id]
    shared = (await arun_cli("queryMsgByKey", *ns, "-t", "Find", "-k", "shared", "--json")).json()
    assert sorted(m["msgId"] for m in shared["messages"]) == sorted(r.msg_id for r in results)
    table = await arun_cli("queryMsgByKey", *ns, "-t", "Find", "-k", "order-3")
    assert table.out.splitlines()[1].split() == [
        target.msg_id,
        str(target.message_queue.queue_id),
        str(target.queue_offset),
    ]

    by_uniq = (await arun_cli("queryMsgByUniqueKey", *ns, "-t", "Find", "-i", target.msg_id, "--json")).json()
    assert [m["offsetMsgId"] for m in by_uniq["messages"]] == [target.offset_msg_id]

    # not found: non-zero and one clear line
    for args in (
        ("queryMsgByKey", "-t", "Find", "-k", "nope"),
        ("queryMsgByUniqueKey", "-t", "Find", "-i", "0A0000000000000000000000000000FF"),
        ("queryMsgById", "-i", "zz"),
    ):
        r = await arun_cli(*args, *ns)
        assert r.code == 1 and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r


async def test_consumption_tracks(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    await two.create_topic("Track", queues=2)
    first = await send_all(
        two, "Track", [Message("Track", b"a", tags="TagA"), Message("Track", b"b", tags="TagB")]
    )
    got: list[Any] = []

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        got.extend(msgs)
        return CONSUME_SUCCESS

    pc = PushConsumer("CG-track", namesrv=two.namesrv_addr, listener=listener,
                      consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                      persist_consumer_offset_interval=100)  # fmt: skip
    pc.subscribe("Track", "TagA")
    async with pc:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while not got:
            assert loop.time() < deadline
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # both queues consumed past their message, offsets persisted
        tracks = {}
        for res in first:
            doc = (await arun_cli("queryMsgById", *ns, "-i", res.offset_msg_id, "--json")).json()
            tracks[doc["messages"][0]["body"]] = doc["messages"][0]["tracks"]
    assert tracks["a"] == [{"consumerGroup": "CG-track", "trackType": "CONSUMED", "exceptionDesc": None}]
    assert tracks["b"][0]["trackType"] == "CONSUMED_BUT_FILTERED"
    later = (await send_all(two, "Track", [Message("Track", b"c", tags="TagA")]))[0]
    doc = (await arun_cli("queryMsgById", *ns, "-i", later.offset_msg_id, "--json")).json()
    assert doc["messages"][0]["tracks"][0]["trackType"] in ("NOT_ONLINE", "NOT_CONSUME_YET")


async def test_print_and_consume_ranges(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    await two.create_topic("Range", queues=2)
    early = await send_all(two, "Range", [Message("Range", f"e{i}".encode(), tags="Old") for i in range(8)])
    await asyncio.sleep(0.02)
    cut = int(time.time() * 1000)
    await asyncio.sleep(0.02)
    late = await send_all(two, "Range", [Message("Range", f"l{i}".encode(), tags="New") for i in range(6)])

    everything = (await arun_cli("printMsg", *ns, "-t", "Range", "--json")).json()
    assert len(everything["queues"]) == 4
    bodies = [m["body"] for q in everything["queues"] for m in q["messages"]]
    assert sorted(bodies) == sorted([f"e{i}" for i in range(8)] + [f"l{i}" for i in range(6)])
    for q in everything["queues"]:
        assert len(q["messages"]) == q["maxOffset"] - q["minOffset"]

    recent = (await arun_cli("printMsg", *ns, "-t", "Range", "-b", str(cut), "--json")).json()
    assert sorted(m["body"] for q in recent["queues"] for m in q["messages"]) == sorted(
        f"l{i}" for i in range(6)
    )
    tagged = (await arun_cli("printMsg", *ns, "-t", "Range", "-s", "Old", "-d", "false", "--json")).json()
    old = [m for q in tagged["queues"] for m in q["messages"]]
    assert len(old) == 8 and all(m["tags"] == "Old" and m["body"] is None for m in old)
    human = await arun_cli("printMsg", *ns, "-t", "Range")
    assert human.out.count("MSGID: ") == 14 and human.out.count("minOffset=") == 4 and "BODY: l0" in human.out

    one = late[0].message_queue
    one_queue = [*ns, "-t", "Range", "-b", one.broker_name, "-i", str(one.queue_id)]
    r = await arun_cli("consumeMessage", *one_queue, "-c", "2", "--json")
    (queue,) = r.json()["queues"]
    assert (queue["brokerName"], queue["queueId"]) == (one.broker_name, one.queue_id)
    expected = sorted(
        (x for x in early + late if x.message_queue == one), key=lambda x: x.queue_offset
    )[:2]  # fmt: skip
    assert [m["offsetMsgId"] for m in queue["messages"]] == [x.offset_msg_id for x in expected]
    r = await arun_cli("consumeMessage", *one_queue, "-o", "1", "-c", "1", "--json")
    assert [m["queueOffset"] for m in r.json()["queues"][0]["messages"]] == [1]
    bad = await arun_cli("consumeMessage", *ns, "-t", "Range", "-b", "broker-z")
    assert bad.code == 1 and "no readable queue" in bad.err


async def test_send_message_command(two: Cluster) -> None:
    ns = ["-n", two.namesrv_addr]
    await two.create_topic("Sent", queues=2)
    r = await arun_script(
        "sendMessage", *ns, "-t", "Sent", "-p", "hi there", "-k", "K1", "-c", "TagS", "--json"
    )
    doc = r.json()
    assert doc["sendStatus"] == "SEND_OK" and doc["brokerName"] in ("broker-a", "broker-b")
    found = (await arun_cli("queryMsgById", *ns, "-i", doc["offsetMsgId"], "--json")).json()["messages"][0]
    assert (found["body"], found["keys"], found["tags"], found["msgId"]) == (
        "hi there",
        "K1",
        "TagS",
        doc["msgId"],
    )
    pinned = await arun_cli("sendMessage", *ns, "-t", "Sent", "-p", "x", "-b", "broker-b", "-i", "1")
    assert pinned.code == 0 and pinned.out.splitlines()[1].split()[:3] == ["broker-b", "1", "SEND_OK"]
