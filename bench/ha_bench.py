"""HA benchmark (issue 16): prints one JSON object per figure.

* ``throughput``: real ``mqnamesrv`` + master + slave ``mqbroker`` processes (loopback, temp
  stores, ASYNC_FLUSH), 1 KB bodies through ``pocketmq.client.benchmark produce``: single sends
  with 128 in flight, then 32-message batches with 4 in flight; the same pair as ASYNC_MASTER and
  as SYNC_MASTER in the same run. Each line carries msgs/s (``tps``) and the CPU µs per message of the
  client, the master and the slave (``master_cpu_us_per_msg``, ``slave_cpu_us_per_msg``), and
  ``sync_vs_async`` (SYNC_MASTER msgs/s / ASYNC_MASTER msgs/s).
* ``lag``: a master store in this process and a slave store in a child process (as in a
  deployment, where the slave is another host; both on the brokers' loop, uvloop when
  installed), linked over loopback; puts paced at ``--rate`` (20k msg/s) for ``--secs``; the
  replication lag of a put is the time from its append to the slave's acknowledgement covering
  it (p50/p99/max, ms, after a one-second warm-up that creates the IndexFiles and ConsumeQueue
  files), with the rate achieved and the CPU µs per message of each process.
* ``catch_up``: a master store filled with ``--catch-up-mib`` MiB (1 GiB) of 1 KB messages, then a
  fresh slave store in a child process copies it: MB/s of CommitLog replicated, from the
  slave's start to its acknowledgement of the master's last byte (the slave's reput dispatches
  meanwhile, as in a broker), and the CPU seconds of each process.

Usage: ``python bench/ha_bench.py [--secs 10] [--rate 20000] [--catch-up-mib 1024] [--only lag]``.
Numbers on a shared 2-core VM are noisy: the load average is printed with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterator
from typing import Any

from pocketmq.remoting.common.runtime import new_event_loop
from pocketmq.remoting.protocol.message import properties_to_string
from pocketmq.store import MessageInner, MessageStore, MessageStoreConfig, PutMessageStatus

BIN = os.path.dirname(sys.executable)
HOST = (b"\x7f\x00\x00\x01", 10911)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _free_broker_port(taken: set[int]) -> int:
    from pocketmq.deploy.cluster import free_broker_port

    return free_broker_port(taken)


def _wait_port(port: int, timeout: float = 30.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


@contextlib.contextmanager
def _pair(role: str) -> Iterator[tuple[str, int, int]]:
    """Name server + master (``role``) + slave processes: (namesrv addr, master pid, slave pid)."""
    tmp = tempfile.mkdtemp(prefix="pocketmq-ha-bench-")
    log = open(os.path.join(tmp, "servers.log"), "wb")  # noqa: SIM115
    ns_port = _free_broker_port(set())
    ns = subprocess.Popen(
        [
            f"{BIN}/mqnamesrv",
            "--set",
            f"listenPort={ns_port}",
            "--set",
            f"kvConfigPath={tmp}/kv.json",
            "--set",
            f"configStorePath={tmp}/namesrv.properties",
            "--log-level",
            "WARNING",
        ],
        stdout=log,
        stderr=log,
    )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        _wait_port(ns_port)
        taken = {ns_port}
        for name, keys in (("master", [f"brokerRole={role}"]), ("slave", ["brokerRole=SLAVE", "brokerId=1"])):
            port = _free_broker_port(taken)
            taken |= {port - 2, port, port + 1}
            args = [f"{BIN}/mqbroker", "-n", f"127.0.0.1:{ns_port}", "--log-level", "WARNING"]
            for kv in ("brokerName=broker-a", f"listenPort={port}", "brokerIP1=127.0.0.1",
                       f"storePathRootDir={tmp}/{name}", "defaultTopicQueueNums=8", "fastListenEnable=false", "haListenPort=0", *keys):  # fmt: skip
                args += ["--set", kv]
            procs.append(subprocess.Popen(args, stdout=log, stderr=log))
            _wait_port(port)
        time.sleep(2.0)  # registrations; the slave learns the master's HA address and connects
        yield f"127.0.0.1:{ns_port}", procs[0].pid, procs[1].pid
    finally:
        for p in [*procs, ns]:
            p.terminate()
        for p in [*procs, ns]:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _produce(namesrv: str, pids: tuple[int, int], secs: int, inflight: int, batch: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pocketmq.client.benchmark", "produce", "-n", namesrv,
           "--broker-pid", str(pids[0]), "--broker-pid", str(pids[1]), "-d", str(secs), "-t", "HaBench",
           "-w", str(inflight), "-s", "1024"]  # fmt: skip
    if batch > 1:
        cmd += ["-b", str(batch)]
    out = subprocess.run(cmd, capture_output=True, timeout=600, check=False)
    lines = [ln for ln in out.stdout.decode().splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"benchmark failed: {out.stderr.decode()[-1500:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    result["master_cpu_us_per_msg"] = result.pop(f"broker_{pids[0]}_cpu_us_per_msg", None)
    result["slave_cpu_us_per_msg"] = result.pop(f"broker_{pids[1]}_cpu_us_per_msg", None)
    return result


def throughput(secs: int) -> None:
    figures: dict[tuple[str, str], dict[str, Any]] = {}
    for role in ("ASYNC_MASTER", "SYNC_MASTER"):
        with _pair(role) as (namesrv, mpid, spid):
            for form, inflight, batch in (("single_128_in_flight", 128, 1), ("batch32_4_in_flight", 4, 32)):
                r = _produce(namesrv, (mpid, spid), secs, inflight, batch)
                r.update({"figure": "throughput", "role": role, "form": form, "load": _load()})
                figures[(role, form)] = r
                if role == "SYNC_MASTER":
                    base = figures.get(("ASYNC_MASTER", form), {}).get("tps")
                    if base:
                        r["sync_vs_async"] = round(r.get("tps", 0) / base, 3)
                print(json.dumps(r), flush=True)


def _messages(n: int, body: bytes, queues: int = 8) -> list[MessageInner]:
    props = properties_to_string({"TAGS": "TagA", "WAIT": "true"})
    return [MessageInner("HaLag", body, i % queues, 0, props, 0, 1, HOST, HOST) for i in range(n)]


def _slave_main(root: str, master: str, seg: int) -> None:
    """The ``--slave-of`` mode: a slave store in its own process (uvloop, as a broker) until SIGTERM."""
    from pocketmq.remoting.common.runtime import run_until_stopped

    async def main(stop: asyncio.Event) -> None:
        slave = MessageStore(
            MessageStoreConfig(
                store_path_root_dir=root, broker_role="SLAVE", mapped_file_size_commit_log=seg,
                ha_master_address=master,
            )
        )  # fmt: skip
        slave.load()
        await slave.start()
        await slave.start_ha()
        gc.collect()
        gc.freeze()  # as a broker process once up (runtime.boot_done)
        await stop.wait()
        await slave.shutdown()

    run_until_stopped(main)


@contextlib.contextmanager
def _slave_process(root: str, master_port: int, seg: int) -> Iterator[int]:
    """A slave store in a child process following 127.0.0.1:``master_port``: its pid. A slave
    is another process (another host) in every deployment: one loop running both sides would
    add the slave's apply and reput to the master's latency."""
    argv = [sys.executable, os.path.abspath(__file__), "--slave-of", f"127.0.0.1:{master_port}",
            "--slave-root", root, "--slave-segment", str(seg)]  # fmt: skip
    proc = subprocess.Popen(argv)
    try:
        yield proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _master(root: str, seg: int) -> MessageStore:
    master = MessageStore(MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=seg))
    master.load()
    await master.start()
    return master


async def _until_slave(master: MessageStore) -> None:
    assert master.ha_master is not None
    while master.ha_master.slave_count() == 0:  # noqa: ASYNC110
        await asyncio.sleep(0.01)


#: puts between two yields to the loop when the pacing falls behind: a broker reads at most a
#: few dozen 1 KB requests per socket read, and runs its other callbacks (the HA transfer) in
#: between; one burst of thousands of puts would be a pause of this harness, not of replication
BURST = 64
#: the CommitLog segment of the lag figure (RocketMQ's 1 GiB default)
LAG_SEGMENT = 1 << 30


async def _lag(secs: int, rate: int) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="pocketmq-ha-lag-")
    try:
        master = await _master(f"{root}/m", LAG_SEGMENT)
        await master.start_ha(host="127.0.0.1", port=0)
        assert master.ha_master is not None
        with _slave_process(f"{root}/s", master.ha_master.port, LAG_SEGMENT) as spid:
            await _until_slave(master)
            figure = await _paced(master, secs, rate, spid)
        await master.shutdown()
        return figure
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _paced(master: MessageStore, secs: int, rate: int, spid: int) -> dict[str, Any]:
    assert master.ha_master is not None
    gt = master.ha_master.group_transfer
    msgs = _messages(rate * secs, os.urandom(1024))
    # prebuilt messages out of the collector (as store_bench): a full collection over them
    # would be a pause of this harness, not of replication
    gc.collect()
    gc.freeze()
    lags: list[float] = []

    # the first second warms up (IndexFile and ConsumeQueue files are created on both sides)
    warm = rate

    def acked(t0: float, status: PutMessageStatus) -> None:
        if status is PutMessageStatus.PUT_OK and t0 >= 0:
            lags.append(time.perf_counter() - t0)

    t_start = time.perf_counter()
    tick = 0.001
    sent = 0
    c0, s0 = time.process_time(), _cpu_s(spid)
    while sent < len(msgs):
        due = min(len(msgs), int((time.perf_counter() - t_start) * rate) + 1)
        while sent < due:
            r = master.put_message(msgs[sent])
            assert r.append is not None
            end = r.append.wrote_offset + r.append.wrote_bytes
            t0 = time.perf_counter() if sent >= warm else -1.0
            now = gt.add(end, acked, t0)
            if now is PutMessageStatus.PUT_OK and sent >= warm:
                lags.append(0.0)
            sent += 1
            if sent % BURST == 0:
                await asyncio.sleep(0)
        await asyncio.sleep(tick)
    elapsed = time.perf_counter() - t_start
    while gt.waiting:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    cpu, slave_cpu = time.process_time() - c0, _cpu_s(spid) - s0
    lags.sort()
    n = len(lags)
    return {
        "figure": "lag", "target_msgs_per_s": rate, "msgs_per_s": round(sent / elapsed),
        "acked": n, "p50_ms": round(lags[n // 2] * 1e3, 3), "p99_ms": round(lags[int(n * 0.99)] * 1e3, 3),
        "max_ms": round(lags[-1] * 1e3, 3),
        "master_process_cpu_us_per_msg": round(cpu / sent * 1e6, 2),
        "slave_process_cpu_us_per_msg": round(slave_cpu / sent * 1e6, 2), "load": _load(),
    }  # fmt: skip


async def _catch_up(mib: int) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="pocketmq-ha-catchup-")
    try:
        seg = 1 << 30
        master = await _master(f"{root}/m", seg)
        body = os.urandom(1024)
        batch = _messages(32, body, queues=1)  # a batch shares its queue
        target = mib << 20
        while master.get_max_phy_offset() < min(target, seg - (1 << 20)):
            if not master.put_messages(batch).status.is_ok:
                raise RuntimeError("the fill put failed")
            if master.dispatch_behind_bytes > (64 << 20):
                await asyncio.sleep(0)
        while master.dispatch_behind_bytes:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        await master.start_ha(host="127.0.0.1", port=0)
        assert master.ha_master is not None
        gt = master.ha_master.group_transfer
        end = master.get_max_phy_offset()
        c0 = time.process_time()
        t0 = time.monotonic()
        with _slave_process(f"{root}/s", master.ha_master.port, seg) as spid:
            # from the slave's start (process, store load, connect) to its acknowledgement of
            # the master's last byte
            while gt.acked < end:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
            elapsed = time.monotonic() - t0
            cpu, slave_cpu = time.process_time() - c0, _cpu_s(spid)
        await master.shutdown()
        return {
            "figure": "catch_up", "bytes": end, "secs": round(elapsed, 3), "mb_per_s": round(end / elapsed / 1e6, 1),
            "master_process_cpu_s": round(cpu, 3), "slave_process_cpu_s": round(slave_cpu, 3), "load": _load(),
        }  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """On the brokers' loop (uvloop when installed)."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--secs", type=int, default=10)
    p.add_argument("--rate", type=int, default=20_000)
    p.add_argument("--catch-up-mib", type=int, default=1024)
    p.add_argument("--only", default="throughput,lag,catch_up")
    p.add_argument("--slave-of", help=argparse.SUPPRESS)
    p.add_argument("--slave-root", help=argparse.SUPPRESS)
    p.add_argument("--slave-segment", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.slave_of:
        _slave_main(a.slave_root, a.slave_of, a.slave_segment)
        return
    only = set(a.only.split(","))
    if "lag" in only:
        print(json.dumps(_run(_lag(a.secs, a.rate))), flush=True)
    if "catch_up" in only:
        print(json.dumps(_run(_catch_up(a.catch_up_mib))), flush=True)
    if "throughput" in only:
        throughput(a.secs)


if __name__ == "__main__":
    main()
