"""Real ``mqnamesrv`` / ``mqbroker`` processes for multi-process tests (interop, ``kill -9``).

Each server runs ``python -m pocketmq.namesrv`` / ``python -m pocketmq.broker`` in its own
session on a free 127.0.0.1 port with its files under a test directory. ``kill9`` really sends
SIGKILL; ``stop`` sends SIGTERM and waits for the clean shutdown. Every process started here is
killed at teardown (by pid, only our own)::

    from pocketmq.testing.procs import servers

    with servers(tmp_path, topics={"Orders": 8}) as s:      # topics pre-created in topics.json
        s.namesrv.addr, s.broker.addr
        s.broker.kill9(); s.restart_broker()                # same store, same port
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.route import TopicRouteData
from pocketmq.testing.wire import Wire

STORE_KEYS = {
    "mappedFileSizeCommitLog": str(16 << 20),
    "mappedFileSizeConsumeQueue": str(20 * 100_000),
    "maxHashSlotNum": "100000",
    "maxIndexNum": "400000",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"port {port} did not open") from None
            time.sleep(0.05)


class ServerProcess:
    def __init__(self, argv: list[str], port: int, log: Path) -> None:
        self.argv = argv
        self.port = port
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        out = open(self.log, "ab")  # noqa: SIM115 - handed to the child, closed by it
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        wait_port(self.port, self.proc)
        return self

    def kill9(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)

    def stop(self, timeout: float = 30.0) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        return proc.returncode

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Servers:
    """One name server process and one broker process (``broker-a``) under ``root``."""

    def __init__(self, root: Path, broker_keys: dict[str, str] | None = None) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.broker_keys = dict(broker_keys or {})
        ns_port = free_port()
        ns_dir = root / "namesrv"
        ns_argv = [sys.executable, "-m", "pocketmq.namesrv", "--set", f"listenPort={ns_port}"]
        ns_argv += ["--set", "bindAddress=127.0.0.1", "--set", f"kvConfigPath={ns_dir / 'kv.json'}"]
        ns_argv += ["--set", f"configStorePath={ns_dir / 'namesrv.properties'}"]
        self.namesrv = ServerProcess(ns_argv, ns_port, root / "namesrv.log")
        # (neither binds its port before it starts: two free_port calls can return the same one)
        self.broker_port = free_port()
        while self.broker_port == ns_port:
            self.broker_port = free_port()
        self.broker = self._broker_process()

    @property
    def store_dir(self) -> Path:
        return self.root / "broker-a"

    def _broker_process(self) -> ServerProcess:
        keys = {
            "brokerName": "broker-a",
            "listenPort": str(self.broker_port),
            "listenHost": "127.0.0.1",
            "brokerIP1": "127.0.0.1",
            "fastListenEnable": "false",
            # the HA port on a free port the broker picks (listenPort + 1 may be any socket's
            # ephemeral port by now); the name server advertises the bound one
            "haListenPort": "0",
            "namesrvAddr": self.namesrv.addr,
            "storePathRootDir": str(self.store_dir),
            **STORE_KEYS,
            **self.broker_keys,
        }
        argv = [sys.executable, "-m", "pocketmq.broker"]
        for k, v in keys.items():
            argv += ["--set", f"{k}={v}"]
        return ServerProcess(argv, self.broker_port, self.root / "broker.log")

    def precreate_topic(self, topic: str, queues: int) -> None:
        """Write ``topic`` into the broker's topics.json (before it starts), like a created topic."""
        path = self.store_dir / "config" / "topics.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {"dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": {}}
        if path.exists():
            data = json.loads(path.read_text())
        data["topicConfigTable"][topic] = {
            "order": False, "perm": 6, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
            "topicName": topic, "topicSysFlag": 0, "writeQueueNums": queues,
        }  # fmt: skip
        path.write_text(json.dumps(data))

    def start(self) -> Servers:
        self.namesrv.start()
        self.broker.start()
        self.wait_route("TBW102")
        return self

    def restart_broker(self) -> None:
        self.broker = self._broker_process()
        self.broker.start()
        self.wait_route("TBW102")

    def wait_route(self, topic: str, timeout: float = 30.0) -> TopicRouteData:
        async def poll() -> TopicRouteData:
            wire = Wire(self.namesrv.addr)
            try:
                deadline = time.monotonic() + timeout
                while True:
                    r = await wire.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                    if r.code == ResponseCode.SUCCESS:
                        rd = TopicRouteData.decode(r.body or b"")
                        if any(b.broker_addrs.get(0) == self.broker.addr for b in rd.broker_datas):
                            return rd
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no route for {topic} via {self.broker.addr}")
                    await asyncio.sleep(0.05)
            finally:
                await wire.close()

        return asyncio.run(poll())

    def stop(self) -> None:
        self.broker.stop()
        self.namesrv.stop()

    def diagnostics(self) -> str:
        return f"--- broker log:\n{self.broker.log_tail()}\n--- namesrv log:\n{self.namesrv.log_tail(20)}"


@contextlib.contextmanager
def servers(
    root: Path, broker_keys: dict[str, str] | None = None, topics: dict[str, int] | None = None
) -> Iterator[Servers]:
    s = Servers(root, broker_keys)
    for topic, queues in (topics or {}).items():
        s.precreate_topic(topic, queues)
    try:
        s.start()
        yield s
    finally:
        s.stop()
