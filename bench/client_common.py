"""Shared launcher for the client benchmarks: a real ``mqnamesrv`` + ``mqbroker`` (separate
processes, loopback, temp store) and a runner for ``pocketmq.client.benchmark`` commands.

Not a test: prints what it measures. Used by ``bench/client_*.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

BIN = os.path.dirname(sys.executable)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open within {timeout}s")


@dataclass
class Cluster:
    namesrv: str
    brokers: list[subprocess.Popen[bytes]]
    namesrv_proc: subprocess.Popen[bytes]
    broker_addrs: list[str]

    @property
    def broker_pids(self) -> list[int]:
        return [p.pid for p in self.brokers]


@contextlib.contextmanager
def cluster(
    flush: str = "ASYNC_FLUSH", brokers: int = 1, queues: int = 8, sets: tuple[str, ...] = (),
    ns_sets: tuple[str, ...] = (), home_files: dict[str, str] | None = None,
) -> Iterator[Cluster]:  # fmt: skip
    """Name server + ``brokers`` brokers; ``sets`` are extra broker ``key=value`` settings,
    ``ns_sets`` the name server's; ``home_files`` (relative path → text) are written under each
    broker's ``rocketmqHome`` first (e.g. ``conf/plain_acl.yml``)."""
    tmp = tempfile.mkdtemp(prefix="pocketmq-bench-")
    log = open(os.path.join(tmp, "servers.log"), "wb")  # noqa: SIM115
    ns_port = free_port()
    ns = subprocess.Popen(
        [f"{BIN}/mqnamesrv", "--set", f"listenPort={ns_port}", "--set", f"kvConfigPath={tmp}/kv.json",
         "--set", f"configStorePath={tmp}/namesrv.properties", "--log-level", "WARNING",
         *(arg for kv in ns_sets for arg in ("--set", kv))],
        stdout=log, stderr=log,
    )  # fmt: skip
    procs: list[subprocess.Popen[bytes]] = []
    addrs: list[str] = []
    try:
        _wait_port(ns_port)
        for i in range(brokers):
            port = free_port()
            root = os.path.join(tmp, f"broker-{i}")
            for rel, text in (home_files or {}).items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            procs.append(
                subprocess.Popen(
                    [
                        f"{BIN}/mqbroker",
                        "-n",
                        f"127.0.0.1:{ns_port}",
                        "--set",
                        f"brokerName=broker-{chr(97 + i)}",
                        "--set",
                        f"listenPort={port}",
                        "--set",
                        "brokerIP1=127.0.0.1",
                        "--set",
                        f"storePathRootDir={root}",
                        "--set",
                        f"rocketmqHome={root}",
                        "--set",
                        f"flushDiskType={flush}",
                        "--set",
                        f"defaultTopicQueueNums={queues}",
                        "--set",
                        "fastListenEnable=false",
                        *(arg for kv in sets for arg in ("--set", kv)),
                        "--log-level",
                        "WARNING",
                    ],
                    stdout=log,
                    stderr=log,
                )
            )
            _wait_port(port)
            addrs.append(f"127.0.0.1:{port}")
        time.sleep(1.0)  # first registration with the name server
        yield Cluster(f"127.0.0.1:{ns_port}", procs, ns, addrs)
    finally:
        for p in [*procs, ns]:
            p.terminate()
        for p in [*procs, ns]:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
        # Each run preallocates ~1.5 GB of CommitLog/ConsumeQueue files: never leave them behind
        # (set POCKETMQ_BENCH_KEEP=1 to inspect a run's store and servers.log).
        if not os.environ.get("POCKETMQ_BENCH_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


def run_bench(
    args: list[str], c: Cluster, timeout: float = 600, env: dict[str, str] | None = None
) -> dict[str, object]:
    """Run ``pocketmq.client.benchmark`` in its own process (``env`` added to the environment);
    return its JSON summary."""
    pids: list[str] = []
    for pid in c.broker_pids:
        pids += ["--broker-pid", str(pid)]
    cmd = [sys.executable, "-m", "pocketmq.client.benchmark", *args[:1], "-n", c.namesrv, *pids, *args[1:]]
    out = subprocess.run(
        cmd, capture_output=True, timeout=timeout, check=False, env={**os.environ, **(env or {})}
    )
    sys.stderr.write(out.stderr.decode()[-2000:])
    lines = [ln for ln in out.stdout.decode().splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"benchmark {args} failed (exit {out.returncode})")
    return json.loads(lines[-1])  # type: ignore[no-any-return]
