"""Delayed messages with the real C++ client (rocketmq 0.4.4) and ali-ons@3.12.0 against mqnamesrv +
mqbroker processes (issue 6).

The broker runs with ``messageDelayLevel`` = ``"1s 3s 1s ..."``: level 2 is 3 s.

* A message sent with delay level 2 is not consumable before its delay and is consumed after it:
  the consumer runs from the start, and every delivered copy was stored (re-put) at least 3 s
  after the producer's born timestamp; DELAY still holds the level it was sent with (as Apache
  RocketMQ's re-put keeps it), REAL_TOPIC/REAL_QID tell where it was due.
* A broker restart while delayed messages wait -- ``kill -9`` or a clean SIGTERM -- loses none of
  them and repeats none (none was due before the restart).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.testing.procs import Servers, servers
from tests.interop import drivers

pytestmark = pytest.mark.interop

DELAYS = "1s 3s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
LEVEL2_MS = 3000
N = 10


@pytest.fixture(scope="module")
def procs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    drivers.cpp_available()
    drivers.node_available()
    topics = {"Delay_cpp": 4, "Delay_js": 4}
    with servers(
        Path(tmp_path_factory.mktemp("delay")), broker_keys={"messageDelayLevel": DELAYS}, topics=topics
    ) as s:
        yield s


def check_delayed(msgs: list[dict[str, Any]], topic: str, n: int, prefix: str) -> None:
    bodies = Counter(m["body"] for m in msgs)
    assert set(bodies) == {f"msg-{i}" for i in range(n)} and max(bodies.values()) == 1, bodies
    for m in msgs:
        assert m["topic"] == topic and m["keys"].startswith(prefix) and m["reconsume_times"] == 0
        assert m["store_timestamp"] - m["born_timestamp"] >= LEVEL2_MS, m
        props = m["properties"]
        assert props.get("DELAY") == "2" and props.get("REAL_TOPIC") == topic, props


@pytest.mark.parametrize(("producer", "consumer"), [("cpp", "js"), ("js", "cpp")])
def test_level_2_is_consumed_only_after_its_delay(procs: Servers, producer: str, consumer: str) -> None:
    topic = f"Delay_{producer}"
    ns = procs.namesrv.addr
    opts: dict[str, Any] = {"prop_keys": ["REAL_TOPIC", "REAL_QID"]} if consumer == "cpp" else {}
    with drivers.start_consumer(consumer, ns, topic, expect=N, timeout=60, linger=0.5, **opts) as c:
        c.wait_started()
        sent = drivers.produce(producer, ns, topic, N, tags="TagD", keys_prefix="d", delay_level=2).sent
        assert len(sent) == N
        result = c.wait(90)
    assert result.ok, result.describe() + procs.diagnostics()
    check_delayed(result.messages, topic, N, "d")


@pytest.mark.parametrize("how", ["kill9", "sigterm"])
def test_broker_restart_while_messages_wait_loses_none(tmp_path: Path, how: str) -> None:
    drivers.cpp_available()
    drivers.node_available()
    with servers(tmp_path, broker_keys={"messageDelayLevel": DELAYS}, topics={"Waiting": 4}) as s:
        ns = s.namesrv.addr
        sent = drivers.run_cpp_produce(ns, "Waiting", 2 * N, tags="TagW", keys_prefix="w", delay_level=2)
        assert len(sent) == 2 * N
        if how == "kill9":
            s.broker.kill9()
        else:
            assert s.broker.stop() == 0
        s.restart_broker()
        with drivers.start_consumer("js", ns, "Waiting", expect=2 * N, timeout=60, linger=1.5) as c:
            result = c.wait(90)
        diagnostics = s.diagnostics()
    assert result.ok, result.describe() + diagnostics
    check_delayed(result.messages, "Waiting", 2 * N, "w")
