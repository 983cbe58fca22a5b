"""GET_ROUTEINFO_BY_TOPIC requests/s of the name server.

The name server (``NamesrvController``, uvloop when available) runs in a child process, so it has a
core of its own. 4 brokers register the same 1,000 topics (every route body then names 4 brokers
and 4 queue datas, ~1 KB). The client process keeps 64 requests in flight with ``RemotingClient``,
cycling through the topics, for:

* ``cached_v409``: route bodies cached per topic and JSON form (the default), request version 409
  (Java 4.9.8: quoted integer keys);
* ``cached_v333``: the same, version 333 (C++: fastjson's bare integer keys);
* ``uncached_v409``: cache disabled, every request rebuilds and re-encodes the route.

Client and server share a small machine, so wall-clock rates are noisy and often bound by the
client. The bench therefore also reads the server process's CPU time (``/proc/<pid>/stat``) and
reports ``server_routes_per_cpu_s``: what one fully busy server core sustains.

Prints one JSON object. Usage: ``python bench/namesrv_route.py [--seconds 3] [--topics 1000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import tempfile
import time
import zlib
from typing import Any

try:
    import uvloop

    new_loop: Any = uvloop.new_event_loop
except ImportError:  # pragma: no cover
    new_loop = asyncio.new_event_loop

from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig

BROKERS = 4
INFLIGHT = 64


def serve(cache_routes: bool, port_q: Any, stop_ev: Any) -> None:
    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            config = NamesrvConfig(
                listen_port=0,
                bind_address="127.0.0.1",
                kv_config_path=f"{tmp}/kvConfig.json",
                config_store_path=f"{tmp}/namesrv.properties",
            )
            ns = NamesrvController(config, fsync=False, cache_routes=cache_routes)
            await ns.start()
            port_q.put(ns.port)
            await asyncio.to_thread(stop_ev.wait)
            await ns.shutdown()

    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(main())


def register_request(index: int, topics: list[str]) -> RemotingCommand:
    table = {t: TopicConfig(t, 8, 8) for t in topics}
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper(table, DataVersion(int(time.time() * 1000), 1))
    ).encode()
    ext = {
        "brokerName": f"broker-{index}",
        "brokerAddr": f"10.0.0.{index + 1}:10911",
        "clusterName": "BenchCluster",
        "haServerAddr": f"10.0.0.{index + 1}:10912",
        "brokerId": "0",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (Linux); NaN elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_routes(
    addr: str, topics: list[str], version: int, seconds: float, server_pid: int
) -> tuple[float, int, float]:
    client = RemotingClient(RemotingClientConfig(request_timeout=10.0))
    # Registering over the measuring client's connection: it must stay open (a closed broker
    # connection unregisters the broker).
    for i in range(BROKERS):
        reply = await client.invoke(addr, register_request(i, topics))
        assert reply.code == 0, reply
    probe = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topics[0]})
    probe.version = version
    body_size = len((await client.invoke(addr, probe)).body or b"")
    count = 0
    failures = 0
    cpu_start = cpu_seconds(server_pid)
    start = time.perf_counter()
    deadline = start + seconds

    async def worker(offset: int) -> None:
        nonlocal count, failures
        n = len(topics)
        i = offset
        while time.perf_counter() < deadline:
            cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topics[i % n]})
            cmd.version = version
            reply = await client.invoke(addr, cmd)
            if reply.code != 0:
                failures += 1
            count += 1
            i += INFLIGHT

    await asyncio.gather(*(worker(k) for k in range(INFLIGHT)))
    elapsed = time.perf_counter() - start
    server_cpu = cpu_seconds(server_pid) - cpu_start
    await client.close()
    assert failures == 0, f"{failures} route lookups failed"
    return count / elapsed, body_size, count / server_cpu if server_cpu > 0 else float("nan")


def measure(
    cache_routes: bool, versions: list[int], topics: list[str], seconds: float
) -> dict[int, tuple[float, int, float]]:
    ctx = mp.get_context("spawn")
    port_q, stop_ev = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=serve, args=(cache_routes, port_q, stop_ev), daemon=True)
    proc.start()
    port = port_q.get(timeout=30)
    out: dict[int, tuple[float, int, float]] = {}
    assert proc.pid is not None
    try:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            for version in versions:
                out[version] = runner.run(run_routes(f"127.0.0.1:{port}", topics, version, seconds, proc.pid))
    finally:
        stop_ev.set()
        proc.join(10)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--topics", type=int, default=1000)
    args = parser.parse_args()
    topics = [f"BenchTopic_{i:05d}" for i in range(args.topics)]
    cached = measure(True, [409, 333], topics, args.seconds)
    uncached = measure(False, [409], topics, args.seconds)
    summary = {
        "bench": "namesrv_route",
        "loop": "uvloop" if new_loop is not asyncio.new_event_loop else "asyncio",
        "topics": args.topics,
        "brokers": BROKERS,
        "inflight": INFLIGHT,
        "route_body_bytes": {"v409": cached[409][1], "v333": cached[333][1]},
        "routes_per_s": {
            "cached_v409": round(cached[409][0]),
            "cached_v333": round(cached[333][0]),
            "uncached_v409": round(uncached[409][0]),
        },
        "server_routes_per_cpu_s": {
            "cached_v409": round(cached[409][2]),
            "cached_v333": round(cached[333][2]),
            "uncached_v409": round(uncached[409][2]),
        },
        "target_routes_per_s": 50_000,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
