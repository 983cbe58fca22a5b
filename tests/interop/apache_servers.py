"""Apache RocketMQ 4.9.7's own name server and broker, run beside pocketmq as the oracle.

``make java-deps`` copies the servers' jars into ``.cache/apache/lib`` (tests/interop/apache/pom.xml);
``tests/interop/apache/home`` is their ``ROCKETMQ_HOME`` (the jars ship no logback files and the
servers exit without them). Both run with ``java`` directly: small heaps, the JDK 17 flags
MappedFile needs, settings only from ``-c`` files written under the test's directory (Apache's
``NamesrvStartup`` takes no other; the broker rewrites its file on ``updateBrokerConfig``).
A broker also needs its port − 2 (VIP channel) and + 1 (HA) free. Start to registered: ~10 s,
so tests start it once per module.

    with apache_servers(tmp_path / "apache") as a:       # or store_dir=... to open a given store
        a.namesrv_addr, a.broker_addr
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.route import TopicRouteData
from pocketmq.testing.procs import STORE_KEYS, ServerProcess, free_port
from pocketmq.testing.wire import Wire
from tests.interop.drivers import InteropUnavailable

REPO = Path(__file__).resolve().parents[2]
APACHE_LIB = REPO / ".cache" / "apache" / "lib"
APACHE_HOME = Path(__file__).resolve().parent / "apache" / "home"
VERSION = "4.9.7"
JVM = [
    "-Xms256m", "-Xmx1g", "-XX:MaxDirectMemorySize=512m", "-XX:+UseSerialGC",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED", "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED", "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
]  # fmt: skip


def apache_available() -> str:
    """The java executable; raises InteropUnavailable when it or the Apache jars are missing."""
    java = shutil.which("java")
    if java is None:
        raise InteropUnavailable("`java` is not on PATH: install a JDK (17) to run the Apache oracle")
    if not any(APACHE_LIB.glob(f"rocketmq-broker-{VERSION}.jar")):
        raise InteropUnavailable(f"Apache RocketMQ {VERSION} is not in {APACHE_LIB}: run `make java-deps`")
    return java


def _port_with_neighbours(taken: int) -> int:
    """A free port p with p − 2 and p + 1 free too (the broker's VIP and HA ports), none of
    them ``taken`` (the name server's, chosen before it binds it: once, the broker was given
    the same port, failed to bind, and the name server's open port passed for the broker's)."""
    for _ in range(200):
        p = free_port()
        if p < 1026 or taken in (p - 2, p, p + 1):
            continue
        socks = []
        try:
            for q in (p - 2, p + 1):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", q))
            return p
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port with free neighbours")


class ApacheServers:
    """One Apache name server and one master broker (``broker-a``) under ``root``."""

    def __init__(self, root: Path, store_dir: Path | None = None, broker_keys: dict[str, str] | None = None):
        java = apache_available()
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.store_dir = store_dir or root / "store"
        cp = f"{APACHE_LIB}/*"
        props = ["-Drocketmq.home.dir=" + str(APACHE_HOME), "-Duser.home=" + str(root)]
        ns_port = free_port()
        (root / "namesrv.conf").write_text(f"listenPort={ns_port}\n")
        self.namesrv = ServerProcess(
            [
                java,
                *JVM,
                *props,
                "-cp",
                cp,
                "org.apache.rocketmq.namesrv.NamesrvStartup",
                "-c",
                str(root / "namesrv.conf"),
            ],
            ns_port,
            root / "namesrv.log",
        )
        self._java, self._cp, self._props = java, cp, props
        self.broker_keys = dict(broker_keys or {})
        self.broker = self._broker_process()

    def _broker_process(self) -> ServerProcess:
        """The broker on fresh ports, with its ``-c`` file (rewritten for each try)."""
        self.broker_port = _port_with_neighbours(self.namesrv.port)
        keys = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": "broker-a",
            "brokerId": "0",
            "brokerIP1": "127.0.0.1",
            "listenPort": str(self.broker_port),
            "namesrvAddr": self.namesrv.addr,
            "storePathRootDir": str(self.store_dir),
            "storePathCommitLog": str(self.store_dir / "commitlog"),
            "autoCreateTopicEnable": "true",
            "flushDiskType": "ASYNC_FLUSH",
            "diskMaxUsedSpaceRatio": "99",
            **STORE_KEYS,
            **self.broker_keys,
        }
        conf = self.root / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
        main = "org.apache.rocketmq.broker.BrokerStartup"
        argv = [self._java, *JVM, *self._props, "-cp", self._cp, main, "-c", str(conf)]
        return ServerProcess(argv, self.broker_port, self.root / "broker.log")

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        return self.broker.addr

    def start(self, timeout: float = 60) -> ApacheServers:
        self.namesrv.start()
        for attempt in range(3):
            try:
                self.broker.start()
                break
            except RuntimeError:
                # the machine is shared: one of its three ports was taken before the JVM bound it
                if attempt == 2:
                    raise
                self.broker = self._broker_process()
        self.wait_route("TBW102", timeout)
        return self

    def wait_route(self, topic: str, timeout: float = 30) -> TopicRouteData:
        async def poll() -> TopicRouteData:
            wire = Wire(self.namesrv.addr)
            try:
                deadline = time.monotonic() + timeout
                while True:
                    r = await wire.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                    if r.code == ResponseCode.SUCCESS:
                        return TopicRouteData.decode(r.body or b"")
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"Apache name server has no route for {topic}")
                    await asyncio.sleep(0.1)
            finally:
                await wire.close()

        return asyncio.run(poll())

    def create_topics(self, topics: list[str], queues: int = 4) -> None:
        """UPDATE_AND_CREATE_TOPIC on the broker (it registers at once), then wait for the routes."""
        create_topics(self.broker_addr, topics, queues)
        for topic in topics:
            self.wait_route(topic)

    def stop(self) -> None:
        """Clean shutdown (SIGTERM: the broker flushes and writes its abort/checkpoint files)."""
        self.broker.stop(60)
        self.namesrv.stop()

    def diagnostics(self) -> str:
        return f"--- apache broker log:\n{self.broker.log_tail()}\n--- apache namesrv log:\n{self.namesrv.log_tail(20)}"


def create_topics(broker_addr: str, topics: list[str], queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC of each topic (``queues`` read and write queues) on any broker."""

    async def create() -> None:
        wire = Wire(broker_addr)
        try:
            for topic in topics:
                ext = {
                    "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                    "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
                    "topicSysFlag": "0", "order": "false",
                }  # fmt: skip
                r = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext, timeout=10)
                if r.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"create {topic}: {r.code} {r.remark}")
        finally:
            await wire.close()

    asyncio.run(create())


@contextlib.contextmanager
def apache_servers(
    root: Path, store_dir: Path | None = None, broker_keys: dict[str, str] | None = None
) -> Iterator[ApacheServers]:
    a = ApacheServers(root, store_dir, broker_keys)
    try:
        a.start()
        yield a
    finally:
        a.stop()


def run_quiet(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
