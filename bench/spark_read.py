"""Spark source throughput: an AvailableNow read of stored messages, printed as JSON.

Setup (not timed): a name server and two brokers as separate processes on 127.0.0.1, a topic
with ``--queues`` queues per broker (default 8, so 16 in all), ``--messages`` messages of
``--body-size`` bytes (default 1M x 1 KiB) sent in batches, then a local[2] SparkSession and a
warm-up batch read and AvailableNow query of ``--warmup-rows`` each (default 100k: Python
workers started, JIT warm; after a 16k-row warm-up the JVM still spent 3.1-4.2 CPU us/row
JIT-compiling in the first timed run, against 2.0-2.6 in later runs).

Timed: ``spark.readStream.format("rocketmq")`` from earliest with ``Trigger.AvailableNow`` to
the ``noop`` sink, from ``start()`` to termination, ``--repeat`` times (each its own checkpoint;
the first run is the headline ``stream_available_now``, later ones show the JVM once its JIT has
seen a full run); then the same range as a batch read. Every run also reports CPU microseconds
per row by process role (Spark's JVM, its Python workers, the brokers, this driver): the box is
shared, so wall time alone is noisy.

The brokers' per-pull caps (RocketMQ: 32 messages / 256 KiB from memory) are raised with
``--broker-cap`` so one pull can return ``--pull-batch-size`` messages: a Python pull loop only
keeps up when every pull returns a few hundred messages. Run with
``--broker-cap 32 --pull-batch-size 32`` for RocketMQ's defaults.

    .venv/bin/python bench/spark_read.py [--messages 1000000] [--queues 8] [--pull-batch-size 1024] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from typing import Any

TOPIC = "SparkBench"


def write_topic_config(store_root: str, queues: int) -> None:
    """Pre-create the topic the RocketMQ way: the broker loads config/topics.json at start."""
    os.makedirs(os.path.join(store_root, "config"))
    table = {
        TOPIC: {"order": False, "perm": 6, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
                "topicName": TOPIC, "topicSysFlag": 0, "writeQueueNums": queues},
    }  # fmt: skip
    doc = {"dataVersion": {"counter": 1, "timestamp": int(time.time() * 1000)}, "topicConfigTable": table}
    with open(os.path.join(store_root, "config", "topics.json"), "w") as f:
        json.dump(doc, f)


def start_servers(root: str, cap: int, queues: int) -> tuple[list[subprocess.Popen[bytes]], str, list[str]]:
    from pocketmq.testing.procs import free_port, wait_port

    py = sys.executable
    ns_port = free_port()
    ns_dir = os.path.join(root, "namesrv")
    os.makedirs(ns_dir)
    ns_cmd = [py, "-m", "pocketmq.namesrv", "--log-level", "WARNING", "--set", f"listenPort={ns_port}",
              "--set", f"kvConfigPath={ns_dir}/kvConfig.json", "--set", f"configStorePath={ns_dir}/namesrv.properties"]  # fmt: skip
    procs = [subprocess.Popen(ns_cmd)]
    wait_port(ns_port, procs[0])
    namesrv = f"127.0.0.1:{ns_port}"
    addrs = []
    for name in ("broker-a", "broker-b"):
        write_topic_config(os.path.join(root, name), queues)
        port = free_port()
        args = {
            "brokerName": name, "brokerIP1": "127.0.0.1", "listenHost": "127.0.0.1", "listenPort": port,
            "fastListenEnable": "false", "haListenPort": free_port(), "storePathRootDir": os.path.join(root, name),
            "maxTransferCountOnMessageInMemory": cap, "maxTransferBytesOnMessageInMemory": max(cap, 32) * 8192,
        }  # fmt: skip
        cmd = [py, "-m", "pocketmq.broker", "-n", namesrv, "--log-level", "WARNING"]
        for k, v in args.items():
            cmd += ["--set", f"{k}={v}"]
        procs.append(subprocess.Popen(cmd))
        wait_port(port, procs[-1])
        addrs.append(f"127.0.0.1:{port}")
    return procs, namesrv, addrs


async def produce(namesrv: str, total: int, queues: int, body_size: int) -> None:
    from pocketmq.client import Message, Producer
    from pocketmq.client.message import MessageQueue

    body = b"x" * body_size
    mqs = [MessageQueue(TOPIC, b, q) for b in ("broker-a", "broker-b") for q in range(queues)]
    per_queue = total // len(mqs)
    batch = max(1, 64 * 1024 // (body_size + 100))
    async with Producer("spark-bench", namesrv=namesrv) as producer:

        async def fill(mq: MessageQueue) -> None:
            for lo in range(0, per_queue, batch):
                n = min(batch, per_queue - lo)
                await producer.send_batch([Message(TOPIC, body, tags="T") for _ in range(n)], queue=mq)

        await asyncio.gather(*(fill(mq) for mq in mqs))


def cpu_by_role(brokers: set[int]) -> dict[str, float]:
    """CPU seconds (user + system) of this process tree by role (Linux /proc; empty elsewhere).

    Roles: ``brokers`` (the broker processes), ``jvm`` (Spark's driver JVM), ``python_workers``
    (the Python processes the JVM starts: read workers and each stream's planner, also those
    that exited), ``driver`` (this script) and ``other`` (the name server). The box is often
    shared: CPU per row of *our* processes says more than wall time when other programs compete
    for the two cores.
    """
    try:
        hz = os.sysconf("SC_CLK_TCK")
        stats: dict[int, tuple[int, float, float, str]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat") as f:
                        head, _, tail = f.read().rpartition(")")
                except OSError:
                    continue
                fields = tail.split()
                comm = head.partition("(")[2]
                own = (int(fields[11]) + int(fields[12])) / hz  # utime + stime
                reaped = (int(fields[13]) + int(fields[14])) / hz  # children that exited
                stats[int(name)] = (int(fields[1]), own, reaped, comm)
    except (OSError, ValueError, AttributeError):
        return {}
    roles = {os.getpid(): "driver"}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _, _, comm) in stats.items():
            if ppid in roles and pid not in roles:
                parent = roles[ppid]
                if pid in brokers:
                    roles[pid] = "brokers"
                elif comm == "java":
                    roles[pid] = "jvm"
                elif parent in ("jvm", "python_workers"):
                    roles[pid] = "python_workers"
                else:
                    roles[pid] = "other" if parent == "driver" else parent
                grew = True
    out: dict[str, float] = {}
    for pid, role in roles.items():
        _, own, reaped, _ = stats[pid]
        out[role] = out.get(role, 0.0) + own
        # the JVM's and the daemon's children are Python workers and planners
        kind = "python_workers" if role in ("jvm", "python_workers") else role
        out[kind] = out.get(kind, 0.0) + reaped
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float], rows: int) -> dict[str, float]:
    """Microseconds of CPU per row, by role."""
    return {k: round((after.get(k, 0.0) - before.get(k, 0.0)) / rows * 1e6, 2) for k in sorted(after)}


def stored(namesrv: str) -> int:
    from pocketmq.spark.metadata import ClusterClient

    snap = ClusterClient([namesrv]).snapshot([TOPIC], strict=True)
    return sum(s.max_offset - s.min_offset for s in snap.queues.values())


def spark_session(root: str) -> Any:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    ap = argparse.ArgumentParser(description="RocketMQ Spark source read throughput")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--queues", type=int, default=8, help="queues per broker (2 brokers)")
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--pull-batch-size", type=int, default=1024)
    ap.add_argument("--broker-cap", type=int, default=1024, help="broker maxTransferCountOnMessageInMemory")
    ap.add_argument("--warmup-rows", type=int, default=100_000, help="rows of each untimed warm-up read")
    ap.add_argument("--repeat", type=int, default=2, help="timed AvailableNow runs (each from earliest)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="pocketmq-spark-bench-")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs, namesrv, _ = start_servers(root, args.broker_cap, args.queues)
        t = time.perf_counter()
        asyncio.run(produce(namesrv, args.messages, args.queues, args.body_size))
        produce_s = time.perf_counter() - t
        expected = (args.messages // (2 * args.queues)) * 2 * args.queues
        deadline = time.monotonic() + 60
        while stored(namesrv) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
        t = time.perf_counter()
        spark = spark_session(root)
        session_s = time.perf_counter() - t
        opts = {"nameServer": namesrv, "topic": TOPIC, "pullBatchSize": str(args.pull_batch_size)}
        # Warm-up, not timed: a batch read and an AvailableNow query (its own checkpoint) of
        # --warmup-rows each start the Python workers and warm the JIT on both code paths.
        per_queue = expected // (2 * args.queues)
        warm = max(1, min(per_queue, args.warmup_rows // (2 * args.queues)))
        warm_end = {TOPIC: {b: {str(q): warm for q in range(args.queues)} for b in ("broker-a", "broker-b")}}
        warm_start = {
            TOPIC: {
                b: {str(q): per_queue - warm for q in range(args.queues)} for b in ("broker-a", "broker-b")
            }
        }
        t = time.perf_counter()
        spark.read.format("rocketmq").options(**opts).option(
            "endingOffsets", json.dumps(warm_end)
        ).load().count()
        (
            spark.readStream.format("rocketmq").options(**opts).option("startingOffsets", json.dumps(warm_start)).load()
            .writeStream.format("noop").option("checkpointLocation", os.path.join(root, "warm-cp"))
            .trigger(availableNow=True).start().awaitTermination()
        )  # fmt: skip
        warmup_s = time.perf_counter() - t

        brokers = {p.pid for p in procs[1:]}
        runs = []
        for i in range(args.repeat):
            cpu = cpu_by_role(brokers)
            t = time.perf_counter()
            started = time.time()
            query = (
                spark.readStream.format("rocketmq").options(**opts).option("startingOffsets", "earliest").load()
                .writeStream.format("noop").option("checkpointLocation", os.path.join(root, f"checkpoint-{i}"))
                .trigger(availableNow=True).start()
            )  # fmt: skip
            query.awaitTermination()
            seconds = time.perf_counter() - t
            progress = query.recentProgress
            rows = sum(p["numInputRows"] for p in progress)
            first_trigger = datetime.fromisoformat(
                progress[0]["timestamp"].replace("Z", "+00:00")
            ).timestamp()
            runs.append(
                {
                    "rows": rows,
                    "seconds": round(seconds, 2),
                    "rows_per_s": round(rows / seconds),
                    "mb_per_s": round(rows * args.body_size / 1e6 / seconds, 1),
                    "before_first_trigger_s": round(first_trigger - started, 2),
                    "trigger_s": round(sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000, 2),
                    "cpu_us_per_row": cpu_delta(cpu, cpu_by_role(brokers), rows),
                    "load_avg_1m": round(os.getloadavg()[0], 2),
                }
            )

        cpu = cpu_by_role(brokers)
        t = time.perf_counter()
        spark.read.format("rocketmq").options(**opts).load().write.format("noop").mode("overwrite").save()
        batch_s = time.perf_counter() - t
        batch_cpu = cpu_delta(cpu, cpu_by_role(brokers), expected)
        spark.stop()
        print(
            json.dumps(
                {
                    "bench": "spark_read",
                    "messages": expected,
                    "body_bytes": args.body_size,
                    "queues": 2 * args.queues,
                    "brokers": 2,
                    "pull_batch_size": args.pull_batch_size,
                    "broker_cap": args.broker_cap,
                    "produce_s": round(produce_s, 2),
                    "session_start_s": round(session_s, 2),
                    "warmup_s": round(warmup_s, 2),
                    "warmup_rows": warm * 2 * args.queues,
                    # the first run (JIT still warming) is the headline; later runs show the steady state
                    "stream_available_now": runs[0],
                    "stream_best_rows_per_s": max(r["rows_per_s"] for r in runs),
                    "stream_runs": runs[1:],
                    "batch_read": {
                        "rows": expected,
                        "seconds": round(batch_s, 2),
                        "rows_per_s": round(expected / batch_s),
                        "cpu_us_per_row": batch_cpu,
                    },
                    "cores": os.cpu_count(),
                    "load_avg_1m": round(os.getloadavg()[0], 2),
                }
            )
        )
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
