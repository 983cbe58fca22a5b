"""Master/slave replication between real mqnamesrv + two mqbroker processes on loopback (issue 16).

A SYNC_MASTER takes ``HA_PROCESS_MESSAGES`` (default 10,000; the acceptance run uses 100,000)
1 KB messages; the slave's CommitLog is byte-identical to the master's over the replicated
range and its ConsumeQueues have the same ends. After ``kill -9`` of the master, the SDK's push
consumer reads every acknowledged message from the slave. The master restarts on its store; the
slave resumes without a gap or duplicate bytes and new sends are acknowledged again.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from pathlib import Path

import pytest

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer, SendStatus
from tests.fault.ha_procs import caught_up, commitlog, ha_processes, managed, precreate, route, runtime
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.fault]

N = int(os.environ.get("HA_PROCESS_MESSAGES", "10000"))
TOPIC = "HaProc"
QUEUES = 4


async def _send(producer: Producer, start: int, count: int) -> list[tuple[str, bytes]]:
    acked: list[tuple[str, bytes]] = []
    body_pad = b"x" * 1000
    for lo in range(start, start + count, 128):
        msgs = [
            Message(TOPIC, b"%08d" % i + body_pad, keys=f"k{i}")
            for i in range(lo, min(lo + 128, start + count))
        ]
        results = await asyncio.gather(*(producer.send(m) for m in msgs), return_exceptions=True)
        for m, r in zip(msgs, results, strict=True):
            if not isinstance(r, BaseException) and r.send_status is SendStatus.SEND_OK:
                acked.append((r.msg_id, m.body))
    return acked


async def test_sync_master_slave_processes_kill9_failover_and_resume(tmp_path: Path) -> None:
    namesrv, master, slave = ha_processes(tmp_path, {TOPIC: QUEUES})
    with managed([namesrv, master, slave]):
        namesrv.start()
        master.start()
        slave.start()

        async def both_listed() -> bool:
            rd = await route(namesrv.addr, TOPIC)
            return rd is not None and any(len(b.broker_addrs) == 2 for b in rd.broker_datas)

        await wait_until(both_listed, timeout=30)

        async def slave_connected() -> bool:
            return (await runtime(master.addr)).get("haSlaveCount") == "1"

        await wait_until(slave_connected, timeout=30)
        async with Producer("HaProcPG", namesrv=namesrv.addr, send_msg_timeout=10_000) as producer:
            acked = await _send(producer, 0, N)
        assert len(acked) == N, f"{N - len(acked)} sends not SEND_OK"
        info = await runtime(master.addr)
        end = int(info["commitLogMaxOffset"])
        assert int(info["haSlaveAckOffset"]) == end
        sinfo = await runtime(slave.addr)
        assert int(sinfo["commitLogMaxOffset"]) == end
        assert commitlog(tmp_path / "slave", 0, end) == commitlog(tmp_path / "master", 0, end)

        # kill -9 the master: every acknowledged message is consumed from the slave
        master.kill9()

        async def master_gone() -> bool:
            rd = await route(namesrv.addr, TOPIC)
            return rd is not None and all(0 not in b.broker_addrs for b in rd.broker_datas)

        await wait_until(master_gone, timeout=30)
        got: dict[bytes, bytes] = {}  # the index prefix -> body

        async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
            for m in msgs:
                got[m.body[:8]] = m.body
            return CONSUME_SUCCESS

        consumer = PushConsumer(
            "HaProcCG", namesrv=namesrv.addr, listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        consumer.subscribe(TOPIC, "*")
        async with consumer:
            await wait_until(lambda: len(got) >= N, timeout=120)
        assert {body[:8]: body for _, body in acked} == {body[:8]: got.get(body[:8]) for _, body in acked}

        # the master restarts on its store; the slave resumes: no gap, no duplicate bytes
        master.start()

        async def resumed() -> bool:
            return (await runtime(master.addr)).get("haSlaveCount") == "1"

        await wait_until(resumed, timeout=60)
        async with Producer("HaProcPG2", namesrv=namesrv.addr, send_msg_timeout=10_000) as producer:
            more = await _send(producer, N, 500)
        assert len(more) == 500
        end2 = await caught_up(master.addr, slave.addr)
        assert commitlog(tmp_path / "slave", 0, end2) == commitlog(tmp_path / "master", 0, end2)
        # the ConsumeQueues end where the master's do
        for q in range(QUEUES):
            mq = tmp_path / "master" / "consumequeue" / TOPIC / str(q)
            sq = tmp_path / "slave" / "consumequeue" / TOPIC / str(q)
            assert sorted(p.name for p in mq.iterdir()) == sorted(p.name for p in sq.iterdir())


CYCLES = int(os.environ.get("HA_SIGSTOP_CYCLES", "3"))


async def test_sync_master_while_the_slave_process_is_sigstopped(tmp_path: Path) -> None:
    """T6 with real processes: the slave SIGSTOPped for 5 s, ``HA_SIGSTOP_CYCLES`` times (the
    acceptance run uses 10). Every send gets SEND_OK, or FLUSH_SLAVE_TIMEOUT within slaveTimeout
    (3 s) + 10 % (the link stays up while the slave is stopped, so never 11 here); after SIGCONT
    the slave holds every byte of the master's log."""

    namesrv, master, slave = ha_processes(tmp_path, {TOPIC: QUEUES})
    procs = [namesrv, master, slave]
    try:
        for p in procs:
            p.start()

        async def slave_connected() -> bool:
            return (await runtime(master.addr)).get("haSlaveCount") == "1"

        await wait_until(slave_connected, timeout=30)
        outcomes: list[tuple[SendStatus, float]] = []
        stop = asyncio.Event()
        async with Producer("HaStopPG", namesrv=namesrv.addr, send_msg_timeout=15_000) as producer:
            loop = asyncio.get_running_loop()

            async def one(i: int) -> None:
                t0 = loop.time()
                r = await producer.send(Message(TOPIC, b"%08d" % i))
                outcomes.append((r.send_status, loop.time() - t0))

            async def load() -> None:
                tasks = []
                i = 0
                while not stop.is_set():
                    tasks.append(loop.create_task(one(i)))
                    i += 1
                    await asyncio.sleep(0.02)
                await asyncio.gather(*tasks)

            runner = loop.create_task(load())
            assert slave.proc is not None
            for _ in range(CYCLES):
                await asyncio.sleep(1.0)
                os.kill(slave.proc.pid, signal.SIGSTOP)
                await asyncio.sleep(5.0)
                os.kill(slave.proc.pid, signal.SIGCONT)
            await asyncio.sleep(1.0)
            stop.set()
            await runner
        statuses = {s for s, _ in outcomes}
        assert SendStatus.SEND_OK in statuses and SendStatus.FLUSH_SLAVE_TIMEOUT in statuses
        assert statuses <= {SendStatus.SEND_OK, SendStatus.FLUSH_SLAVE_TIMEOUT}
        late = [w for s, w in outcomes if s is SendStatus.FLUSH_SLAVE_TIMEOUT and not 2.9 <= w <= 3.3]
        assert not late, f"FLUSH_SLAVE_TIMEOUT outside slaveTimeout + 10 %: {late[:5]}"
        end = await caught_up(master.addr, slave.addr)
        assert commitlog(tmp_path / "slave", 0, end) == commitlog(tmp_path / "master", 0, end)
    except BaseException:
        for p in procs:
            print(f"--- {p.log.name}:\n{p.log_tail(40)}")
        raise
    finally:
        if slave.proc is not None and slave.proc.poll() is None:
            os.kill(slave.proc.pid, signal.SIGCONT)
        for p in reversed(procs):
            p.stop()


def _zero(path: Path, start: int, end: int) -> None:
    """What a power loss leaves of pages never written back: zeros."""
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(b"\0" * (end - start))


async def test_divergence_master_restarted_shorter_then_slave_rebuilt(tmp_path: Path) -> None:
    """T8 with processes. The SYNC_MASTER loses the tail its slave holds (killed, its last 300
    records zeroed on disk, as a power loss of unflushed pages) and restarts shorter than the
    slave. The slave refuses to mix the logs, says why in one warning line, and does not follow
    that master again, even once the master has grown past the slave's end (its report would
    then acknowledge the master's different bytes): every send gets SLAVE_NOT_AVAILABLE (11),
    nothing from the gap is acknowledged, the slave's log is untouched. The operator rebuilds
    the slave from an empty store (disk lost): it copies the master's log and sends are
    acknowledged again."""
    namesrv, master, slave = ha_processes(tmp_path, {TOPIC: QUEUES})
    with managed([namesrv, master, slave]) as procs:
        for p in procs:
            p.start()

        async def slave_count(n: str) -> bool:
            return (await runtime(master.addr)).get("haSlaveCount") == n

        await wait_until(lambda: slave_count("1"), timeout=30)
        async with Producer("HaT8PG", namesrv=namesrv.addr, send_msg_timeout=10_000) as producer:
            assert len(await _send(producer, 0, 300)) == 300
            kept = int((await runtime(master.addr))["commitLogMaxOffset"])
            assert len(await _send(producer, 300, 300)) == 300
        end = int((await runtime(master.addr))["commitLogMaxOffset"])
        assert int((await runtime(slave.addr))["commitLogMaxOffset"]) == end
        slave_log = commitlog(tmp_path / "slave", 0, end)

        master.kill9()
        _zero(tmp_path / "master" / "commitlog" / f"{0:020d}", kept, end)
        master.start()
        assert int((await runtime(master.addr))["commitLogMaxOffset"]) == kept

        def refused() -> bool:
            return "refusing to mix" in slave.log.read_text(errors="replace")

        await wait_until(refused, timeout=30)
        async with Producer("HaT8PG2", namesrv=namesrv.addr, send_msg_timeout=10_000) as producer:
            statuses: list[SendStatus] = []
            for i in range(4):  # the master grows past the slave's end meanwhile
                rs = await asyncio.gather(*(producer.send(Message(TOPIC, b"x" * 1000)) for _ in range(100)))
                statuses += [r.send_status for r in rs]
                if i == 1:
                    await asyncio.sleep(11.0)  # two reconnect periods: the slave must not come back
        assert set(statuses) == {SendStatus.SLAVE_NOT_AVAILABLE}
        assert int((await runtime(master.addr))["commitLogMaxOffset"]) > end
        info = await runtime(master.addr)
        assert info["haSlaveCount"] == "0" and info["haSlaveAckOffset"] == "-1"
        assert int((await runtime(slave.addr))["commitLogMaxOffset"]) == end
        assert commitlog(tmp_path / "slave", 0, end) == slave_log
        log_lines = slave.log.read_text(errors="replace").splitlines()
        warnings = [ln for ln in log_lines if " WARNING " in ln and "refusing to mix" in ln]
        assert len(warnings) == 1 and "shorter than this slave's" in warnings[0], warnings

        # the operator rebuilds the slave on an empty store
        slave.stop()
        shutil.rmtree(tmp_path / "slave")
        precreate(tmp_path / "slave", {TOPIC: QUEUES})
        slave.start()
        await wait_until(lambda: slave_count("1"), timeout=30)
        async with Producer("HaT8PG3", namesrv=namesrv.addr, send_msg_timeout=10_000) as producer:
            assert len(await _send(producer, 600, 100)) == 100
        end2 = await caught_up(master.addr, slave.addr)
        assert commitlog(tmp_path / "slave", 0, end2) == commitlog(tmp_path / "master", 0, end2)
