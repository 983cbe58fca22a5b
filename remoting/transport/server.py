"""``RemotingServer``: the asyncio TCP server of the name server and the broker.

It owns the listening socket, the processor registry (:class:`ProcessorDispatcher`), one
housekeeping task (request timeouts for server-initiated requests, idle-connection closing)
and server-initiated requests over a client's own connection (``invoke``/``invoke_oneway``:
CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO...).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pocketmq.remoting.common.service import cancel_and_wait
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.frame import DEFAULT_MAX_FRAME_SIZE
from pocketmq.remoting.transport.connection import Handler, ProcessorDispatcher, RemotingConnection
from pocketmq.remoting.transport.hooks import BeforeHook, RPCHook
from pocketmq.remoting.transport.tls import PermissiveServer

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RemotingServerConfig:
    host: str = "0.0.0.0"
    port: int = 0
    #: ``serverChannelMaxIdleTimeSeconds``: close connections with no reads and writes this long.
    idle_timeout: float = 120.0
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    #: How often the housekeeping task runs (request timeouts, idle scan).
    sweep_interval: float = 0.1
    backlog: int = 1024
    #: TLS (``tls.server.mode``): None = plaintext; with ``tls_permissive`` TLS and plaintext
    #: share the port (first byte 0x16 = TLS), else TLS only
    ssl: ssl.SSLContext | None = None
    tls_permissive: bool = False


class RemotingServer:
    """Serve RocketMQ remoting requests on one port."""

    def __init__(
        self,
        config: RemotingServerConfig | None = None,
        *,
        hooks: list[RPCHook] | None = None,
        before_hooks: Sequence[BeforeHook] = (),
    ) -> None:
        self.config = config or RemotingServerConfig()
        self.dispatcher = ProcessorDispatcher(hooks=hooks)
        self.dispatcher.before_hooks.extend(before_hooks)
        self._server: asyncio.base_events.Server | PermissiveServer | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._opaque = itertools.count(1)
        self.port = 0

    # ---------------------------------------------------------------------- registration
    def register(self, code: int, handler: Handler) -> None:
        self.dispatcher.register(code, handler)

    def register_default(self, handler: Handler) -> None:
        self.dispatcher.default_handler = handler

    @property
    def connections(self) -> set[RemotingConnection]:
        return self.dispatcher.connections

    # ------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.config

        def factory() -> RemotingConnection:
            return RemotingConnection(self.dispatcher, max_frame_size=cfg.max_frame_size, loop=loop)

        if cfg.ssl is not None and cfg.tls_permissive:
            permissive = PermissiveServer(factory, cfg.ssl, sniff_timeout=cfg.idle_timeout)
            await permissive.start(cfg.host, cfg.port, cfg.backlog)
            self._server = permissive
        else:
            self._server = await loop.create_server(
                factory, cfg.host, cfg.port, backlog=cfg.backlog, reuse_address=True, ssl=cfg.ssl
            )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self._sweeper = asyncio.create_task(self._housekeeping(), name=f"remoting-server-{self.port}-sweeper")
        logger.info("remoting server listening on %s:%d", cfg.host, self.port)

    async def stop(self) -> None:
        await cancel_and_wait(self._sweeper)
        self._sweeper = None
        if self._server is not None:
            self._server.close()
            for conn in list(self.dispatcher.connections):
                conn.close()
            await self._server.wait_closed()
            self._server = None
        await self.dispatcher.close()

    async def _housekeeping(self) -> None:
        idle = self.config.idle_timeout
        interval = self.config.sweep_interval
        last_idle_scan = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(self.dispatcher.connections):
                if conn.pending:
                    conn.expire(now)
            if now - last_idle_scan >= min(1.0, idle / 4):
                last_idle_scan = now
                for conn in list(self.dispatcher.connections):
                    if now - max(conn.last_read, conn.last_write) > idle:
                        logger.info("closing idle connection %s", conn.remote_addr)
                        conn.close()

    # --------------------------------------------------------------- server-initiated requests
    def next_opaque(self) -> int:
        return next(self._opaque) & 0x7FFFFFFF

    async def invoke(
        self, conn: RemotingConnection, request: RemotingCommand, timeout: float
    ) -> RemotingCommand:
        """Send ``request`` to a client over its connection and await the reply.

        Raises:
            RemotingTimeoutError: no reply within ``timeout`` seconds.
            RemotingConnectError: the connection is closed or closes meanwhile.
        """
        request.opaque = self.next_opaque()
        return await conn.request(request, timeout)

    def invoke_oneway(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        request.opaque = self.next_opaque()
        conn.oneway(request)
