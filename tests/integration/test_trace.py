"""Message traces end to end: a traced send and consume, read back by mqadmin and the console API
(issue 20); the record format against the Java client's."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.client.admin import MQAdmin
from pocketmq.client.admin.cli_trace import trace_text
from pocketmq.client.admin.traces import query_msg_trace
from pocketmq.client.trace import TraceHop, decode_traces, encode_pub, encode_sub_after, encode_sub_before
from pocketmq.deploy.console.server import ConsoleServer
from pocketmq.testing import Cluster, cluster
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


async def traced_send_and_consume(c: Cluster, topic: str = "TracedTopic") -> tuple[str, list[TraceHop]]:
    """One traced send, consumed by a traced push consumer; returns the msgId and its hops."""
    await c.create_topic(topic, queues=2)
    got: list[Any] = []

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        got.extend(msgs)
        return CONSUME_SUCCESS

    consumer = PushConsumer(
        "TraceCG", namesrv=c.namesrv_addr, listener=listener, enable_msg_trace=True,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )  # fmt: skip
    consumer.subscribe(topic, "*")
    async with Producer("TracePG", namesrv=c.namesrv_addr, enable_msg_trace=True) as producer:
        result = await producer.send(Message(topic, b"traced body", tags="TagT", keys="order-7"))
    async with consumer:
        await wait_until(lambda: got, timeout=30)
    async with MQAdmin(c.namesrv_addr) as admin:
        hops: list[TraceHop] = []

        async def complete() -> bool:
            hops[:] = await query_msg_trace(admin, result.msg_id)
            return {h.type for h in hops} == {"Pub", "SubBefore", "SubAfter"}

        await wait_until(complete, timeout=30)
    return result.msg_id, hops


async def test_traced_send_and_consume_show_both_hops(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c", broker_config={"traceTopicEnable": "true"}) as c:
        msg_id, hops = await traced_send_and_consume(c)
        pub = next(h for h in hops if h.type == "Pub")
        assert (pub.group_name, pub.topic, pub.tags, pub.keys, pub.success) == (
            "TracePG", "TracedTopic", "TagT", "order-7", True,
        )  # fmt: skip
        assert (
            pub.store_host == c.brokers[0].broker_addr and pub.offset_msg_id and pub.region == "DefaultRegion"
        )
        after = next(h for h in hops if h.type == "SubAfter")
        before = next(h for h in hops if h.type == "SubBefore")
        assert (
            after.group_name == before.group_name == "TraceCG" and after.success and after.context_code == 0
        )
        assert after.request_id == before.request_id and before.retry_times == 0

        # mqadmin queryMsgTraceById, text and --json, in its own process
        base = [sys.executable, "-m", "pocketmq.client.admin.cli", "queryMsgTraceById", "-n", c.namesrv_addr]
        out = await asyncio.to_thread(
            subprocess.run,
            [*base, "-i", msg_id, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["msgId"] == msg_id and doc["traceTopic"] == "RMQ_SYS_TRACE_TOPIC"
        assert [h["type"] for h in doc["hops"]].count("Pub") == 1
        assert {h["groupName"] for h in doc["hops"] if h["type"] == "SubAfter"} == {"TraceCG"}
        text = await asyncio.to_thread(
            subprocess.run, [*base, "-i", msg_id], capture_output=True, text=True, timeout=60, check=False
        )
        assert text.returncode == 0, text.stderr
        assert "#ProducerGroup" in text.stdout and "#ConsumerGroup" in text.stdout
        assert "TracePG" in text.stdout and "TraceCG" in text.stdout and "success" in text.stdout
        missing = await asyncio.to_thread(
            subprocess.run, [*base, "-i", "NOSUCHID"], capture_output=True, text=True, timeout=60, check=False
        )
        assert missing.returncode == 1 and "no trace of message 'NOSUCHID'" in missing.stderr

        # the console's trace API returns the same hops
        console = ConsoleServer(c.namesrv_addr)
        await console.start(host="127.0.0.1", port=0)
        try:

            def get() -> Any:
                with urllib.request.urlopen(f"{console.url}api/trace?id={msg_id}", timeout=10) as r:
                    return json.loads(r.read())

            api = await asyncio.to_thread(get)
        finally:
            await console.stop()
        assert [h["type"] for h in api["hops"]] == [h.type for h in hops]


def test_records_are_the_java_clients_format() -> None:
    """Fields and separators as Java's TraceDataEncoder writes them (null for absent tags/keys)."""
    pub = encode_pub(
        timestamp=1700000000000, region="DefaultRegion", group="PG", topic="T", msg_id="ID1", tags=None,
        keys="k1 k2", store_host="10.0.0.1:10911", body_length=5, cost_ms=3, msg_type=0,
        offset_msg_id="0A00000100002A9F0000000000000000", success=True,
    )  # fmt: skip
    assert pub == (
        "Pub\x011700000000000\x01DefaultRegion\x01PG\x01T\x01ID1\x01null\x01k1 k2\x0110.0.0.1:10911\x015\x013"
        "\x010\x010A00000100002A9F0000000000000000\x01true\x02"
    )
    before = encode_sub_before(
        timestamp=1, region="R", group="CG", request_id="REQ", msg_id="ID1", retry_times=2, keys=None
    )
    assert before == "SubBefore\x011\x01R\x01CG\x01REQ\x01ID1\x012\x01null\x02"
    after = encode_sub_after(
        request_id="REQ",
        msg_id="ID1",
        cost_ms=7,
        success=False,
        keys="k1",
        context_code=4,
        timestamp=9,
        group="CG",
    )
    assert after == "SubAfter\x01REQ\x01ID1\x017\x01false\x01k1\x014\x019\x01CG\x02"
    hops = decode_traces(pub + before + after, "10.0.0.9")
    assert [h.type for h in hops] == ["Pub", "SubBefore", "SubAfter"]
    assert (hops[0].store_host, hops[0].cost_time, hops[0].client_host) == ("10.0.0.1:10911", 3, "10.0.0.9")
    assert (hops[2].success, hops[2].context_code, hops[2].group_name, hops[2].timestamp) == (
        False,
        4,
        "CG",
        9,
    )
    # older Java clients: SubAfter without timestamp/group, Pub without offsetMsgId
    old = decode_traces(
        "SubAfter\x01REQ\x01ID1\x017\x01true\x01k1\x02Pub\x011\x01R\x01PG\x01T\x01ID\x01t\x01k\x01h\x011\x012\x010\x01true\x02"
    )
    assert [(h.type, h.success) for h in old] == [("SubAfter", True), ("Pub", True)]
    assert "#ProducerGroup" in trace_text(hops) and "Sub        CG" in trace_text(hops)
