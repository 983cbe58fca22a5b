"""The real C++ client (rocketmq==0.4.4) and ali-ons@3.12.0 against mqnamesrv + mqbroker processes.

Acceptance of issue 5: 2,000 sync sends with keys and tags to a fresh (auto-created) topic and
to a pre-created 8-queue topic; a clustering push consumer receives every message exactly once
with body, tags, keys and properties intact; C++-produced messages consumed by ali-ons and
vice versa.

Observed client quirk: ali-ons 3.12.0 throws on the name server's TOPIC_NOT_EXIST reply *before*
its TBW102 fallback (``getTopicRouteInfoFromNameServer`` → ``_defaultHandler``), so it cannot
send the first message of an unknown topic -- against Apache RocketMQ's name server just as
against ours. Its "fresh topic" test therefore lets the broker auto-create the topic from a
first TBW102-template send (what the Java and C++ producers do), then ali-ons sends all 2,000.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.testing.procs import Servers, servers
from pocketmq.testing.wire import Wire
from tests.interop import drivers

pytestmark = pytest.mark.interop

N = 2000
PRE = "PreCreated8"
CROSS_N = 300


@pytest.fixture(scope="module")
def procs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    drivers.cpp_available()
    drivers.node_available()
    topics = {f"{PRE}_cpp": 8, f"{PRE}_js": 8, "CrossCppToJs": 8, "CrossJsToCpp": 8, "CppBatch": 4}
    with servers(Path(tmp_path_factory.mktemp("interop")), topics=topics) as s:
        yield s


def check_exactly_once(
    msgs: list[dict[str, Any]], n: int, topic: str, tags: str, props: dict[str, str]
) -> None:
    bodies = Counter(m["body"] for m in msgs)
    assert len(msgs) == n, f"{len(msgs)} deliveries for {n} messages"
    assert set(bodies) == {f"msg-{i}" for i in range(n)} and max(bodies.values()) == 1
    for m in msgs:
        index = int(m["body"].split("-")[1])
        assert m["topic"] == topic and m["tags"] == tags and m["keys"] == f"k{index}"
        assert m["reconsume_times"] == 0 and m["delivery"] == 1
        for key, value in props.items():
            assert m["properties"].get(key) == value, (key, m["properties"])
        assert m["properties"].get("CLUSTER") == "DefaultCluster"


def produce_and_consume(
    procs: Servers, producer: str, consumer: str, topic: str, n: int
) -> list[dict[str, Any]]:
    ns = procs.namesrv.addr
    props = {"origin": producer}
    res = drivers.produce(producer, ns, topic, n, tags="TagA", keys_prefix="k", props=props, timeout=120)
    assert len(res.sent) == n and all(e["status"] in ("SEND_OK", "OK") for e in res.sent)
    opts: dict[str, Any] = {"prop_keys": ["origin"]} if consumer == "cpp" else {}
    with drivers.start_consumer(consumer, ns, topic, expect=n, timeout=60, linger=1.0, **opts) as c:
        result = c.wait(90)
    assert result.ok, result.describe() + procs.diagnostics()
    msgs = result.messages
    check_exactly_once(msgs, n, topic, "TagA", props)
    return msgs


def first_send_via_template(procs: Servers, topic: str) -> None:
    """Auto-create ``topic`` the way Java/C++ producers do: a send naming TBW102 as its template."""

    async def go() -> None:
        wire = Wire(procs.broker.addr)
        try:
            r = await wire.send(topic, b"first", queue_id=0, d="8")
            assert r.code == ResponseCode.SUCCESS, r.remark
        finally:
            await wire.close()

    asyncio.run(go())
    procs.wait_route(topic)


@pytest.mark.parametrize("client", ["cpp", "js"])
def test_fresh_auto_created_topic(procs: Servers, client: str) -> None:
    topic = f"Fresh_{client}"
    if client == "js":
        first_send_via_template(procs, topic)
    ns = procs.namesrv.addr
    res = drivers.produce(
        client, ns, topic, N, tags="TagA", keys_prefix="k", props={"origin": client}, timeout=120
    )
    assert len(res.sent) == N
    route = procs.wait_route(topic)
    assert route.queue_datas[0].write_queue_nums == (8 if client == "js" else 4)
    opts: dict[str, Any] = {"prop_keys": ["origin"]} if client == "cpp" else {}
    expect = N + (1 if client == "js" else 0)
    with drivers.start_consumer(client, ns, topic, expect=expect, timeout=60, linger=1.0, **opts) as c:
        result = c.wait(90)
    assert result.ok, result.describe() + procs.diagnostics()
    msgs = [m for m in result.messages if m["body"] != "first"]
    check_exactly_once(msgs, N, topic, "TagA", {"origin": client})


@pytest.mark.parametrize("client", ["cpp", "js"])
def test_pre_created_eight_queue_topic(procs: Servers, client: str) -> None:
    topic = f"{PRE}_{client}"
    msgs = produce_and_consume(procs, client, client, topic, N)
    per_queue = Counter(m["queue_id"] for m in msgs)
    assert set(per_queue) == set(range(8)), per_queue  # the producer spread over all 8 queues


def test_cpp_produced_consumed_by_ali_ons(procs: Servers) -> None:
    msgs = produce_and_consume(procs, "cpp", "js", "CrossCppToJs", CROSS_N)
    assert all(m["properties"].get("UNIQ_KEY") for m in msgs)  # set by the C++ producer, kept


def test_ali_ons_produced_consumed_by_cpp(procs: Servers) -> None:
    produce_and_consume(procs, "js", "cpp", "CrossJsToCpp", CROSS_N)


def test_cpp_batch_send_is_code_310_with_the_batch_flag(procs: Servers) -> None:
    ns = procs.namesrv.addr
    res = drivers.produce("cpp", ns, "CppBatch", 32, tags="TagB", keys_prefix="k", batch=True)
    assert res.ok and res.sent[0]["status"] == "OK"
    with drivers.start_consumer("js", ns, "CppBatch", expect=32, timeout=60, linger=0.5) as c:
        result = c.wait(90)
    assert result.ok, result.describe() + procs.diagnostics()
    msgs = sorted(result.messages, key=lambda m: m["queue_offset"])
    assert [m["body"] for m in msgs] == [f"msg-{i}" for i in range(32)]  # one queue, consecutive offsets
    assert len({m["queue_id"] for m in msgs}) == 1 and [m["queue_offset"] for m in msgs] == list(range(32))
    assert all(m["keys"] == f"k{i}" and m["tags"] == "TagB" for i, m in enumerate(msgs))
