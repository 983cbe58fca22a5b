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
from collections.abc import Callable
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


def _until(what: str, cond, timeout: float, detail=None) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f"\n{detail()}" if detail else ""))
        time.sleep(0.2)


def _offsets_detail(master: str | None, slave: str, group: str, log_dir: Path) -> Callable[[], str]:
    """What a timed-out wait for committed offsets shows: the brokers' offsets and the client's
    own log lines about its commits (librocketmq logs under the driver's ``$HOME/logs``)."""

    def detail() -> str:
        lines = [f"slave's committed offsets: {committed(slave, group, TOPIC, QUEUES)}"]
        if master is not None:
            lines.insert(0, f"master's committed offsets: {committed(master, group, TOPIC, QUEUES)}")
        for log in sorted((log_dir / "logs").rglob("*.log*")):
            picked = [
                line
                for line in log.read_text(errors="replace").splitlines()
                if "ffset" in line or "oneway" in line or "(error)" in line
            ]
            lines.append(f"--- {log.name} ({len(picked)} lines on offsets or errors, the last 40):")
            lines.extend(picked[-40:])
        return "\n".join(lines)

    return detail


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
        # The group consumes the first 200 while the master is up and commits its offsets there.
        # Waited for while the client still runs: both clients commit every 5 s then, and once
        # more as they shut down (a one-way request each: the test does not hang on that one).
        with drivers.start_consumer(client, ns, TOPIC, expect=200, timeout=90, group=group, linger=90.0) as c:
            c.wait_messages(200, 120)
            _until(
                "the master's committed offsets",
                lambda: sum(committed(master.addr, group, TOPIC, QUEUES).values()) == 200,
                60,
                _offsets_detail(master.addr, slave.addr, group, c.log_dir),
            )
            stopped = c.stop()
        assert stopped.ok, stopped.describe()
        second = drivers.produce(client, ns, TOPIC, 300, keys_prefix="b", group="HaPG2").sent
        assert len(second) == 300 and {e["status"] for e in second} <= SEND_OK
        assert sum(committed(master.addr, group, TOPIC, QUEUES).values()) == 200
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
        with drivers.start_consumer(
            client, ns, TOPIC, expect=300, timeout=150, group=group, linger=90.0
        ) as c:
            c.wait_messages(300, 180)
            # the consumer commits its progress to the slave (the master being gone)
            _until(
                "offsets committed to the slave",
                lambda: sum(committed(slave.addr, group, TOPIC, QUEUES).values()) == 500,
                60,
                _offsets_detail(None, slave.addr, group, c.log_dir),
            )
            result = c.stop()
        assert result.ok, result.describe()
        keys = {m["keys"] for m in result.messages}
        assert {f"b{i}" for i in range(300)} <= keys
        assert not any(k.startswith("a") for k in keys)  # resumed at the committed offsets
