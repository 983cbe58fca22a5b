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

Targets (issue 5): p50 <= 500 µs, p99 <= 1.5 ms; >= 50k msg/s single; >= 150k msg/s batched.
Prints one JSON object. Usage: ``python bench/e2e_latency.py [--seconds 10] [--rate 2000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

try:
    import uvloop

    new_loop: Any = uvloop.new_event_loop
except ImportError:  # pragma: no cover
    new_loop = asyncio.new_event_loop

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import decode_messages, encode_batch
from pocketmq.remoting.transport.client import RemotingClient

BODY_SIZE = 1024
SEQ = struct.Struct(">q")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def broker_process(store_dir: str) -> Any:
    port = free_port()
    argv = [
        sys.executable, "-m", "pocketmq.broker",
        "--set", f"listenPort={port}", "--set", "listenHost=127.0.0.1", "--set", "brokerIP1=127.0.0.1",
        "--set", "fastListenEnable=false", "--set", f"storePathRootDir={store_dir}",
        "--set", "mappedFileSizeCommitLog=268435456", "--set", "maxHashSlotNum=500000",
        "--set", "maxIndexNum=2000000", "--log-level", "WARNING",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("broker did not start") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
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


async def latency(addr: str, rate: int, seconds: float) -> dict[str, Any]:
    topic = f"BenchLat{os.getpid()}"
    producer, consumer = RemotingClient(), RemotingClient()
    await ensure_topic(producer, addr, topic, 1)
    r = await producer.invoke(
        addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"})
    )
    start_offset = int((r.ext_fields or {})["offset"])
    sent_at: dict[int, int] = {}
    lat_ns: list[int] = []
    total = int(rate * seconds)
    done = asyncio.Event()

    async def consume() -> None:
        offset = start_offset
        while not done.is_set():
            ext = {
                "consumerGroup": "BenchCG", "topic": topic, "queueId": "0", "queueOffset": str(offset),
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
                if len(lat_ns) >= total:
                    done.set()

    consumer_task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)  # let the first pull be held
    pad = b"x" * (BODY_SIZE - SEQ.size)
    interval = 1 / rate
    t_start = time.perf_counter()
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
                addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, send_ext(topic, 0), body)
            )
        )
        inflight.add(fut)
        fut.add_done_callback(inflight.discard)
    if inflight:
        await asyncio.gather(*inflight)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(10):
            await done.wait()
    done.set()
    consumer_task.cancel()
    with contextlib.suppress(BaseException):
        await consumer_task
    await producer.close()
    await consumer.close()
    us = sorted(x / 1000 for x in lat_ns)
    return {
        "rate": rate,
        "seconds": seconds,
        "received": len(us),
        "sent": total,
        "p50_us": round(percentile(us, 50), 1),
        "p90_us": round(percentile(us, 90), 1),
        "p99_us": round(percentile(us, 99), 1),
        "max_us": round(us[-1], 1) if us else None,
    }


async def throughput(addr: str, seconds: float, inflight: int, batch: int) -> dict[str, Any]:
    topic = f"BenchTp{'B' if batch > 1 else 'S'}{os.getpid()}"
    client = RemotingClient()
    await ensure_topic(client, addr, topic, 8)
    body = b"x" * BODY_SIZE
    payload = encode_batch([(0, body, "TAGS\x01bench")] * batch) if batch > 1 else body
    per_request = batch if batch > 1 else 1
    deadline = time.perf_counter() + seconds
    count = 0
    errors = 0

    async def worker(qid: int) -> None:
        nonlocal count, errors
        ext = send_ext(topic, qid, batch > 1)
        while time.perf_counter() < deadline:
            r = await client.invoke(
                addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(ext), payload)
            )
            if r.code == ResponseCode.SUCCESS:
                count += per_request
            else:
                errors += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(i % 8) for i in range(inflight)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return {"inflight": inflight, "batch": batch, "msgs_per_s": round(count / elapsed), "errors": errors}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bench": "e2e_latency",
        "body_bytes": BODY_SIZE,
        "loop": "uvloop" if new_loop is not asyncio.new_event_loop else "asyncio",
    }
    addr = args.broker
    async with _broker(addr) as addr:
        out["broker"] = addr
        if "latency" in args.only:
            out["latency"] = await latency(addr, args.rate, args.seconds)
        if "single" in args.only:
            out["single"] = await throughput(addr, args.tp_seconds, args.inflight, 1)
        if "batched" in args.only:
            out["batched"] = await throughput(addr, args.tp_seconds, max(1, args.inflight // 4), args.batch)
    lat = out.get("latency", {})
    out["targets"] = {
        "p50_le_500us": lat.get("p50_us", 1e9) <= 500,
        "p99_le_1500us": lat.get("p99_us", 1e9) <= 1500,
        "single_ge_50k": out.get("single", {}).get("msgs_per_s", 0) >= 50_000,
        "batched_ge_150k": out.get("batched", {}).get("msgs_per_s", 0) >= 150_000,
    }
    return out


@contextlib.asynccontextmanager
async def _broker(addr: str | None) -> AsyncIterator[str]:
    if addr:
        yield addr
        return
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-") as d, broker_process(d) as spawned:
        yield spawned


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--broker", help="use a running broker at host:port instead of spawning one")
    ap.add_argument("--rate", type=int, default=2000)
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
