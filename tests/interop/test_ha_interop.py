"""Replication with clients and servers of other implementations (issue 16).

Consumers of the real C++ client (librocketmq, ``rocketmq`` wheel) and ali-ons read from a
pocketmq slave after ``kill -9`` of its SYNC_MASTER: a group that consumed the first messages
while the master was up resumes, on the slave, from the offsets the slave copied from its
master, and gets every message the master acknowledged after them. (Neither client can start
a group that has no committed offset on a slave whose master is gone: both ask the master for
the queue's max offset then, as the Java client does; that is the clients', not the broker's.)
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.fault.ha_procs import ha_processes, managed, route, runtime
from tests.interop import drivers
from tests.interop.test_broker_interop_kill9 import committed

pytestmark = [pytest.mark.interop, pytest.mark.fault]

TOPIC = "HaInterop"
QUEUES = 4
#: SEND_OK as the drivers print it (the C++ wheel names it OK)
SEND_OK = {"SEND_OK", "OK"}


def _until(what: str, cond, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.parametrize("client", ["cpp", "js"])
def test_consume_from_the_slave_after_kill9_of_the_master(client: drivers.Client, tmp_path: Path) -> None:
    drivers.available(client)
    namesrv, master, slave = ha_processes(tmp_path, {TOPIC: QUEUES})
    with managed([namesrv, master, slave]) as procs:
        for p in procs:
            p.start()
        ns = namesrv.addr
        _until("the slave", lambda: asyncio.run(runtime(master.addr)).get("haSlaveCount") == "1", 60)
        group = drivers.unique_group("HaCG")
        first = drivers.produce(client, ns, TOPIC, 200, keys_prefix="a", group="HaPG1").sent
        assert len(first) == 200 and {e["status"] for e in first} <= SEND_OK
        # the group consumes the first 200 while the master is up and commits its offsets there
        with drivers.start_consumer(client, ns, TOPIC, expect=200, timeout=90, group=group, linger=6.0) as c:
            assert c.wait(120).ok
        second = drivers.produce(client, ns, TOPIC, 300, keys_prefix="b", group="HaPG2").sent
        assert len(second) == 300 and {e["status"] for e in second} <= SEND_OK
        _until(
            "the master's committed offsets",
            lambda: sum(committed(master.addr, group, TOPIC, QUEUES).values()) == 200,
            60,
        )
        # the slave copies its master's consumer offsets every 10 s
        _until(
            "the slave's copy of the offsets",
            lambda: (
                committed(slave.addr, group, TOPIC, QUEUES) == committed(master.addr, group, TOPIC, QUEUES)
            ),
            60,
        )

        master.kill9()

        def master_gone() -> bool:
            rd = asyncio.run(route(ns, TOPIC))
            return rd is not None and all(0 not in b.broker_addrs for b in rd.broker_datas)

        _until("the route without the master", master_gone, 60)
        with drivers.start_consumer(client, ns, TOPIC, expect=300, timeout=150, group=group, linger=6.0) as c:
            result = c.wait(180)
        assert result.ok, result.describe()
        keys = {m["keys"] for m in result.messages}
        assert {f"b{i}" for i in range(300)} <= keys
        assert not any(k.startswith("a") for k in keys)  # resumed at the committed offsets
        # the consumer committed its progress to the slave (the master being gone)
        _until(
            "offsets committed to the slave",
            lambda: sum(committed(slave.addr, group, TOPIC, QUEUES).values()) == 500,
            60,
        )
