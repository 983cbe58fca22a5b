"""``kill -9`` of the mqbroker process, with real clients (ASYNC_FLUSH survives kill -9).

* mid-consumption: the broker dies while an ali-ons push consumer is pulling C++-produced
  messages; it is restarted on the same store and port; the consumer goes on and every
  acknowledged message is delivered (at least once: redelivery after the crash is allowed, loss
  is not). (ali-ons fails its in-flight pulls when the connection drops and re-pulls within a
  few seconds; librocketmq 2.x leaves pulls in flight on a dead connection until its 30 s
  request timeout, so a C++ consumer resumes too, but 30 s later.)
* committed offsets: a group's offsets, committed by the client and flushed by the broker,
  survive a kill -9; a new consumer of the group resumes from them (no old message again).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest

from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.testing.procs import servers
from pocketmq.testing.wire import Wire
from tests.interop import drivers

pytestmark = [pytest.mark.interop, pytest.mark.fault]


def committed(addr: str, group: str, topic: str, queues: int) -> dict[int, int]:
    async def go() -> dict[int, int]:
        wire = Wire(addr)
        try:
            out = {}
            for q in range(queues):
                r = await wire.call(
                    RequestCode.QUERY_CONSUMER_OFFSET,
                    {"consumerGroup": group, "topic": topic, "queueId": str(q)},
                )
                out[q] = int((r.ext_fields or {}).get("offset", -1)) if r.code == 0 else -1
            return out
        finally:
            await wire.close()

    return asyncio.run(go())


def test_kill9_mid_consumption_loses_nothing(tmp_path: Path) -> None:
    drivers.cpp_available()
    drivers.node_available()
    with servers(tmp_path, topics={"Crash": 4}) as s:
        ns = s.namesrv.addr
        sent = drivers.run_cpp_produce(ns, "Crash", 2000, tags="T", keys_prefix="k")
        assert len(sent) == 2000
        with drivers.start_consumer("js", ns, "Crash", expect=2200, timeout=60) as consumer:
            consumer.wait_messages(200, timeout=60)
            s.broker.kill9()
            s.restart_broker()
            more = drivers.run_cpp_produce(ns, "Crash", 200, tags="T", keys_prefix="after")
            assert len(more) == 200
            result = consumer.wait(100)
        assert result.ok, result.describe() + s.diagnostics()
        bodies = Counter(m["body"] for m in result.messages)
        assert len(bodies) == 2000  # msg-0..msg-1999 (the 200 later ones reuse msg-0..msg-199)
        keys = {m["keys"] for m in result.messages}
        assert {f"k{i}" for i in range(2000)} <= keys and {f"after{i}" for i in range(200)} <= keys


def test_acknowledged_sends_survive_kill9(tmp_path: Path) -> None:
    drivers.node_available()
    with servers(tmp_path, topics={"Acked": 2}) as s:
        ns = s.namesrv.addr
        sent = drivers.run_js_produce(ns, "Acked", 500, tags="T", keys_prefix="k")
        assert len(sent) == 500
        s.broker.kill9()  # no flush, no persist, no unregister
        s.restart_broker()
        with drivers.start_consumer("js", ns, "Acked", expect=500, timeout=60) as consumer:
            result = consumer.wait(90)
        assert result.ok, result.describe() + s.diagnostics()
        assert {m["msg_id"] for m in result.messages} == {e["msg_id"] for e in sent}


def test_committed_offsets_survive_kill9(tmp_path: Path) -> None:
    drivers.node_available()
    group = drivers.unique_group("Resume")
    with servers(tmp_path, broker_keys={"flushConsumerOffsetInterval": "200"}, topics={"Resume": 2}) as s:
        ns = s.namesrv.addr
        drivers.run_js_produce(ns, "Resume", 100, keys_prefix="old")
        # ali-ons commits offsets every 5 s and on close; linger so both happen.
        with drivers.start_consumer("js", ns, "Resume", expect=100, timeout=60, group=group, linger=1.0) as c:
            assert c.wait(90).ok
        deadline = time.monotonic() + 30
        while committed(s.broker.addr, group, "Resume", 2) != {0: 50, 1: 50}:
            assert time.monotonic() < deadline, committed(s.broker.addr, group, "Resume", 2)
            time.sleep(0.2)
        time.sleep(0.6)  # > flushConsumerOffsetInterval: the offsets reach consumerOffset.json
        s.broker.kill9()
        s.restart_broker()
        assert committed(s.broker.addr, group, "Resume", 2) == {0: 50, 1: 50}
        drivers.run_js_produce(ns, "Resume", 10, keys_prefix="new")
        with drivers.start_consumer("js", ns, "Resume", expect=10, timeout=60, group=group, linger=2.0) as c:
            result = c.wait(90)
        assert result.ok, result.describe()
        assert sorted(m["keys"] for m in result.messages) == sorted(f"new{i}" for i in range(10))
