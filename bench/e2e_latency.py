"""End-to-end latency and broker throughput, with pocketmq's remoting client only (no SDK).

The broker runs as a separate ``mqbroker`` process (its own core, ASYNC_FLUSH, a temp store,
no name server); this process is the producer and the consumer, on uvloop when available.

* ``latency``: one producer sends 1 KB messages at ``--rate`` msg/s for ``--seconds`` to a
  1-queue topic; one consumer keeps a long-polling PULL_MESSAGE held on that queue and is
  answered the moment reput dispatches each message. Latency = receive time - send time of
  each message (one clock, same process). Reports p50/p90/p99/max in µs.
* ``single``: SEND_MESSAGE_V2 of 1 KB bodies with ``--inflight`` requests in flight, msg/s.
* ``batched``: SEND_MESSAGE_V2 ``m=true`` batches of ``--batch`` 1 KB messages (the C++ form),
  ``--inflight`` / 4 batches in flight, msg/s.

Each test also reports CPU time per message: ``broker_cpu_us`` (the broker process's user+system
time over the test, from ``/proc/<pid>/stat``; needs the spawned broker or ``--broker-pid``),
``helpers_cpu_us`` (its child processes': the fsync helpers, an index process; the SYNC_FLUSH
fdatasyncs run there) and ``client_cpu_us`` (this process). On a shared box these are steadier than msg/s.
``--uniq-key`` gives every throughput message its own ``UNIQ_KEY`` property, as the SDK's
producer does (the store then indexes each one). ``--flush sync`` starts the broker with
``flushDiskType=SYNC_FLUSH`` (group commit).

``--runs N`` repeats the latency test N times, each on a topic created just before it with
``--queues`` queues (default 8; sends go round-robin over them, one held pull per queue), so
every run includes the first seconds after a topic is created (its new ConsumeQueue files).
Each run reports p50/p99/max and, from the spawned broker's loop-lag monitor (scraped from its
Prometheus exporter before and after the run), how many 10 ms ticks ran more than 1 / 5 / 20 ms
late and the upper bound of the worst bucket hit (``loop_lag_max_le_ms``); the summary adds the
median and worst of the runs and the monitor's maximum since start (``loop_lag_max_ms``).
Each run's ``stages`` also give its first 50 and 200 messages (``first_50_ms``, ``first_200_ms``:
median and max, and the slowest's send -> store -> received split): the first run is also the
spawned broker's first traffic (a fresh store), the later ones a new topic on a running broker.
``--lag-warn-ms`` sets the spawned broker's ``loopLagWarnMillis`` (its warnings name what ran).

Targets (issue 5): p50 <= 500 µs, p99 <= 1.5 ms; >= 50k msg/s single; >= 150k msg/s batched.
Prints one JSON object. Usage: ``python bench/e2e_latency.py [--seconds 10] [--rate 2000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import AsyncIterator
from typing import Any

try:
    import uvloop

    new_loop: Any = uvloop.new_event_loop
except ImportError:  # pragma: no cover
    new_loop = asyncio.new_event_loop

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import UniqIdGenerator, decode_messages, encode_batch
from pocketmq.remoting.transport.client import RemotingClient

BODY_SIZE = 1024
SEQ = struct.Struct(">q")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of ``pid`` (Linux ``/proc``), or None when unknown."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # after the ")" of comm: state is field 0, utime field 11, stime field 12
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def children_cpu_s(pid: int | None) -> dict[int, float]:
    """CPU seconds of each child process of ``pid`` (Linux ``/proc``; empty when unknown)."""
    out: dict[int, float] = {}
    if pid is None:
        return out
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        for kid in kids:
            cpu = process_cpu_s(kid)
            if cpu is not None:
                out[kid] = cpu
    return out


class CpuMeter:
    """CPU µs per message of the broker process, its helper processes and this one over one test."""

    def __init__(self, broker_pid: int | None) -> None:
        self.pid = broker_pid
        self.broker0 = process_cpu_s(broker_pid)
        self.helpers0 = children_cpu_s(broker_pid)
        self.client0 = time.process_time()

    def result(self, messages: int) -> dict[str, float | None]:
        n = max(1, messages)
        b1 = process_cpu_s(self.pid)
        broker = None if b1 is None or self.broker0 is None else round((b1 - self.broker0) * 1e6 / n, 2)
        helpers = None
        if broker is not None:
            # (a helper started during the test counts from 0; one gone by its end is not counted)
            spent = sum(cpu - self.helpers0.get(kid, 0.0) for kid, cpu in children_cpu_s(self.pid).items())
            helpers = round(spent * 1e6 / n, 2)
        return {
            "broker_cpu_us": broker,
            "helpers_cpu_us": helpers,
            "client_cpu_us": round((time.process_time() - self.client0) * 1e6 / n, 2),
        }


@contextlib.contextmanager
def broker_process(store_dir: str, flush: str = "async", lag_warn_ms: int = 50) -> Any:
    port = free_port()
    metrics_port = free_port()
    argv = [
        sys.executable, "-m", "pocketmq.broker",
        "--set", f"listenPort={port}", "--set", "listenHost=127.0.0.1", "--set", "brokerIP1=127.0.0.1",
        "--set", "fastListenEnable=false", "--set", f"storePathRootDir={store_dir}",
        # its own free port: listenPort + 1 (the default) may be a client's ephemeral port
        "--set", f"haListenPort={free_port()}",
        "--set", f"mappedFileSizeCommitLog={os.environ.get('BENCH_SEGMENT_BYTES', '268435456')}", "--set", "maxHashSlotNum=500000",
        "--set", "maxIndexNum=2000000", "--log-level", "WARNING",
        "--set", f"flushDiskType={'SYNC_FLUSH' if flush == 'sync' else 'ASYNC_FLUSH'}",
        "--set", "metricsExporterType=PROM", "--set", f"metricsPromExporterPort={metrics_port}",
        "--set", "metricsPromExporterHost=127.0.0.1", "--set", f"loopLagWarnMillis={lag_warn_ms}",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    try:
        # the boot line, not the open port: the port opens early in the boot, and what follows
        # it (the metrics exporter's imports, the heap's full collection and freeze) held the
        # loop 100-600 ms under load, over a first run that started at once
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if b"boot success" not in line:
            raise RuntimeError(f"broker did not start: {line!r}")
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # nothing else is printed
        yield f"127.0.0.1:{port}", proc.pid, metrics_port
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def send_ext(topic: str, queue_id: int, batch: bool = False) -> dict[str, str]:
    ext = {
        "a": "BenchPG", "b": topic, "c": "TBW102", "d": "8", "e": str(queue_id), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": "WAIT\x01true\x02TAGS\x01bench", "j": "0", "k": "false",
    }  # fmt: skip
    if batch:
        ext["m"] = "true"
    return ext


async def ensure_topic(client: RemotingClient, addr: str, topic: str, queues: int) -> None:
    ext = {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
    }  # fmt: skip
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext))
    if r.code != ResponseCode.SUCCESS:
        # No admin processor yet: auto-create through a first send (TBW102 gives 8 queues max).
        r = await client.invoke(
            addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, send_ext(topic, 0), b"warmup")
        )
        assert r.code == ResponseCode.SUCCESS, r.remark


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


LAG_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


def loop_lag(metrics_port: int | None) -> dict[str, float] | None:
    """The spawned broker's loop-lag monitor: cumulative ticks per ``le`` bound (ms) and the max."""
    if metrics_port is None:
        return None
    import urllib.request

    deadline = time.monotonic() + 30  # the exporter starts a moment after the broker's port
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
                text = r.read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("rocketmq_loop_lag_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out["inf" if le == "+Inf" else str(round(float(le) * 1000))] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("rocketmq_loop_lag_max_seconds{"):
            out["max_ms"] = round(float(line.rsplit(" ", 1)[1]) * 1000, 2)
    return out


def lag_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, Any]:
    """Ticks more than 1 / 5 / 20 ms late during one run, and the worst bucket's upper bound."""
    if before is None or after is None:
        return {}

    def over(ms: int) -> int:
        key = str(ms)
        return int((after["inf"] - after[key]) - (before["inf"] - before[key]))

    worst: float | None = 0
    prev = 0
    for bound in LAG_BOUNDS_MS:
        n = int(after[str(bound)] - before[str(bound)])
        if n > prev:
            worst = bound
        prev = n
    if after["inf"] - before["inf"] > prev:
        worst = None  # above the largest bound
    return {"ticks_over_1ms": over(1), "ticks_over_5ms": over(5), "ticks_over_20ms": over(20),
            "loop_lag_max_le_ms": worst}  # fmt: skip


class Stages:
    """Where the slow deliveries of one latency run spent their time.

    Per message: send (this process), the broker's store timestamp (its wall clock, ms: read
    with +-0.5 ms), the send's reply and the pull reply that delivered it. The samples over
    the run's p99 (and over 1 ms) are split into ``to_store`` (send -> put: the client's write,
    the broker's read and its loop before the put) and ``after_store`` (put -> received:
    dispatch, the held pull's wake-up, its reply, this loop's read), and grouped into events
    (slow sends less than 20 ms apart): a stall delays every message in flight, so the events,
    not the samples, say how often something went wrong.
    """

    def __init__(self, queues: int, total: int) -> None:
        self.queues = queues
        self.t0 = 0
        self.wall_minus_perf = 0
        # per seq, in arrays: a tuple per message would be garbage-collected objects, and this
        # process's collections would then add to the latencies measured
        zeros = bytes(8 * total)
        self.sent, self.recv, self.store_ms, self.acked = (array("q", zeros) for _ in range(4))

    def start(self) -> None:
        self.t0 = time.perf_counter_ns()
        self.wall_minus_perf = time.time_ns() - time.perf_counter_ns()
        #: this process's garbage collections during the run: generation -> [count, max ms]
        self.gc: dict[int, list[float]] = {}
        self._gc_t0 = 0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter_ns()
            return
        ms = (time.perf_counter_ns() - self._gc_t0) / 1e6
        entry = self.gc.setdefault(info["generation"], [0, 0.0])
        entry[0] += 1
        entry[1] = round(max(entry[1], ms), 2)

    def acked_callback(self, seq: int) -> Any:
        acked = self.acked

        def done(_fut: Any) -> None:
            acked[seq] = time.perf_counter_ns()

        return done

    def received(self, seq: int, sent: int, now: int, store_ms: int) -> None:
        self.sent[seq], self.recv[seq], self.store_ms[seq] = sent, now, store_ms

    def _split(self, seq: int) -> tuple[float, float, float]:
        sent, now = self.sent[seq], self.recv[seq]
        store = self.store_ms[seq] * 1_000_000 + 500_000 - self.wall_minus_perf
        return round((now - sent) / 1e6, 2), round((store - sent) / 1e6, 1), round((now - store) / 1e6, 1)

    def _first(self, got: list[int], n: int) -> dict[str, float]:
        """The run's first ``n`` messages (by send order): e2e median and max, and the worst's split."""
        first = [seq for seq in got if seq < n]
        if not first:
            return {}
        e2e = sorted((self.recv[seq] - self.sent[seq]) / 1e6 for seq in first)
        worst = max(first, key=lambda seq: self.recv[seq] - self.sent[seq])
        _, to_store, after = self._split(worst)
        return {"p50": round(percentile(e2e, 50), 2), "max": round(e2e[-1], 2), "max_seq": worst,
                "max_to_store": to_store, "max_after_store": after}  # fmt: skip

    def summary(self, p99_us: float) -> dict[str, Any]:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        bound = max(p99_us, 1000.0) * 1000
        sent_at, recv, acked = self.sent, self.recv, self.acked
        got = [seq for seq in range(len(recv)) if recv[seq]]
        ack_us = sorted((acked[seq] - sent_at[seq]) / 1e3 for seq in got if acked[seq])
        early = sum(1 for seq in got if recv[seq] < acked[seq])
        overall = {
            "ack_p50_us": round(percentile(ack_us, 50), 1),
            "ack_p99_us": round(percentile(ack_us, 99), 1),
            "received_before_ack_pct": round(100 * early / max(1, len(got)), 1),
            "client_gc": self.gc,
            # the new topic's first message on each queue: (e2e, to_store, after_store) ms
            "first_per_queue_ms": [self._split(seq) for seq in got[: self.queues]],
            **{f"first_{n}_ms": self._first(got, n) for n in (50, 200)},
        }
        slow = [seq for seq in got if recv[seq] - sent_at[seq] > bound]
        if not slow:
            return {**overall, "over_p99": 0}
        to_store: list[float] = []
        after: list[float] = []
        events: list[dict[str, Any]] = []
        last_sent = -(10**18)
        before = 0
        for seq in slow:
            sent, now, store_ms = sent_at[seq], recv[seq], self.store_ms[seq]
            store = store_ms * 1_000_000 + 500_000 - self.wall_minus_perf
            a, b = (store - sent) / 1e6, (now - store) / 1e6
            to_store.append(a)
            after.append(b)
            before += a > b
            if sent - last_sent > 20_000_000:
                events.append({"at_s": round((sent - self.t0) / 1e9, 3), "n": 0, "worst_ms": 0.0,
                               "to_store_ms": 0.0, "after_store_ms": 0.0, "first_of_queue": 0})  # fmt: skip
            ev = events[-1]
            ev["n"] += 1
            if (now - sent) / 1e6 > ev["worst_ms"]:
                ev["worst_ms"] = round((now - sent) / 1e6, 2)
                ev["to_store_ms"], ev["after_store_ms"] = round(a, 1), round(b, 1)
                ack = acked[seq]
                ev["ack_ms"] = round((ack - sent) / 1e6, 2) if ack else None
            if seq < self.queues:
                ev["first_of_queue"] += 1
            last_sent = sent
        to_store.sort()
        after.sort()
        events.sort(key=lambda e: -e["worst_ms"])
        return {
            **overall,
            "over_p99": len(slow),
            "to_store_ms_p50": round(percentile(to_store, 50), 2),
            "after_store_ms_p50": round(percentile(after, 50), 2),
            "mostly_before_store": before,
            "in_first_second": sum(1 for seq in slow if sent_at[seq] - self.t0 < 1_000_000_000),
            "events": len(events),
            "worst_events": events[:6],
        }


async def latency(
    addr: str, rate: int, seconds: float, broker_pid: int | None, queues: int = 1, tag: str = ""
) -> dict[str, Any]:
    topic = f"BenchLat{os.getpid()}{tag}"
    producer, consumer = RemotingClient(), RemotingClient()
    sent_at: dict[int, int] = {}
    lat_ns: list[int] = []
    total = int(rate * seconds)
    done = asyncio.Event()
    stages = Stages(queues, total)

    async def consume(queue_id: int, offset: int) -> None:
        while not done.is_set():
            ext = {
                "consumerGroup": "BenchCG", "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
                "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000",
                "subscription": "*", "subVersion": "0",
            }  # fmt: skip
            resp = await consumer.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext), 30)
            now = time.perf_counter_ns()
            offset = int((resp.ext_fields or {}).get("nextBeginOffset", offset))
            if resp.code == ResponseCode.SUCCESS and resp.body:
                for m in decode_messages(resp.body):
                    (seq,) = SEQ.unpack_from(m.body, 0)
                    t0 = sent_at.pop(seq, None)
                    if t0 is not None:
                        lat_ns.append(now - t0)
                        stages.received(seq, t0, now, m.store_timestamp)
                if len(lat_ns) >= total:
                    done.set()

    # the topic is created now: the run includes its first seconds (new ConsumeQueue files)
    await ensure_topic(producer, addr, topic, queues)
    consumer_tasks = []
    for q in range(queues):
        r = await producer.invoke(
            addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})
        )
        consumer_tasks.append(asyncio.create_task(consume(q, int((r.ext_fields or {})["offset"]))))
    await asyncio.sleep(0.2)  # let the first pulls be held
    exts = [send_ext(topic, q) for q in range(queues)]
    meter = CpuMeter(broker_pid)
    pad = b"x" * (BODY_SIZE - SEQ.size)
    interval = 1 / rate
    t_start = time.perf_counter()
    stages.start()
    inflight: set[asyncio.Future[Any]] = set()
    for seq in range(total):
        target = t_start + seq * interval
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        body = SEQ.pack(seq) + pad
        sent_at[seq] = time.perf_counter_ns()
        fut = asyncio.ensure_future(
            producer.invoke(
                addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, exts[seq % queues], body)
            )
        )
        inflight.add(fut)
        fut.add_done_callback(inflight.discard)
        fut.add_done_callback(stages.acked_callback(seq))
    if inflight:
        await asyncio.gather(*inflight)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(10):
            await done.wait()
    done.set()
    cpu = meter.result(len(lat_ns))
    for task in consumer_tasks:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
    await producer.close()
    await consumer.close()
    us = sorted(x / 1000 for x in lat_ns)
    return {
        "rate": rate,
        "queues": queues,
        "seconds": seconds,
        "received": len(us),
        "sent": total,
        "p50_us": round(percentile(us, 50), 1),
        "p90_us": round(percentile(us, 90), 1),
        "p99_us": round(percentile(us, 99), 1),
        "max_us": round(us[-1], 1) if us else None,
        **cpu,
        "stages": stages.summary(percentile(us, 99)),
    }


async def throughput(
    addr: str, seconds: float, inflight: int, batch: int, broker_pid: int | None, uniq_key: bool = False
) -> dict[str, Any]:
    topic = f"BenchTp{'B' if batch > 1 else 'S'}{os.getpid()}"
    client = RemotingClient()
    await ensure_topic(client, addr, topic, 8)
    body_1k = b"x" * BODY_SIZE
    payload = encode_batch([(0, body_1k, "TAGS\x01bench")] * batch) if batch > 1 else body_1k
    per_request = batch if batch > 1 else 1
    deadline = time.perf_counter() + seconds
    count = 0
    errors = 0
    # --uniq-key: every message carries its own UNIQ_KEY, made as the SDK makes them (producer
    # prefix, milliseconds, counter: a new millisecond changes the key's head, which the index
    # hash cache sees; a prefix plus a plain counter never did)
    uniq_ids = UniqIdGenerator(bytes((127, 0, 0, 1)))

    def request(ext: dict[str, str]) -> RemotingCommand:
        ext = dict(ext)
        body = payload
        if uniq_key:
            if batch > 1:
                keys = [f"TAGS\x01bench\x02UNIQ_KEY\x01{uniq_ids.create()}" for _ in range(batch)]
                body = encode_batch([(0, body_1k, k) for k in keys])
            else:
                ext["i"] += f"\x02UNIQ_KEY\x01{uniq_ids.create()}"
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body)

    async def worker(qid: int) -> None:
        nonlocal count, errors
        ext = send_ext(topic, qid, batch > 1)
        while time.perf_counter() < deadline:
            r = await client.invoke(addr, request(ext))
            if r.code == ResponseCode.SUCCESS:
                count += per_request
            else:
                errors += 1

    meter = CpuMeter(broker_pid)
    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i % 8) for i in range(inflight)))
    elapsed = time.perf_counter() - t0
    cpu = meter.result(count)
    await client.close()
    return {
        "inflight": inflight, "batch": batch, "msgs_per_s": round(count / elapsed), "errors": errors, **cpu,
    }  # fmt: skip


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bench": "e2e_latency",
        "body_bytes": BODY_SIZE,
        "loop": "uvloop" if new_loop is not asyncio.new_event_loop else "asyncio",
    }
    async with _broker(args.broker, args.broker_pid, args.flush, args.lag_warn_ms) as (addr, pid, mport):
        out["broker"] = addr
        out["flush"] = args.flush if not args.broker else None
        if "latency" in args.only:
            runs = []
            for i in range(args.runs):
                before = await asyncio.to_thread(loop_lag, mport)
                run = await latency(addr, args.rate, args.seconds, pid, args.queues, f"R{i}")
                run.update(lag_delta(before, await asyncio.to_thread(loop_lag, mport)))
                runs.append(run)
            out["latency_runs"] = runs
            out["latency"] = summarize(runs)
            final = await asyncio.to_thread(loop_lag, mport)
            out["loop_lag_max_ms"] = final.get("max_ms") if final else None
        if "single" in args.only:
            out["single"] = await throughput(addr, args.tp_seconds, args.inflight, 1, pid, args.uniq_key)
        if "batched" in args.only:
            out["batched"] = await throughput(
                addr, args.tp_seconds, max(1, args.inflight // 4), args.batch, pid, args.uniq_key
            )
    lat = out.get("latency", {})
    out["targets"] = {
        "p50_le_500us": lat.get("p50_us", 1e9) <= 500,
        "p99_le_1500us": lat.get("p99_us", 1e9) <= 1500,
        "single_ge_50k": out.get("single", {}).get("msgs_per_s", 0) >= 50_000,
        "batched_ge_150k": out.get("batched", {}).get("msgs_per_s", 0) >= 150_000,
    }
    return out


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median p50/p99 of the runs, their worst p99 and max, CPU per message of the median run."""
    if not runs:
        return {}
    by_p99 = sorted(runs, key=lambda r: r["p99_us"])
    mid = by_p99[len(by_p99) // 2]
    return {
        "runs": len(runs),
        "p50_us": sorted(r["p50_us"] for r in runs)[len(runs) // 2],
        "p99_us": mid["p99_us"],
        "p99_us_worst": by_p99[-1]["p99_us"],
        "max_us_worst": max((r["max_us"] or 0) for r in runs),
        "broker_cpu_us": mid.get("broker_cpu_us"),
        "helpers_cpu_us": mid.get("helpers_cpu_us"),
        "client_cpu_us": mid.get("client_cpu_us"),
    }


@contextlib.asynccontextmanager
async def _broker(
    addr: str | None, pid: int | None, flush: str, lag_warn_ms: int
) -> AsyncIterator[tuple[str, int | None, int | None]]:
    if addr:
        yield addr, pid, None
        return
    with (
        tempfile.TemporaryDirectory(prefix="pocketmq-bench-") as d,
        broker_process(d, flush, lag_warn_ms) as spawned,
    ):
        yield spawned


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--broker", help="use a running broker at host:port instead of spawning one")
    ap.add_argument("--broker-pid", type=int, help="that broker's pid (for its CPU time per message)")
    ap.add_argument("--uniq-key", action="store_true", help="a UNIQ_KEY per message, as the SDK sends")
    ap.add_argument(
        "--flush", choices=["async", "sync"], default="async", help="spawned broker's flushDiskType"
    )
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3, help="latency runs, each on a new topic")
    ap.add_argument("--queues", type=int, default=8, help="queues of each latency run's new topic")
    ap.add_argument("--lag-warn-ms", type=int, default=50, help="spawned broker's loopLagWarnMillis")
    ap.add_argument("--seconds", type=float, default=10.0, help="latency test duration")
    ap.add_argument("--tp-seconds", type=float, default=5.0, help="each throughput test's duration")
    ap.add_argument("--inflight", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument(
        "--only",
        nargs="+",
        default=["latency", "single", "batched"],
        choices=["latency", "single", "batched"],
    )
    args = ap.parse_args()
    with asyncio.Runner(loop_factory=new_loop) as runner:
        print(json.dumps(runner.run(main_async(args))))


if __name__ == "__main__":
    main()
