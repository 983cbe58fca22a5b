"""pocketmq's SDK and the real C++ client (rocketmq==0.4.4) on one topic, both ways, against
mqnamesrv + mqbroker processes: bodies (plain and zlib-compressed), tags, keys and user
properties survive, every message is delivered exactly once."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.testing.procs import Servers, servers
from tests.interop import drivers

pytestmark = pytest.mark.interop
N = 200
BIG = 5000  # over compressMsgBodyOverHowmuch (4096): compressed on the wire by either side


@pytest.fixture(scope="module")
def procs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    drivers.cpp_available()
    topics = {"SdkToCpp": 4, "CppToSdk": 4}
    with servers(Path(tmp_path_factory.mktemp("sdk-cpp")), topics=topics) as s:
        for topic in topics:
            s.wait_route(topic)
        yield s


async def test_sdk_produces_cpp_consumes(procs: Servers) -> None:
    ns = procs.namesrv.addr
    consumer = await drivers.start_cpp_consumer_async(
        ns, "SdkToCpp", expect=N, timeout=90, prop_keys=["color"]
    )
    try:
        await consumer.wait_started()
        async with Producer("SdkPG", namesrv=ns) as producer:
            for i in range(N):
                body = f"msg-{i}".encode() if i % 10 else f"msg-{i}-".encode() + b"x" * BIG
                await producer.send(
                    Message("SdkToCpp", body, tags="TagA", keys=f"k{i}", properties={"color": "blue"})
                )
        msgs = await consumer.wait_messages(N, timeout=90)
    finally:
        await consumer.stop()
    bodies = Counter(m["body"].split("-x")[0].rstrip("-") if "body" in m else "?" for m in msgs)
    assert len(msgs) == N and max(bodies.values()) == 1
    assert set(bodies) == {f"msg-{i}" for i in range(N)}
    for m in msgs:
        index = int(m["body"].split("-")[1])
        assert m["tags"] == "TagA" and m["keys"] == f"k{index}"
        assert m["properties"].get("color") == "blue"
        assert len(m["uniq_key"]) == 32
        if index % 10 == 0:
            assert len(m["body"]) == len(f"msg-{index}-") + BIG  # inflated by the C++ client


@pytest.mark.parametrize(("topic", "batch"), [("CppToSdk", False)])
async def test_cpp_produces_sdk_consumes(procs: Servers, topic: str, batch: bool) -> None:
    ns = procs.namesrv.addr
    sent = await drivers.run_cpp_produce_async(
        ns, topic, N, tags="TagB", keys_prefix="k", props={"color": "red"}, batch=batch,
        body_size=None if batch else BIG,
    )  # fmt: skip
    assert len(sent) >= 1
    got: list = []

    async def listener(msgs, ctx):
        got.extend(msgs)
        return CONSUME_SUCCESS

    consumer = PushConsumer(f"SdkCG_{topic}", namesrv=ns, listener=listener,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe(topic, "TagB")
    async with consumer:
        for _ in range(1500):
            if len(got) >= N:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
    prefixes = Counter(m.body.split(b"-x")[0].rstrip(b"-") for m in got)
    assert len(got) == N and max(prefixes.values()) == 1
    assert set(prefixes) == {f"msg-{i}".encode() for i in range(N)}
    for m in got:
        index = int(m.body.split(b"-")[1])
        assert m.topic == topic and m.tags == "TagB" and m.keys == f"k{index}"
        assert m.properties.get("color") == "red"
        if not batch:
            assert len(m.body) == BIG  # C++ compressed it; we inflated
