"""``NamesrvController``: the name server's composition root.

Build order: config → KV table → route tables → processor → ``RemotingServer`` → liveness
service. ``start`` loads ``kvConfig.json`` (a corrupt file *and* backup is a start-up error),
binds the port, then starts the expiry scan; ``shutdown`` stops the scan, closes the server and
its connections, and writes any KV or config change not yet on disk.

In-process use (tests, ``pocketmq.testing``, ``pocketmq up``)::

    config = NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                           kv_config_path=str(tmp / "kvConfig.json"),
                           config_store_path=str(tmp / "namesrv.properties"))
    ns = NamesrvController(config)          # optional: clock=FakeClock(), fsync=False
    await ns.start()                         # binds; ns.port is the real port, ns.addr "127.0.0.1:<port>"
    ...
    await ns.shutdown()                      # idempotent

``NamesrvController(config, *, clock=SYSTEM_CLOCK, fsync=True, cache_routes=True)``:

* ``config``: a :class:`NamesrvConfig`; ``listenPort=0`` picks an ephemeral port. Point
  ``kvConfigPath`` *and* ``configStorePath`` at a temporary directory in tests: the defaults live
  under ``~/namesrv`` (UPDATE_NAMESRV_CONFIG writes the latter).
* ``clock``: the liveness time source (a ``FakeClock`` lets tests expire brokers without
  sleeping; the scan itself still runs every ``scanNotActiveBrokerInterval`` ms of real time).
* ``fsync``: sync KV writes to disk (tests may turn it off for speed).
* ``cache_routes``: cache encoded route bodies (only the benchmark turns it off).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.housekeeping import BrokerLivenessService, ChannelCloseHook
from pocketmq.namesrv.kv_config import KVConfigManager
from pocketmq.namesrv.metrics import NamesrvMetrics
from pocketmq.namesrv.processor import NamesrvProcessor
from pocketmq.namesrv.route_info import RouteInfoManager
from pocketmq.remoting.common import persist
from pocketmq.remoting.common.clock import SYSTEM_CLOCK, Clock
from pocketmq.remoting.common.config import render_config
from pocketmq.remoting.common.metrics_http import PromExporter, start_exporter
from pocketmq.remoting.common.metrics_http import preload as preload_exporter
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.limits import server_limits
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig

logger = logging.getLogger(__name__)

__all__ = ["NamesrvController", "SnapshotPersister"]

_ANY_HOST = frozenset({"", "0.0.0.0", "::", "[::]"})


class SnapshotPersister:
    """Serialised, coalescing writes of one small file (``kvConfig.json``, the config store).

    :meth:`mark_dirty` after each change; ``await`` :meth:`flush` to have a snapshot containing
    every change made so far on disk. Snapshots are taken on the loop (consistent), written in the
    default executor one at a time (never out of order), and a flush whose change was already
    covered by a later snapshot returns without writing again. A write already running in a thread
    cannot be stopped, so a cancelled flush leaves it running and the next flush waits for it
    (two writers would share the ``.tmp`` file).

    Args:
        encode: takes the snapshot (on the loop).
        write: writes it atomically (blocking; runs in the executor).
    """

    def __init__(self, encode: Callable[[], bytes], write: Callable[[bytes], None]) -> None:
        self._encode = encode
        self._write = write
        self._lock = asyncio.Lock()
        self._generation = 0
        self._written = 0
        self._inflight: asyncio.Future[None] | None = None

    def mark_dirty(self) -> None:
        self._generation += 1

    @property
    def dirty(self) -> bool:
        return self._written < self._generation

    async def flush(self) -> None:
        """Raises: OSError (the previous file stays intact)."""
        wanted = self._generation
        async with self._lock:
            if self._inflight is not None and not self._inflight.done():
                await asyncio.wait({self._inflight})  # a cancelled flush's write, still running
            if self._written >= wanted:
                return
            generation = self._generation
            data = self._encode()
            self._inflight = asyncio.get_running_loop().run_in_executor(None, self._write, data)
            await asyncio.shield(self._inflight)
            self._written = generation


class NamesrvController:
    """One name server: tables, processors, server and liveness service (see the module doc)."""

    def __init__(
        self,
        config: NamesrvConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        fsync: bool = True,
        cache_routes: bool = True,
    ) -> None:
        self._config = config
        self.clock = clock
        self.kv = KVConfigManager(config.kv_config_path or None, fsync=fsync)
        self.kv_persister = SnapshotPersister(self.kv.encode, self.kv.write)
        self.config_persister = SnapshotPersister(self._encode_config, self._write_config)
        self.route_info = RouteInfoManager(config, clock=clock, kv=self.kv)
        self.processor = NamesrvProcessor(
            self.route_info, self.kv, self, self.kv_persister, cache_routes=cache_routes
        )
        idle = config.server_channel_max_idle_time_seconds
        self.server = RemotingServer(
            RemotingServerConfig(
                host=config.bind_address,
                port=config.listen_port,
                idle_timeout=float(idle) if idle > 0 else float("inf"),
                backlog=config.server_socket_backlog,
                snd_buf=config.server_socket_snd_buf_size,
                rcv_buf=config.server_socket_rcv_buf_size,
                # tls.server.mode (a missing certificate is a TlsConfigError naming the key)
                ssl=config.server_context(),
                tls_permissive=config.tls_server_mode == "permissive",
                **server_limits(config),
            )
        )
        for code, handler in self.processor.handlers().items():
            self.server.register(code, handler)
        self.server.dispatcher.on_connect.append(self._tune_connection)
        self.server.dispatcher.on_close.append(
            ChannelCloseHook(self.route_info, self.processor.invalidate_routes)
        )
        self.liveness = BrokerLivenessService(self.route_info, self.processor.invalidate_routes)
        self.port = 0
        #: the Prometheus exporter when ``metricsExporterType=PROM`` (started by ``start``)
        self.metrics_exporter: PromExporter | None = None
        self._started = False
        self._stopped = False

    # -- config (ConfigOwner) ----------------------------------------------------------------

    @property
    def config(self) -> NamesrvConfig:
        return self._config

    def set_config(self, config: NamesrvConfig) -> None:
        """Make ``config`` effective at once (UPDATE_NAMESRV_CONFIG); :meth:`persist_config` saves it.

        Keys read only at start-up (``listenPort``, ``bindAddress``, ``kvConfigPath``) take effect
        at the next start, as in RocketMQ.
        """
        self._config = config
        self.route_info.config = config
        self.liveness.refresh_interval()
        self.processor.invalidate_routes()
        self.config_persister.mark_dirty()

    async def persist_config(self) -> None:
        """Write the current config to ``configStorePath`` (properties text).

        Raises:
            OSError: the file could not be written (the config is in effect regardless).
        """
        await self.config_persister.flush()

    def _encode_config(self) -> bytes:
        return render_config(self._config).encode("utf-8")

    def _write_config(self, data: bytes) -> None:
        if self._config.config_store_path:
            persist.atomic_write_bytes(self._config.config_store_path, data)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def addr(self) -> str:
        """``host:port`` clients should use (``127.0.0.1`` when bound to every interface)."""
        host = self._config.bind_address
        if host in _ANY_HOST:
            host = "127.0.0.1"
        elif ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"{host}:{self.port}"

    async def start(self) -> None:
        """Load the KV table, bind the port, start the liveness scan.

        Raises:
            RuntimeError: already started.
            pocketmq.remoting.common.persist.PersistCorruptError: KV file and backup unreadable.
            OSError: the port cannot be bound.
        """
        if self._started:
            raise RuntimeError("name server already started")
        self._started = True
        loop = asyncio.get_running_loop()
        loaded = await loop.run_in_executor(None, self.kv.load)
        if loaded:
            logger.info("kv config loaded path=%s namespaces=%d", self.kv.path, len(self.kv.namespaces()))
        cfg = self._config
        if cfg.metrics_exporter_type == "PROM":
            preload_exporter()  # (its imports, not on the loop once clients can connect)
        await self.server.start()
        self.port = self.server.port
        self.liveness.start()
        if cfg.metrics_exporter_type == "PROM":
            try:
                await self._start_metrics()
            except BaseException:
                await self.liveness.stop()
                await self.server.stop()
                raise
        logger.info(
            "name server started addr=%s bind=%s scan_interval_ms=%d broker_expiry_ms=%d",
            self.addr,
            cfg.bind_address,
            cfg.scan_not_active_broker_interval,
            cfg.broker_channel_expired_time,
        )

    async def shutdown(self) -> None:
        """Stop serving and write pending KV changes; safe to call twice or before ``start``."""
        if self._stopped or not self._started:
            self._stopped = True
            return
        self._stopped = True
        await self.liveness.stop()
        if self.metrics_exporter is not None:
            await self.metrics_exporter.stop()
        await self.server.stop()
        for what, persister in (("kv config", self.kv_persister), ("config", self.config_persister)):
            if persister.dirty:
                try:
                    await persister.flush()
                except OSError as exc:
                    logger.error("%s not persisted at shutdown error=%s", what, exc)
        logger.info("name server stopped addr=%s", self.addr)

    async def _start_metrics(self) -> None:
        cfg = self._config
        collector = NamesrvMetrics(
            routes=self.route_info,
            addr=lambda: self.addr,
            connections=lambda: len(self.server.connections),
            monotonic_ms=self.clock.monotonic_ms,
        )
        self.metrics_exporter = await start_exporter(
            collector,
            host=cfg.metrics_prom_exporter_host,
            port=cfg.metrics_prom_exporter_port,
            label=cfg.metrics_label,
        )

    # -- connections -------------------------------------------------------------------------

    def _tune_connection(self, conn: RemotingConnection) -> None:
        """Apply the write-buffer water marks of the config to an accepted connection."""
        cfg = self._config
        transport = conn.transport
        if transport is None:
            return
        if cfg.write_buffer_high_water_mark:
            low = cfg.write_buffer_low_water_mark or None
            transport.set_write_buffer_limits(high=cfg.write_buffer_high_water_mark, low=low)
