"""``HAMaster``: the master's HA listener and one ``SlaveConnection`` per slave (Java ``HAService``,
``AcceptSocketService``, ``HAConnection``). Frames: :mod:`pocketmq.store.ha.codec`.

Each connection is an ``asyncio.Protocol``: no task, and no Python call per message.

* Reports arrive in :meth:`SlaveConnection.data_received` (whole 8-byte groups); each accepted
  report is the slave's acknowledgement (:meth:`GroupTransfer.on_ack`). A report is refused,
  and the connection closed, when it is negative or beyond the master's CommitLog end (a slave
  cannot hold bytes the master never wrote: a hostile peer, or a slave whose log diverged,
  e.g. after this master restarted with a shorter log; the master then first sends one
  heartbeat at its own end so the slave can tell the two logs apart and say so).
* The transfer starts at the first report (:func:`codec.transfer_start`: 0 → the master's last
  segment). :meth:`HAMaster.wakeup` (after each reput batch, and by each waiting SYNC_MASTER
  put) queues one ``pump`` per connection, which sends frames of at most
  ``haTransferBatchSize`` bytes of whatever the current segment holds (records may be cut),
  all there is up to :data:`PUMP_BYTES` in one ``writelines`` (then it queues itself again,
  so puts and reads interleave), unless the socket pushes back (``pause_writing``;
  ``resume_writing`` pumps again). Replication follows the puts without polling.
* One timer per connection: a heartbeat (size 0) after ``haSendHeartbeatInterval`` with
  nothing sent, and the close of a link that sent nothing for ``haHousekeepingInterval``.

Both HA sockets set ``TCP_NODELAY`` (asyncio's transports do too): a report or a small
transfer must leave at once, not wait for Nagle's algorithm to coalesce it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from typing import Protocol, cast

from pocketmq.store.ha.codec import HAFrameError, ReportDecoder, encode_transfer_header, transfer_start
from pocketmq.store.ha.keepwarm import KeepWarm
from pocketmq.store.ha.waiters import GroupTransfer

__all__ = ["PUMP_BYTES", "HAMaster", "MasterStore", "SlaveConnection", "set_nodelay"]

logger = logging.getLogger(__name__)

#: bytes one pump writes before queueing itself again (other callbacks run in between)
PUMP_BYTES = 1024 * 1024
#: the transport's write buffer above which it pushes back (``pause_writing``)
WRITE_HIGH_WATER = 1024 * 1024
#: a closing link still holding this much unsent is aborted, not flushed (a stopped peer)
ABORT_ABOVE = 64 * 1024


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class MasterStore(Protocol):
    """What the master side uses of the store."""

    def get_max_phy_offset(self) -> int: ...

    def get_commit_log_data(self, offset: int, max_size: int) -> bytes | None: ...


class SlaveConnection(asyncio.Protocol):
    """One slave (or one peer claiming to be one) connected to the HA port."""

    def __init__(self, master: HAMaster) -> None:
        self.master = master
        self.addr = "?"
        #: the last accepted report (Java slaveAckOffset); -1 before the first
        self.ack_offset = -1
        #: where the transfer continues (Java nextTransferFromWhere); -1 before the first report
        self.next_transfer = -1
        self.closed = False
        self.close_reason = ""
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._decoder = ReportDecoder()
        self._paused = False  # the transport's buffer is above its high-water mark
        self._queued = False  # a pump is queued
        self._last_read = self._last_write = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self._transport = transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        set_nodelay(transport)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.master.connections.append(self)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._last_read = time.monotonic()
        try:
            offset = self._decoder.feed(data)
        except HAFrameError as exc:
            self.close(str(exc))
            return
        if offset is None:
            return
        master = self.master
        master_max = master.store.get_max_phy_offset()
        if offset > master_max:
            # one heartbeat at our end first: the slave sees the mismatch and says why
            assert self._transport is not None
            self._transport.write(encode_transfer_header(master_max, 0))
            self.close(f"reported offset {offset} is beyond this master's CommitLog end {master_max}")
            return
        if master.keep_warm is not None:
            master.keep_warm.touch()
        first = self.ack_offset < 0
        self.ack_offset = offset
        if first:
            self.next_transfer = transfer_start(offset, master_max, master.segment_size)
            logger.info(
                "HA slave %s connected: reports %d, transfer starts at %d",
                self.addr,
                offset,
                self.next_transfer,
            )
            self.wakeup()
        master.group_transfer.on_ack(offset)

    def eof_received(self) -> bool:
        self.close("closed by the slave")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(f"read failed: {exc}" if exc is not None else "closed by the slave")
        self.master.left(self)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self.wakeup()

    # ------------------------------------------------------------------ transfer

    def wakeup(self) -> None:
        """Queue one pump (a no-op while one is queued, or before the first report)."""
        if not self._queued and self.next_transfer >= 0 and not self.closed:
            self._queued = True
            self._loop.call_soon(self._pump)

    def _pump(self) -> None:
        self._queued = False
        transport = self._transport
        if self.closed or self._paused or transport is None:
            return
        read = self.master.store.get_commit_log_data
        batch = self.master.batch_size
        offset = self.next_transfer
        parts: list[bytes] = []
        while offset - self.next_transfer < PUMP_BYTES:
            data = read(offset, batch)
            if not data:
                break
            parts.append(encode_transfer_header(offset, len(data)))
            parts.append(data)
            offset += len(data)
        if not parts:
            return
        # every frame of this turn in one call: one writev on uvloop (one join on asyncio), so
        # a header never leaves alone in its own segment (TCP_NODELAY) and a catch-up makes
        # one syscall per PUMP_BYTES, not two per 32 KiB chunk
        transport.writelines(parts)
        if self.master.keep_warm is not None:
            self.master.keep_warm.touch()
        more = offset - self.next_transfer >= PUMP_BYTES
        self.next_transfer = offset
        self._last_write = time.monotonic()
        if more:
            self.wakeup()

    # ------------------------------------------------------------------ heartbeat, housekeeping

    def _arm(self) -> None:
        master = self.master
        due = min(
            self._last_read + master.housekeeping_ms / 1000, self._last_write + master.heartbeat_ms / 1000
        )
        self._timer = self._loop.call_later(max(0.001, due - time.monotonic()), self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.closed:
            return
        master = self.master
        now = time.monotonic()
        if now - self._last_read >= master.housekeeping_ms / 1000:
            self.close(f"no report for {master.housekeeping_ms} ms")
            return
        if now - self._last_write >= master.heartbeat_ms / 1000:
            # Java sends heartbeats only once the transfer started (after the first report)
            if self.next_transfer >= 0 and not self._paused and self._transport is not None:
                self._transport.write(encode_transfer_header(self.next_transfer, 0))
            self._last_write = now
        self._arm()

    def close(self, reason: str, *, abort: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        transport = self._transport
        if transport is not None and not transport.is_closing():
            # flush a last heartbeat, but never wait on a peer that stopped reading
            if abort or transport.get_write_buffer_size() > ABORT_ABOVE:
                transport.abort()
            else:
                transport.close()


class HAMaster:
    """The HA listener of a master and its slave connections.

    Args:
        store: the CommitLog reader (:class:`MasterStore`).
        host, port: where to listen (``haListenPort``; 0 picks a free port, see :attr:`port`).
        segment_size: ``mappedFileSizeCommitLog`` (the transfer start rule).
        batch_size: ``haTransferBatchSize``; heartbeat_ms: ``haSendHeartbeatInterval``;
        housekeeping_ms: ``haHousekeepingInterval``; slave_timeout_ms: ``slaveTimeout``;
        fallbehind_max: ``haSlaveFallbehindMax``; keep_warm_ms: ``haKeepWarmMillis`` (``keepwarm``).
    """

    def __init__(
        self,
        store: MasterStore,
        *,
        host: str,
        port: int,
        segment_size: int,
        batch_size: int,
        heartbeat_ms: int,
        housekeeping_ms: int,
        slave_timeout_ms: int,
        fallbehind_max: int,
        keep_warm_ms: int = 0,
    ) -> None:
        self.store = store
        #: ``haKeepWarmMillis`` (0: off); the KeepWarm itself is made in :meth:`start`
        self.keep_warm_ms = keep_warm_ms
        self.keep_warm: KeepWarm | None = None
        self.host = host
        self.configured_port = port
        self.segment_size = segment_size
        self.batch_size = batch_size
        self.heartbeat_ms = heartbeat_ms
        self.housekeeping_ms = housekeeping_ms
        self.connections: list[SlaveConnection] = []
        self.group_transfer = GroupTransfer(
            slave_count=self.slave_count,
            wakeup=self.wakeup,
            timeout_ms=slave_timeout_ms,
            fallbehind_max=fallbehind_max,
        )
        self._server: asyncio.Server | None = None
        #: called with (addr, reason) when a connection closes (tests, logs)
        self.on_close: Callable[[str, str], None] | None = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`), else the configured one."""
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self.configured_port

    def slave_count(self) -> int:
        """Connections that have reported at least once (Java counts every connection; a peer
        that never reported cannot acknowledge anything, so it does not make a slave OK)."""
        return sum(1 for c in self.connections if c.ack_offset >= 0 and not c.closed)

    def wakeup(self) -> None:
        for conn in self.connections:
            conn.wakeup()

    def slaves(self) -> list[tuple[str, int]]:
        """``(address, acknowledged offset)`` of each reporting slave."""
        return [(c.addr, c.ack_offset) for c in self.connections if c.ack_offset >= 0 and not c.closed]

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.keep_warm_ms > 0:
            self.keep_warm = KeepWarm(self.keep_warm_ms)
        self._server = await loop.create_server(
            lambda: SlaveConnection(self), self.host, self.configured_port
        )
        logger.info("HA service listening on %s:%d", self.host, self.port)

    def left(self, conn: SlaveConnection) -> None:
        """A connection is gone (its transport's ``connection_lost``)."""
        if conn in self.connections:
            self.connections.remove(conn)
        if conn.ack_offset >= 0:
            logger.info("HA slave %s disconnected: %s", conn.addr, conn.close_reason)
        else:
            logger.debug("HA peer %s closed before reporting: %s", conn.addr, conn.close_reason)
        if self.on_close is not None:
            self.on_close(conn.addr, conn.close_reason)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            # aborted: a flush to a stopped peer would hold wait_closed() (Python 3.12+) forever
            conn.close("master shutting down", abort=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        self.group_transfer.close()
        if self.keep_warm is not None:
            self.keep_warm.stop()
