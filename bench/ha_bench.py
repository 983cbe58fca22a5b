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
  files), with the rate achieved and the CPU µs per message of each process. The master store
  is a SYNC_MASTER; both timestamps are taken on the master (after the put's append, and when
  its loop reads the slave's report), so the figure is what a SYNC_MASTER send waits for.
  ``spikes_over_5ms`` groups the puts acknowledged later than 5 ms into episodes (start in s
  after the warm-up, puts, max ms). With ``--loop-lag-warn-ms N`` both processes also record
  every loop turn later than N ms (1 ms ticks): ``off_cpu`` (the loop thread ran less than half
  of it: the OS ran something else), ``on_cpu`` grouped by the sampled frame, and the garbage
  collections of each generation (count, total ms, max ms).
* ``catch_up``: a master store filled with ``--catch-up-mib`` MiB (1 GiB) of 1 KB messages, then a
  fresh slave store in a child process copies it: MB/s of CommitLog replicated, from the
  slave's start to its acknowledgement of the master's last byte (the slave's reput dispatches
  meanwhile, as in a broker), and the CPU seconds of each process.

Usage: ``python bench/ha_bench.py [--secs 10] [--rate 20000] [--catch-up-mib 1024] [--only lag] [--keep-warm-ms 0]
[--loop-lag-warn-ms 3]``.
Numbers on a shared 2-core VM are noisy: the load average is printed with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterator
from typing import Any

from pocketmq.remoting.common.loop_lag import LoopLagMonitor
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


#: ``haKeepWarmMillis`` of the lag figure's master and slave stores (``--keep-warm-ms``)
KEEP_WARM_MS = MessageStoreConfig().ha_keep_warm_millis


def _slave_main(root: str, master: str, seg: int, warn_ms: int) -> None:
    """The ``--slave-of`` mode: a slave store in its own process (uvloop, as a broker) until SIGTERM."""
    from pocketmq.remoting.common.runtime import run_until_stopped

    async def main(stop: asyncio.Event) -> None:
        slave = MessageStore(
            MessageStoreConfig(
                store_path_root_dir=root, broker_role="SLAVE", mapped_file_size_commit_log=seg,
                ha_master_address=master, ha_keep_warm_millis=KEEP_WARM_MS,
            )
        )  # fmt: skip
        slave.load()
        await slave.start()
        await slave.start_ha()
        gc.collect()
        gc.freeze()  # as a broker process once up (runtime.boot_done)
        monitor = _StallLog(warn_ms) if warn_ms else None
        if monitor is not None:
            monitor.start()
        await stop.wait()
        if monitor is not None:
            monitor.stop()
            with open(os.path.join(root, STALLS_FILE), "w") as f:  # noqa: ASYNC230 - once, at exit
                json.dump({"stalls": monitor.stalls, "gc": monitor.gc}, f)
        await slave.shutdown()

    run_until_stopped(main)


@contextlib.contextmanager
def _slave_process(root: str, master_port: int, seg: int, warn_ms: int = 0) -> Iterator[int]:
    """A slave store in a child process following 127.0.0.1:``master_port``: its pid. A slave
    is another process (another host) in every deployment: one loop running both sides would
    add the slave's apply and reput to the master's latency."""
    argv = [sys.executable, os.path.abspath(__file__), "--slave-of", f"127.0.0.1:{master_port}",
            "--slave-root", root, "--slave-segment", str(seg), "--loop-lag-warn-ms", str(warn_ms),
            "--keep-warm-ms", str(KEEP_WARM_MS)]  # fmt: skip
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


_CPU_OF = re.compile(r"loop thread CPU ([0-9.]+) of ([0-9.]+) ms")


class _StallLog(LoopLagMonitor):
    """Every slow turn of a loop with what the watchdog saw (``--loop-lag-warn-ms``): the broker's
    monitor logs at most one a second and samples every 25 ms at best, too coarse for the
    few-ms stalls behind a lag p99; here the timer ticks every millisecond and the watchdog
    wakes every ``warn / 2``."""

    def __init__(self, warn_ms: int) -> None:
        super().__init__(warn_ms=warn_ms, interval=0.001, name="ha-bench")
        #: ``(time.monotonic() at the late tick, lag ms, what ran)``
        self.stalls: list[tuple[float, float, str]] = []
        #: per generation: [collections, total ms, max ms] (``gc.callbacks``)
        self.gc: list[list[float]] = [[0, 0.0, 0.0] for _ in range(3)]
        self._gc_start = 0.0

    def start(self) -> None:
        super().start()
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        super().stop()

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
            return
        ms = (time.perf_counter() - self._gc_start) * 1e3
        g = self.gc[info["generation"]]
        g[0] += 1
        g[1] += ms
        g[2] = max(g[2], ms)

    def _watch_period(self) -> float:
        return max(self.warn_ms / 2000.0, 0.0005)

    def _slow(self, lag: float, due: float, now: float, cpu: str) -> None:
        sample = self._sample
        what = sample[1] if sample is not None and sample[0] == due else "not sampled"
        self.slow_turns += 1
        self.stalls.append((now, round(lag, 2), f"{what}; {cpu}"))

    def summary(self, base: float, end: float) -> dict[str, Any]:
        """Slow turns from ``base`` to ``end`` (monotonic: the measured puts, not the shutdown). A turn whose loop thread ran less than half
        of it was off the CPU (the OS ran something else: load), one that ran more was work
        on the loop: those are grouped by the innermost sampled frame (count, total and max
        ms), and the worst ones listed with their time since ``base``."""
        stalls = [(round(t - base, 3), lag, what) for t, lag, what in self.stalls if base <= t <= end]
        on_cpu: list[tuple[float, float, str]] = []
        off_cpu: list[tuple[float, float, str]] = []
        for s in stalls:
            m = _CPU_OF.search(s[2])
            (on_cpu if m is None or float(m[1]) >= float(m[2]) / 2 else off_cpu).append(s)
        by: dict[str, list[float]] = {}
        for _, lag, what in on_cpu:
            by.setdefault(what.split(" < ")[0].split("; ")[0], []).append(lag)
        top = sorted(by.items(), key=lambda kv: -sum(kv[1]))[:8]
        return {
            "slow_turns": len(stalls), "max_ms": round(max((s[1] for s in stalls), default=0.0), 2),
            "off_cpu": [len(off_cpu), round(sum(s[1] for s in off_cpu), 1)],
            "on_cpu": [len(on_cpu), round(sum(s[1] for s in on_cpu), 1)],
            "on_cpu_by_frame": [[k, len(v), round(sum(v), 1), max(v)] for k, v in top],
            "worst_on_cpu": sorted(on_cpu, key=lambda s: -s[1])[:6],
            "gc_per_generation": [[int(n), round(t, 1), round(m, 2)] for n, t, m in self.gc],
        }  # fmt: skip


async def _master(root: str, seg: int) -> MessageStore:
    # SYNC_MASTER, as the figures (its puts wake the transfer themselves)
    master = MessageStore(
        MessageStoreConfig(
            store_path_root_dir=root,
            mapped_file_size_commit_log=seg,
            broker_role="SYNC_MASTER",
            ha_keep_warm_millis=KEEP_WARM_MS,
        )
    )
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
#: where a slave child leaves its slow turns (``--loop-lag-warn-ms``)
STALLS_FILE = "stalls.json"
#: a lag above this is a spike: the figure names when they happened
SPIKE_MS = 5.0


async def _lag(secs: int, rate: int, warn_ms: int) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="pocketmq-ha-lag-")
    try:
        master = await _master(f"{root}/m", LAG_SEGMENT)
        await master.start_ha(host="127.0.0.1", port=0)
        assert master.ha_master is not None
        monitor = _StallLog(warn_ms) if warn_ms else None
        with _slave_process(f"{root}/s", master.ha_master.port, LAG_SEGMENT, warn_ms) as spid:
            await _until_slave(master)
            figure = await _paced(master, secs, rate, spid, monitor)
        await master.shutdown()
        if monitor is not None:
            monitor.stop()
            base, end = figure.pop("warm_end"), figure.pop("paced_end")
            figure["master_stalls"] = monitor.summary(base, end)
            with contextlib.suppress(OSError, ValueError):
                slave = _StallLog(warn_ms)
                with open(f"{root}/s/{STALLS_FILE}") as f:  # noqa: ASYNC230 - once, at exit
                    saved = json.load(f)
                slave.stalls = [(float(t), float(lag), str(what)) for t, lag, what in saved["stalls"]]
                slave.gc = saved["gc"]
                figure["slave_stalls"] = slave.summary(base, end)
        figure.pop("warm_end", None)
        figure.pop("paced_end", None)
        return figure
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _paced(
    master: MessageStore, secs: int, rate: int, spid: int, monitor: _StallLog | None
) -> dict[str, Any]:
    assert master.ha_master is not None
    gt = master.ha_master.group_transfer
    msgs = _messages(rate * secs, os.urandom(1024))
    # prebuilt messages out of the collector (as store_bench): a full collection over them
    # would be a pause of this harness, not of replication
    gc.collect()
    gc.freeze()
    if monitor is not None:
        monitor.start()
    lags: list[float] = []
    #: puts acknowledged more than SPIKE_MS after their append: (append time, lag)
    spikes: list[tuple[float, float]] = []
    warm_end = 0.0

    # the first second warms up (IndexFile and ConsumeQueue files are created on both sides)
    warm = rate

    def acked(t0: float, status: PutMessageStatus) -> None:
        if status is PutMessageStatus.PUT_OK and t0 >= 0:
            lag = time.perf_counter() - t0
            lags.append(lag)
            if lag * 1e3 > SPIKE_MS:
                spikes.append((t0, lag))

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
            if sent == warm:
                warm_end = time.monotonic()
                if monitor is not None:  # collections of the measured part only
                    monitor.gc = [[0, 0.0, 0.0] for _ in range(3)]
            if sent % BURST == 0:
                await asyncio.sleep(0)
        await asyncio.sleep(tick)
    elapsed = time.perf_counter() - t_start
    paced_end = time.monotonic()
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
        "spikes_over_5ms": _spikes(spikes, warm_end), "warm_end": warm_end, "paced_end": paced_end,
    }  # fmt: skip


def _spikes(spikes: list[tuple[float, float]], base: float) -> list[list[float]]:
    """Spikes grouped into episodes (appends less than 20 ms apart): ``[start s since ``base``,
    puts, max lag ms]``, the 8 worst (perf_counter and monotonic are one clock on Linux)."""
    episodes: list[list[float]] = []
    last = -1.0
    for t0, lag in sorted(spikes):
        if episodes and t0 - last < 0.020:
            episodes[-1][1] += 1
            episodes[-1][2] = max(episodes[-1][2], round(lag * 1e3, 2))
        else:
            episodes.append([round(t0 - base, 3), 1, round(lag * 1e3, 2)])
        last = t0
    return sorted(episodes, key=lambda e: -e[2])[:8]


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
    global KEEP_WARM_MS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--secs", type=int, default=10)
    p.add_argument("--rate", type=int, default=20_000)
    p.add_argument("--catch-up-mib", type=int, default=1024)
    p.add_argument("--only", default="throughput,lag,catch_up")
    p.add_argument("--loop-lag-warn-ms", type=int, default=0,
                   help="lag figure: record every loop turn later than this (both processes)")  # fmt: skip
    p.add_argument("--keep-warm-ms", type=int, default=KEEP_WARM_MS,
                   help="lag figure: haKeepWarmMillis of master and slave (0 = off)")  # fmt: skip
    p.add_argument("--slave-of", help=argparse.SUPPRESS)
    p.add_argument("--slave-root", help=argparse.SUPPRESS)
    p.add_argument("--slave-segment", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    KEEP_WARM_MS = a.keep_warm_ms
    if a.slave_of:
        _slave_main(a.slave_root, a.slave_of, a.slave_segment, a.loop_lag_warn_ms)
        return
    only = set(a.only.split(","))
    if "lag" in only:
        print(json.dumps(_run(_lag(a.secs, a.rate, a.loop_lag_warn_ms))), flush=True)
    if "catch_up" in only:
        print(json.dumps(_run(_catch_up(a.catch_up_mib))), flush=True)
    if "throughput" in only:
        throughput(a.secs)


if __name__ == "__main__":
    main()
