"""``RemotingServer``: the asyncio TCP server of the name server and the broker.

It owns the listening socket, the processor registry (:class:`ProcessorDispatcher`), one
housekeeping task (request timeouts for server-initiated requests, idle-connection closing)
and server-initiated requests over a client's own connection (``invoke``/``invoke_oneway``:
CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO...).
The limits one peer runs into (header size, frame completion, partial-frame memory, connection
count, unread replies) are described in :mod:`pocketmq.remoting.transport.limits`.
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
from pocketmq.remoting.protocol.errors import RemoteProtocolError
from pocketmq.remoting.protocol.frame import DEFAULT_MAX_FRAME_SIZE, DEFAULT_MAX_HEADER_SIZE
from pocketmq.remoting.transport.connection import Handler, RemotingConnection
from pocketmq.remoting.transport.dispatch import ProcessorDispatcher
from pocketmq.remoting.transport.hooks import BeforeHook, ReadEnd, RPCHook
from pocketmq.remoting.transport.limits import (
    DEFAULT_FRAME_TIMEOUT,
    DEFAULT_PARTIAL_FRAME_BUDGET,
    FD_RESERVE,
    PartialFrameBudget,
    QueueWait,
    RateLimitedLog,
    TurnShare,
    log_accept_errors,
    max_connections,
    probe_fds,
    reserve_fd_table,
)
from pocketmq.remoting.transport.sockopts import tune_listeners
from pocketmq.remoting.transport.tls import PermissiveServer

logger = logging.getLogger(__name__)
_limited_log = RateLimitedLog(logger)
#: connections the sweeper checks per sweep at most; a larger set takes more sweeps than the
#: scan period (10,000 idle connections timing out together cost one ~0.1 s turn otherwise)
_SCAN_CHUNK = 512
#: connections the sweeper closes per loop turn at most, then it yields a turn (their
#: ``connection_lost`` callbacks run, other peers are served) and goes on: a close with its
#: ``connection_lost`` costs ~40 µs (~55 µs with a log line each), so 500 closes in one sweep
#: held the loop ~10 ms (T16: 10,000 idle connections timing out within 1.5 s, healthy sends
#: up to 15 ms); 32 a turn still made 2-3 ms turns (the kernel's part of a close, ~20-35 µs, runs
#: in the loop's C code, unseen by a Python profiler). A request arriving meanwhile waits for the
#: rest of the turn it lands in: with 16 a turn (~300 µs of CPU each, median) 0.56-0.71 % of
#: arrivals waited over 250 µs of the loop's CPU, with 4 a turn 0.18-0.24 %, for 8-25 % more loop
#: CPU over the 10,000 closes (~2-6 µs a close: a loop turn each 4; two runs each of the running
#: broker under T16). Turns of 1-5 ms are the loop thread preempted (ksoftirqd, other processes),
#: not work: no closes-per-turn count shortens those
_CLOSES_PER_TURN = 4
#: addresses named in the one log line of a sweep's idle closes
_NAMED = 3


def _log_idle_closes(addrs: list[str], idle: float) -> None:
    """One line per sweep for its idle closes (a line each cost ~15 µs of a ~50 µs close, and
    10,000 idle connections timing out together wrote 10,000 lines)."""
    if len(addrs) == 1:
        logger.info("closing idle connection %s", addrs[0])
    elif addrs:
        logger.info(
            "closed %d idle connections (no reads or writes for %.0f s, serverChannelMaxIdleTimeSeconds): %s%s",
            len(addrs),
            idle,
            ", ".join(addrs[:_NAMED]),
            ", ..." if len(addrs) > _NAMED else "",
        )


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
    #: ``serverSocketSndBufSize`` / ``serverSocketRcvBufSize`` (0: the kernel's autotuned default),
    #: set on the listening socket so accepted connections start with them (sockopts.py)
    snd_buf: int = 0
    rcv_buf: int = 0
    #: TLS (``tls.server.mode``): None = plaintext; with ``tls_permissive`` TLS and plaintext
    #: share the port (first byte 0x16 = TLS), else TLS only
    ssl: ssl.SSLContext | None = None
    tls_permissive: bool = False
    #: ``serverHeaderMaxLength``
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE
    #: ``serverFrameCompletionTimeoutSeconds``: a frame begun and not completed this long closes
    #: the connection (0: never)
    frame_timeout: float = DEFAULT_FRAME_TIMEOUT
    #: ``serverPartialFrameMemoryMax``: bytes of partial frames across all connections
    partial_frame_budget: int = DEFAULT_PARTIAL_FRAME_BUDGET
    #: ``serverMaxConnections`` (0: the open-file limit minus a reserve, ``limits.max_connections``)
    max_connections: int = 0
    #: ``writeBufferHighWaterMark`` / ``writeBufferLowWaterMark`` (0: asyncio's 64 KiB / 16 KiB)
    write_buffer_high: int = 0
    write_buffer_low: int = 0
    #: flow control: how long a request may wait between its read and its handling, by code
    #: (the broker's ``waitTimeMillsIn*Queue``); None: no limit (the name server, clients)
    queue_wait: QueueWait | None = None


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
        self.partial_budget = PartialFrameBudget(self.config.partial_frame_budget)
        self.max_connections = max_connections(self.config.max_connections)
        #: connections with server-initiated requests awaiting replies (their deadlines are
        #: checked every sweep; the others' never need to be)
        self._requesting: set[RemotingConnection] = set()
        #: work run at the end of each read of this server's connections (set before ``start``;
        #: the broker's reput slice, ``hooks.ReadEnd``), None: none
        self.read_end: ReadEnd | None = None
        # first of the on_connect callbacks: a refused connection is closed before the others run
        self.dispatcher.on_connect.insert(0, self._admit)

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
        log_accept_errors(loop)
        # the descriptor table grown once now, not doubling (an RCU wait each) under a burst
        reserve_fd_table(self.max_connections + FD_RESERVE)
        cfg = self.config
        budget = self.partial_budget
        share = TurnShare(loop)
        read_end = self.read_end

        def factory() -> RemotingConnection:
            return RemotingConnection(
                self.dispatcher,
                max_frame_size=cfg.max_frame_size,
                loop=loop,
                max_header_size=cfg.max_header_size,
                partial_budget=budget,
                queue_wait=cfg.queue_wait,
                share=share,
                read_end=read_end,
            )

        if cfg.ssl is not None and cfg.tls_permissive:
            permissive = PermissiveServer(factory, cfg.ssl, sniff_timeout=cfg.idle_timeout)
            await permissive.start(cfg.host, cfg.port, cfg.backlog)
            self._server = permissive
        else:
            self._server = await loop.create_server(
                factory, cfg.host, cfg.port, backlog=cfg.backlog, reuse_address=True, ssl=cfg.ssl
            )
        tune_listeners(self._server.sockets, cfg.snd_buf, cfg.rcv_buf)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self._sweeper = asyncio.create_task(self._housekeeping(), name=f"remoting-server-{self.port}-sweeper")
        logger.info("remoting server listening on %s:%d", cfg.host, self.port)

    async def stop(self) -> None:
        await cancel_and_wait(self._sweeper)
        self._sweeper = None
        self._requesting.clear()
        if self._server is not None:
            self._server.close()
            for conn in list(self.dispatcher.connections):
                conn.close()
            await self._server.wait_closed()
            # the requests a lost connection read before its close are served a slice a turn
            # (``RemotingConnection._serve_lost``): before the processors stop, not after
            for _turn in range(1_000_000):  # (bounded: it ends once they are served)
                if not any(conn.transport is None for conn in self.dispatcher.connections):
                    break
                await asyncio.sleep(0)
            self._server = None
        await self.dispatcher.close()

    def _admit(self, conn: RemotingConnection) -> None:
        """``serverMaxConnections``: a connection beyond the limit is closed at once."""
        cfg = self.config
        if len(self.dispatcher.connections) > self.max_connections:
            _limited_log.emit(
                "max-connections",
                "closing %s: %d connections reached serverMaxConnections",
                conn.remote_addr,
                self.max_connections,
            )
            conn.abort(RemoteProtocolError("too many connections"))
            return
        if cfg.write_buffer_high and conn.transport is not None:
            conn.transport.set_write_buffer_limits(
                high=cfg.write_buffer_high, low=cfg.write_buffer_low or None
            )

    async def _housekeeping(self) -> None:
        """Request deadlines every sweep; the idle and frame-completion scan spread over the sweeps
        of its period (a share of the connections each), so 10,000 connections never cost one
        long loop turn (a whole scan of 11,000 connections held the loop ~5 ms at once, and the
        pending check of every connection ran 10 times a second)."""
        idle = self.config.idle_timeout
        frame_timeout = self.config.frame_timeout or float("inf")
        interval = self.config.sweep_interval
        period = min(1.0, idle / 4, frame_timeout / 4)
        steps = max(1, round(period / interval))
        #: the connections of the current scan; each entry is let go (None) once checked, so a
        #: connection closed here is freed with its ``connection_lost`` (a few per turn), not
        #: thousands at once when the scan ends (a ~13 ms turn after 10,000 idle closes)
        scan: list[RemotingConnection | None] = []
        pos = 0
        last_idle_scan = last_fd_probe = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            if now - last_fd_probe >= 1.0:
                last_fd_probe = now
                probe_fds()
            requesting = self._requesting
            if requesting:
                for asker in list(requesting):
                    if asker.pending:
                        asker.expire(now)
                    if not asker.pending:
                        requesting.discard(asker)
            if pos >= len(scan):
                if now - last_idle_scan < period:
                    continue
                last_idle_scan = now
                scan, pos = list(self.dispatcher.connections), 0
            end = pos + min(-(-len(scan) // steps), _SCAN_CHUNK)
            idle_closed: list[str] = []
            budget = _CLOSES_PER_TURN
            for i in range(pos, min(end, len(scan))):
                conn, scan[i] = scan[i], None
                if conn is None or conn.transport is None:
                    continue  # closed since the snapshot
                if conn.pending:
                    requesting.add(conn)  # a request not sent through invoke()
                if now - max(conn.last_read, conn.last_write) > idle:
                    if conn.is_active:
                        idle_closed.append(conn.remote_addr)
                    if conn.is_active and conn.can_write:
                        conn.close()
                    else:
                        # a peer that does not read its replies: a close would wait for ever for
                        # its write buffer to drain (Netty's close drops it too; each sweep closed
                        # and logged the same 100 never-reading connections again, T16), and no
                        # reply to the requests it sent and we hold can reach it: dropped,
                        # undecoded (T16: the ~80,000 pulls of 100 non-readers were decoded and
                        # handled after their close, 2-3 ms turns while the idle ones closed)
                        conn.abort(unhandled=False)
                elif conn.partial_since and now - conn.partial_since > frame_timeout:
                    _limited_log.emit(
                        "frame-timeout",
                        "closing %s: a frame begun %.0f s ago is not complete (serverFrameCompletionTimeoutSeconds)",
                        conn.remote_addr,
                        now - conn.partial_since,
                    )
                    conn.abort(RemoteProtocolError("frame not completed in time"))
                else:
                    continue
                budget -= 1
                if not budget:
                    budget = _CLOSES_PER_TURN
                    await asyncio.sleep(0)
                    now = time.monotonic()
            conn = None  # nor the last one checked
            _log_idle_closes(idle_closed, idle)
            pos = end
            if pos >= len(scan):
                scan = []

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
        future = conn.request(request, timeout)
        self._requesting.add(conn)
        return await future

    def invoke_oneway(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        request.opaque = self.next_opaque()
        conn.oneway(request)
