"""``HAMaster``: the master's HA listener and one ``SlaveConnection`` per slave (Java ``HAService``,
``AcceptSocketService``, ``HAConnection``). Frames: :mod:`pocketmq.store.ha.codec`.

Per connection, two coroutines (per connection, never per message):

* the report reader reads whole 8-byte reports; each accepted report is the slave's
  acknowledgement (:meth:`GroupTransfer.on_ack`). A report is refused, and the connection
  closed, when it is negative or beyond the master's CommitLog end (a slave cannot hold bytes
  the master never wrote: a hostile peer, or a slave whose log diverged, e.g. after this master
  restarted with a shorter log; the master then first sends one heartbeat at its own end so
  the slave can tell the two logs apart and say so). A connection silent for
  ``haHousekeepingInterval`` is closed;
* the transfer writer waits for the first report, starts at :func:`codec.transfer_start`
  (0 → the master's last segment), then sends chunks of at most ``haTransferBatchSize`` bytes
  of whatever the current segment holds (records may be cut), and a heartbeat (size 0) after
  ``haSendHeartbeatInterval`` with nothing to send. It sleeps until :meth:`HAMaster.wakeup`
  (called after every reput batch and by waiting SYNC_MASTER puts), so replication follows the
  puts without polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Protocol

from pocketmq.store.ha.codec import HAFrameError, ReportDecoder, encode_transfer_header, transfer_start
from pocketmq.store.ha.waiters import GroupTransfer

__all__ = ["HAMaster", "MasterStore", "SlaveConnection"]

logger = logging.getLogger(__name__)

#: bytes read per report read (reports are 8 bytes; a peer sending more is read in slices)
_READ_SIZE = 64 * 1024


class MasterStore(Protocol):
    """What the master side uses of the store."""

    def get_max_phy_offset(self) -> int: ...

    def get_commit_log_data(self, offset: int, max_size: int) -> bytes | None: ...


class SlaveConnection:
    """One slave (or one peer claiming to be one) connected to the HA port."""

    def __init__(self, master: HAMaster, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.master = master
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        #: the last accepted report (Java slaveAckOffset); -1 before the first
        self.ack_offset = -1
        #: where the transfer continues (Java nextTransferFromWhere); -1 before the first report
        self.next_transfer = -1
        self._reported = asyncio.Event()
        self._wake = asyncio.Event()
        self.closed = False
        self.close_reason = ""

    def wakeup(self) -> None:
        self._wake.set()

    def close(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self._wake.set()
        self._reported.set()
        with contextlib.suppress(Exception):
            self.writer.close()

    async def serve(self) -> None:
        writer_task = asyncio.get_running_loop().create_task(
            self._transfer(), name=f"ha-transfer-{self.addr}"
        )
        try:
            await self._read_reports()
        except (OSError, asyncio.IncompleteReadError) as exc:
            self.close(f"read failed: {exc}")
        finally:
            self.close(self.close_reason or "closed")
            writer_task.cancel()
            with contextlib.suppress(BaseException):
                await writer_task

    async def _read_reports(self) -> None:
        master = self.master
        decoder = ReportDecoder()
        housekeeping = master.housekeeping_ms / 1000
        while not self.closed:
            try:
                async with asyncio.timeout(housekeeping):
                    data = await self.reader.read(_READ_SIZE)
            except TimeoutError:
                self.close(f"no report for {master.housekeeping_ms} ms")
                return
            if not data:
                self.close("closed by the slave")
                return
            try:
                offset = decoder.feed(data)
            except HAFrameError as exc:
                self.close(str(exc))
                return
            if offset is None:
                continue
            master_max = master.store.get_max_phy_offset()
            if offset > master_max:
                # one heartbeat at our end first: the slave sees the mismatch and says why
                with contextlib.suppress(Exception):
                    self.writer.write(encode_transfer_header(master_max, 0))
                self.close(f"reported offset {offset} is beyond this master's CommitLog end {master_max}")
                return
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
                self._reported.set()
            master.group_transfer.on_ack(offset)

    async def _transfer(self) -> None:
        master = self.master
        store = master.store
        writer = self.writer
        await self._reported.wait()
        batch = master.batch_size
        heartbeat_s = master.heartbeat_ms / 1000
        wake = self._wake
        last_write = time.monotonic()
        try:
            while not self.closed:
                data = store.get_commit_log_data(self.next_transfer, batch)
                if data:
                    writer.write(encode_transfer_header(self.next_transfer, len(data)))
                    writer.write(data)
                    self.next_transfer += len(data)
                    await writer.drain()
                    last_write = time.monotonic()
                    continue
                wake.clear()
                # re-check after clearing: bytes written between the read and the clear
                if store.get_max_phy_offset() > self.next_transfer and store.get_commit_log_data(
                    self.next_transfer, 1
                ):
                    continue
                idle = time.monotonic() - last_write
                if idle >= heartbeat_s:
                    writer.write(encode_transfer_header(self.next_transfer, 0))
                    await writer.drain()
                    last_write = time.monotonic()
                    idle = 0.0
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(heartbeat_s - idle):
                        await wake.wait()
        except (OSError, RuntimeError) as exc:
            self.close(f"transfer failed: {exc}")


class HAMaster:
    """The HA listener of a master and its slave connections.

    Args:
        store: the CommitLog reader (:class:`MasterStore`).
        host, port: where to listen (``haListenPort``; 0 picks a free port, see :attr:`port`).
        segment_size: ``mappedFileSizeCommitLog`` (the transfer start rule).
        batch_size: ``haTransferBatchSize``; heartbeat_ms: ``haSendHeartbeatInterval``;
        housekeeping_ms: ``haHousekeepingInterval``; slave_timeout_ms: ``slaveTimeout``;
        fallbehind_max: ``haSlaveFallbehindMax``.
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
    ) -> None:
        self.store = store
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
        self._tasks: set[asyncio.Task[None]] = set()
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
        return sum(1 for c in self.connections if c.ack_offset >= 0)

    def wakeup(self) -> None:
        for conn in self.connections:
            conn.wakeup()

    def slaves(self) -> list[tuple[str, int]]:
        """``(address, acknowledged offset)`` of each reporting slave."""
        return [(c.addr, c.ack_offset) for c in self.connections if c.ack_offset >= 0]

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.configured_port)
        logger.info("HA service listening on %s:%d", self.host, self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = SlaveConnection(self, reader, writer)
        self.connections.append(conn)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await conn.serve()
        finally:
            self.connections.remove(conn)
            if task is not None:
                self._tasks.discard(task)
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
            conn.close("master shutting down")
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        self.group_transfer.close()
