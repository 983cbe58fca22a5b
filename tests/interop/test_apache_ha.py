"""Cross-implementation replication with Apache RocketMQ 4.9.7 (the oracle), both ways (issue 16):

* a pocketmq slave follows an Apache SYNC_MASTER (both registered with Apache's name server);
* an Apache slave follows a pocketmq SYNC_MASTER (both registered with pocketmq's name server).

Each: 1,000 messages acknowledged by the master (SEND_OK from a SYNC_MASTER means the other
implementation's slave acknowledged them over RocketMQ's HA protocol), the slave's CommitLog
byte-identical to the master's up to the master's max offset, and, after ``kill -9`` of the
master, a consumer reads all of them from the slave.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer, SendStatus
from pocketmq.deploy.cluster import free_broker_port
from tests.fault.ha_procs import (
    broker,
    caught_up,
    commitlog,
    managed,
    namesrv_process,
    precreate,
    route,
    runtime,
)
from tests.interop.apache_servers import ApacheServers, apache_available, apache_servers
from tests.waiting import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.fault]

TOPIC = "HaApache"
QUEUES = 4
N = 1000


async def _produce(namesrv: str) -> set[bytes]:
    acked: set[bytes] = set()
    async with Producer("HaApachePG", namesrv=namesrv, send_msg_timeout=10_000) as producer:
        for lo in range(0, N, 100):
            msgs = [Message(TOPIC, b"%06d" % i + b"x" * 1000, keys=f"k{i}") for i in range(lo, lo + 100)]
            results = await asyncio.gather(*(producer.send(m) for m in msgs))
            for m, r in zip(msgs, results, strict=True):
                assert r.send_status is SendStatus.SEND_OK, r
                acked.add(m.body)
    return acked


async def _consume(namesrv: str, expect: set[bytes]) -> set[bytes]:
    got: set[bytes] = set()

    async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        got.update(m.body for m in msgs)
        return CONSUME_SUCCESS

    consumer = PushConsumer(
        "HaApacheCG",
        namesrv=namesrv,
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC, "*")
    async with consumer:
        await wait_until(lambda: expect <= got, timeout=120)
    return got


async def _master_gone(namesrv: str) -> None:
    async def gone() -> bool:
        rd = await route(namesrv, TOPIC)
        return (
            rd is not None and bool(rd.broker_datas) and all(0 not in b.broker_addrs for b in rd.broker_datas)
        )

    await wait_until(gone, timeout=60)


def test_pocketmq_slave_follows_an_apache_master(tmp_path: Path) -> None:
    apache_available()
    with apache_servers(tmp_path / "apache", broker_keys={"brokerRole": "SYNC_MASTER"}) as a:
        a.create_topics([TOPIC], QUEUES)
        port = free_broker_port(set())
        slave = broker(
            tmp_path, "slave", port, a.namesrv_addr, {TOPIC: QUEUES}, brokerRole="SLAVE", brokerId="1"
        )
        try:
            slave.start()

            async def scenario() -> None:
                async def following() -> bool:
                    info = await runtime(slave.addr)
                    return info.get("haConnected") == "true" and int(info.get("haReportedOffset", -1)) >= 0

                await wait_until(following, timeout=60)
                acked = await _produce(a.namesrv_addr)
                end = await caught_up(a.broker_addr, slave.addr)
                assert commitlog(tmp_path / "slave", 0, end) == commitlog(a.store_dir, 0, end)
                a.broker.kill9()
                await _master_gone(a.namesrv_addr)
                assert acked <= await _consume(a.namesrv_addr, acked)

            asyncio.run(scenario())
        except BaseException:
            print(a.diagnostics(), f"--- pocketmq slave:\n{slave.log_tail(40)}")
            raise
        finally:
            slave.stop()


def test_apache_slave_follows_a_pocketmq_master(tmp_path: Path) -> None:
    apache_available()
    namesrv = namesrv_process(tmp_path)
    mport = free_broker_port(set())
    master = broker(tmp_path, "master", mport, namesrv.addr, {TOPIC: QUEUES}, brokerRole="SYNC_MASTER")
    keys = {"brokerId": "1", "brokerRole": "SLAVE", "namesrvAddr": namesrv.addr}
    apache = ApacheServers(tmp_path / "apache", broker_keys=keys)
    precreate(apache.store_dir, {TOPIC: QUEUES})
    with managed([namesrv, master, apache.broker], stop_timeout=60):
        namesrv.start()
        master.start()
        apache.broker.start()

        async def scenario() -> None:
            # Apache's slave sends its first report one haSendHeartbeatInterval (5 s) after connecting
            async def slave_reported() -> bool:
                return (await runtime(master.addr)).get("haSlaveCount") == "1"

            await wait_until(slave_reported, timeout=60)
            acked = await _produce(namesrv.addr)
            end = await caught_up(master.addr, apache.broker_addr)
            assert commitlog(apache.store_dir, 0, end) == commitlog(tmp_path / "master", 0, end)
            master.kill9()
            await _master_gone(namesrv.addr)
            assert acked <= await _consume(namesrv.addr, acked)

        asyncio.run(scenario())
