"""In-process pocketmq clusters for tests (ours and users'): a name server + broker(s) on
ephemeral ports of 127.0.0.1 with stores in a temporary directory.

As an async context manager::

    from pocketmq.testing import cluster

    async with cluster() as c:                  # 1 name server + 1 broker ("broker-a")
        c.namesrv_addr                          # "127.0.0.1:<port>" for producers/consumers
        c.brokers[0].broker_addr                # "127.0.0.1:<port>"
        await c.create_topic("Orders", queues=8)
        await c.restart_broker(0)               # clean restart on the same store

From blocking code (a driver that waits on subprocesses, Spark), on a loop thread of its own::

    from pocketmq.testing import cluster_in_thread

    with cluster_in_thread() as t:              # the same arguments as cluster()
        t.cluster.namesrv_addr
        t.run(t.cluster.create_topic("Orders"))  # run a coroutine on the cluster's loop

As a pytest fixture (``pytest-asyncio``): put ``pytest_plugins = ["pocketmq.testing.plugin"]``
in a ``conftest.py`` and ask for ``pocketmq_cluster``; parametrize it with
``@pytest.mark.pocketmq_cluster(brokers=2, broker_config={...})``.

Everything is real: the servers speak the wire protocol on sockets and the store writes real
files (small segments by default so tests stay fast; pass ``store_config`` to change them).
Nothing is fsynced unless ``fsync=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.controller import BrokerController
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.controller import NamesrvController
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.route import PermName, TopicConfig
from pocketmq.store.config import MessageStoreConfig

__all__ = ["TEST_STORE_CONFIG", "Cluster", "ThreadedCluster", "cluster", "cluster_in_thread"]

T = TypeVar("T")

#: Store settings for tests: 4 MiB CommitLog segments, 10k-unit ConsumeQueue files, small index.
TEST_STORE_CONFIG: dict[str, Any] = {
    "mappedFileSizeCommitLog": 4 << 20,
    "mappedFileSizeConsumeQueue": 20 * 10_000,
    "maxHashSlotNum": 10_000,
    "maxIndexNum": 40_000,
}


class _RequestRecorder:
    """An RPC hook that keeps the requests it sees (:meth:`Cluster.record_requests`)."""

    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        self.requests.append(request)

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        pass


def _broker_name(i: int) -> str:
    return f"broker-{chr(ord('a') + i)}" if i < 26 else f"broker-{i}"


@dataclass
class Cluster:
    """A running name server and its brokers (all in this event loop)."""

    root: str
    namesrv: NamesrvController
    brokers: list[BrokerController] = field(default_factory=list)
    fsync: bool = False
    broker_config: dict[str, Any] = field(default_factory=dict)
    store_config: dict[str, Any] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def broker_addrs(self) -> list[str]:
        return [b.broker_addr for b in self.brokers]

    def _config(
        self,
        i: int,
        overrides: Mapping[str, Any] | None = None,
        store_overrides: Mapping[str, Any] | None = None,
    ) -> BrokerConfig:
        name = _broker_name(i)
        store = {
            **TEST_STORE_CONFIG, **self.store_config, **(store_overrides or {}),
            "storePathRootDir": os.path.join(self.root, name),
        }  # fmt: skip
        data: dict[str, Any] = {
            "brokerName": name,
            "brokerIP1": "127.0.0.1",
            "listenHost": "127.0.0.1",
            "listenPort": 0,
            "namesrvAddr": self.namesrv_addr,
            **self.broker_config,
            **(overrides or {}),
            "store": MessageStoreConfig.model_validate(store),
        }
        return BrokerConfig.model_validate(data)

    async def add_broker(
        self, overrides: Mapping[str, Any] | None = None, store_overrides: Mapping[str, Any] | None = None
    ) -> BrokerController:
        """Start one more broker (named broker-a, broker-b, ... unless ``overrides`` names it, as
        a slave does: ``{"brokerName": "broker-a", "brokerId": 1}`` with ``store_overrides``
        ``{"brokerRole": "SLAVE"}``; its store is still under the next name) and wait for its
        registration."""
        broker = BrokerController(
            self._config(len(self.brokers), overrides, store_overrides), fsync=self.fsync
        )
        await broker.start()
        self.brokers.append(broker)
        return broker

    async def stop_broker(self, i: int) -> None:
        """Clean shutdown of broker ``i`` (it unregisters; its store stays on disk)."""
        await self.brokers[i].shutdown()

    async def restart_broker(self, i: int) -> BrokerController:
        """Clean shutdown and restart of broker ``i`` on the same store (a new port)."""
        old = self.brokers[i]
        await old.shutdown()
        broker = BrokerController(old.config.model_copy(update={"listen_port": 0}), fsync=self.fsync)
        await broker.start()
        self.brokers[i] = broker
        return broker

    async def create_topic(
        self, topic: str, queues: int = 8, *, perm: int = PermName.DEFAULT, order: bool = False
    ) -> None:
        """Create ``topic`` with ``queues`` read/write queues on every broker and register it."""
        for broker in self.brokers:
            broker.topic_config_manager.update_topic_config(
                TopicConfig(topic, queues, queues, perm, order=order)
            )
            await broker.register_broker_all()

    def record_requests(self) -> list[RemotingCommand]:
        """Record every request the running brokers receive from now on, in arrival order.

        An RPC hook on each broker's servers (main and fast port) appends the requests to the
        returned list; a broker started or restarted later is not recorded.
        """
        recorder = _RequestRecorder()
        for broker in self.brokers:
            for server in (broker.remoting_server, broker.fast_remoting_server):
                if server is not None:
                    server.dispatcher.hooks.append(recorder)
        return recorder.requests

    async def close(self) -> None:
        for broker in reversed(self.brokers):
            await broker.shutdown()
        await self.namesrv.shutdown()


@contextlib.asynccontextmanager
async def cluster(
    root: str | os.PathLike[str] | None = None,
    *,
    brokers: int = 1,
    broker_config: Mapping[str, Any] | None = None,
    store_config: Mapping[str, Any] | None = None,
    namesrv_config: Mapping[str, Any] | None = None,
    fsync: bool = False,
) -> AsyncIterator[Cluster]:
    """Start a name server and ``brokers`` brokers; stop them (and delete a temp root) on exit.

    Args:
        root: directory for the stores and the name server's files; a fresh temp dir if None
            (deleted afterwards; a given directory is kept).
        broker_config: RocketMQ broker keys applied to every broker (``{"autoCreateTopicEnable": False}``).
        store_config: store keys on top of :data:`TEST_STORE_CONFIG`.
        namesrv_config: name server keys.
        fsync: really sync files (slower; for durability tests).

    Raises:
        OSError: a port or a file could not be used.
    """
    own = root is None
    path = tempfile.mkdtemp(prefix="pocketmq-test-") if own else os.fspath(root)  # type: ignore[arg-type]
    ns_dir = os.path.join(path, "namesrv")
    os.makedirs(ns_dir, exist_ok=True)
    ns_cfg = NamesrvConfig.model_validate(
        {
            "listenPort": 0,
            "bindAddress": "127.0.0.1",
            "kvConfigPath": os.path.join(ns_dir, "kvConfig.json"),
            "configStorePath": os.path.join(ns_dir, "namesrv.properties"),
            **(namesrv_config or {}),
        }
    )
    namesrv = NamesrvController(ns_cfg, fsync=fsync)
    c = Cluster(
        path,
        namesrv,
        fsync=fsync,
        broker_config=dict(broker_config or {}),
        store_config=dict(store_config or {}),
    )
    try:
        await namesrv.start()
        for _ in range(brokers):
            await c.add_broker()
        yield c
    finally:
        await c.close()
        if own:
            shutil.rmtree(path, ignore_errors=True)


class ThreadedCluster:
    """A :func:`cluster` served by an event loop in a background thread (:func:`cluster_in_thread`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, c: Cluster) -> None:
        self.loop = loop
        self.cluster = c

    @property
    def namesrv_addr(self) -> str:
        return self.cluster.namesrv_addr

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run ``coro`` on the cluster's loop and wait for its result (at most ``timeout`` s)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


@contextlib.contextmanager
def cluster_in_thread(
    root: str | os.PathLike[str] | None = None, **options: Any
) -> Iterator[ThreadedCluster]:
    """:func:`cluster` (the same arguments) on a loop thread of its own, for blocking callers.

    Raises:
        OSError: a port or a file could not be used.
        TimeoutError: the cluster did not start or stop within 60 s.
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="pocketmq-test-cluster", daemon=True)
    thread.start()
    manager = cluster(root, **options)
    try:
        c = asyncio.run_coroutine_threadsafe(manager.__aenter__(), loop).result(60)
        try:
            yield ThreadedCluster(loop, c)
        finally:
            asyncio.run_coroutine_threadsafe(manager.__aexit__(None, None, None), loop).result(60)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
