"""RPC round trips/s of pocketmq's remoting layer vs a raw asyncio echo, in the same run.

The server runs in a child process (so client and server each get a core, as in production);
both sides use uvloop when available. For 1 and 64 requests in flight with a 1 KB body:

* ``raw_echo``: an ``asyncio.Protocol`` server that splits length-prefixed frames and writes
  each back; the client keeps N 1 KB frames in flight, one write per frame, and counts returned
  frames (per-message I/O with no protocol work: the ceiling for any protocol on this stack);
* ``rpc``: ``RemotingClient.invoke`` against a ``RemotingServer`` echo processor (full JSON
  header encode/decode both ways, opaque matching, futures).

Throughput on a shared machine swings with other load, so the CPU time each side spends per
round trip (client: this process; server: the child, from /proc) is reported as well: it is the
steadier number to compare changes by. For the same reason the two are measured in alternating
rounds (raw, rpc, raw, rpc, ...): each round's ratio compares runs a few seconds apart, and the
reported figures are the medians over the rounds (per-round ratios and the load average are
printed too, to tell a quiet run from a noisy one).

Prints one JSON object. Usage: ``python bench/remoting_rpc.py [--seconds 2] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import struct
import time
from typing import Any

try:
    import uvloop

    new_loop: Any = uvloop.new_event_loop
except ImportError:  # pragma: no cover
    new_loop = asyncio.new_event_loop

from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.transport.client import RemotingClient
from pocketmq.remoting.transport.limits import QueueWait
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig

BODY = b"x" * 1024
ECHO_CODE = 9000


class EchoProtocol(asyncio.Protocol):
    """Splits length-prefixed frames and writes each one back: per-frame work, no protocol."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        write = self.transport.write
        while len(buf) - pos >= 4:
            (length,) = struct.unpack_from(">i", buf, pos)
            end = pos + 4 + length
            if end > len(buf):
                break
            write(bytes(buf[pos:end]))
            pos = end
        del buf[:pos]


def serve(kind: str, port_q: Any, stop_ev: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        if kind == "raw":
            server = await loop.create_server(EchoProtocol, "127.0.0.1", 0)
            port_q.put(server.sockets[0].getsockname()[1])
        else:
            # --queue-wait: the broker's flow control on (waitTimeMillsInSendQueue's 200 ms)
            queue_wait = QueueWait({ECHO_CODE: 0.2}) if os.environ.get("BENCH_QUEUE_WAIT") else None
            srv = RemotingServer(RemotingServerConfig(host="127.0.0.1", queue_wait=queue_wait))
            srv.register(ECHO_CODE, lambda conn, req: RemotingCommand.response_to(req, body=req.body))
            await srv.start()
            port_q.put(srv.port)
        while not stop_ev.is_set():  # noqa: ASYNC110 - a multiprocessing event cannot be awaited
            await asyncio.sleep(0.1)

    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(main())


class RawClient(asyncio.Protocol):
    def __init__(self, inflight: int, deadline: float) -> None:
        self.inflight = inflight
        self.deadline = deadline
        self.frame = struct.pack(">i", len(BODY)) + BODY
        self.buf = bytearray()
        self.count = 0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        transport.writelines([self.frame] * self.inflight)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, n = 0, 0
        while len(buf) - pos >= 4:
            (length,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos - 4 < length:
                break
            pos += 4 + length
            n += 1
        del buf[:pos]
        self.count += n
        if time.perf_counter() < self.deadline:
            for _ in range(n):  # one write per request, as a request/response client does
                self.transport.write(self.frame)
        elif not self.done.done():
            self.done.set_result(None)


async def run_raw(port: int, inflight: int, seconds: float) -> float:
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    transport, proto = await loop.create_connection(
        lambda: RawClient(inflight, start + seconds), "127.0.0.1", port
    )
    await proto.done
    elapsed = time.perf_counter() - start
    transport.close()
    return proto.count / elapsed


async def run_rpc(port: int, inflight: int, seconds: float) -> float:
    client = RemotingClient()
    addr = f"127.0.0.1:{port}"
    await client.invoke(addr, RemotingCommand.request(ECHO_CODE, None, BODY))
    count = 0
    start = time.perf_counter()
    deadline = start + seconds

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await client.invoke(addr, RemotingCommand.request(ECHO_CODE, None, BODY))
            count += 1

    await asyncio.gather(*(worker() for _ in range(inflight)))
    elapsed = time.perf_counter() - start
    await client.close()
    return count / elapsed


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(kind: str, seconds: float) -> tuple[dict[str, float], dict[str, float]]:
    """(round trips/s, CPU µs per round trip of client and server) for 1 and 64 in flight."""
    ctx = mp.get_context("spawn")
    port_q, stop_ev = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=serve, args=(kind, port_q, stop_ev), daemon=True)
    proc.start()
    port = port_q.get(timeout=20)
    assert proc.pid is not None
    out: dict[str, float] = {}
    cpu: dict[str, float] = {}
    try:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            for inflight in (1, 64):
                fn = run_raw if kind == "raw" else run_rpc
                c0, s0 = time.process_time(), _cpu_seconds(proc.pid)
                rate = runner.run(fn(port, inflight, seconds))
                c1, s1 = time.process_time(), _cpu_seconds(proc.pid)
                out[f"inflight_{inflight}"] = round(rate)
                n = rate * seconds
                cpu[f"client_{inflight}"] = round((c1 - c0) * 1e6 / n, 2)
                cpu[f"server_{inflight}"] = round((s1 - s0) * 1e6 / n, 2)
    finally:
        stop_ev.set()
        proc.join(5)
    return out, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="alternating raw/rpc rounds")
    parser.add_argument("--queue-wait", action="store_true", help="the server's flow control on")
    args = parser.parse_args()
    if args.queue_wait:
        os.environ["BENCH_QUEUE_WAIT"] = "1"
    load_start = os.getloadavg()[0]
    runs: dict[str, list[tuple[dict[str, float], dict[str, float]]]] = {"raw": [], "rpc": []}
    ratios: list[float] = []
    for _ in range(max(1, args.rounds)):
        for kind in ("raw", "rpc"):
            runs[kind].append(measure(kind, args.seconds))
        ratios.append(runs["rpc"][-1][0]["inflight_64"] / runs["raw"][-1][0]["inflight_64"])

    def med(kind: str, part: int) -> dict[str, float]:
        return {
            key: round(statistics.median(run[part][key] for run in runs[kind]), 2 if part else None)
            for key in runs[kind][0][part]
        }

    summary = {
        "bench": "remoting_rpc",
        "body_bytes": len(BODY),
        "loop": "uvloop" if new_loop is not asyncio.new_event_loop else "asyncio",
        "rounds": len(ratios),
        "raw_echo_per_s": med("raw", 0),
        "rpc_per_s": med("rpc", 0),
        "raw_cpu_us_per_op": med("raw", 1),
        "rpc_cpu_us_per_op": med("rpc", 1),
        "rpc_vs_raw_at_64": round(statistics.median(ratios), 3),
        "rpc_vs_raw_at_64_per_round": [round(r, 3) for r in ratios],
        "loadavg_1min": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "target_ratio_at_64": 0.70,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
