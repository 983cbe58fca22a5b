"""``HASlave``: a slave's HA client (Java ``HAService.HAClient``). Frames: :mod:`pocketmq.store.ha.codec`.

The client connects to the master's HA address (``haMasterAddress``, or the one the name server
returned in the REGISTER_BROKER reply: :meth:`HASlave.update_master_address`) and reports its max
CommitLog offset at once (RocketMQ waits for the first heartbeat period; the bytes are the same).
The link is an ``asyncio.BufferedProtocol`` (:class:`MasterLink`): the socket is read straight
into the 4 MiB :class:`~pocketmq.store.ha.codec.TransferDecoder` buffer, as much as has arrived
per read, and each complete transfer is appended at the reported offset in the same callback
(the store's reput builds ConsumeQueues and the index from it afterwards); then, as RocketMQ's
slave does when it has new data, it reports its new max offset at once: the acknowledgement a
SYNC_MASTER send waits for leaves as soon as the bytes are in the CommitLog. It also reports
every ``haSendHeartbeatInterval``, closes a link silent for ``haHousekeepingInterval``, and
reconnects every :attr:`HASlave.reconnect_s` (5 s) after a failure.

A transfer whose offset is not this slave's max offset (its CommitLog not being empty) means the
two logs diverge (e.g. the master restarted with a shorter log than the slave's): the slave
never mixes them. It closes the link and says why in one warning (repeats of the same
divergence are logged at debug level); nothing is appended, so nothing is acknowledged. A
master found shorter is not followed again by this process: once that master has grown past
the slave's end it would take the slave's report as an acknowledgement of its own, different,
bytes below it (RocketMQ 4.x's offsets cannot tell; a rebuilt or truncated slave, restarted,
follows it again).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import Protocol, cast

from pocketmq.store.ha.codec import HAFrameError, TransferDecoder, encode_report
from pocketmq.store.ha.keepwarm import KeepWarm
from pocketmq.store.ha.master import set_nodelay

__all__ = ["HASlave", "MasterLink", "SlaveStore"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0


class SlaveStore(Protocol):
    """What the slave side uses of the store."""

    def get_max_phy_offset(self) -> int: ...

    def append_to_commit_log(self, start_offset: int, data: bytes | memoryview) -> bool: ...


class MasterLink(asyncio.BufferedProtocol):
    """One connection to the master; :attr:`done` resolves with why it closed."""

    def __init__(self, slave: HASlave, addr: str) -> None:
        self.slave = slave
        self.addr = addr
        self._loop = asyncio.get_running_loop()
        self.done: asyncio.Future[str] = self._loop.create_future()
        self._decoder = TransferDecoder()
        self._transport: asyncio.Transport | None = None
        self._reported = -1
        self._last_read = self._last_report = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self._transport = transport = cast(asyncio.Transport, transport)
        set_nodelay(transport)
        self._report(self.slave.store.get_max_phy_offset())
        self._arm()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self.done.done():
            return
        self._last_read = time.monotonic()
        if self.slave.keep_warm is not None:
            self.slave.keep_warm.touch()
        store = self.slave.store
        try:
            frames = self._decoder.received(nbytes)
        except HAFrameError as exc:
            self.close(str(exc))
            return
        for offset, body in frames:
            mine = store.get_max_phy_offset()
            if mine not in (0, offset):  # an empty slave takes any start
                self.close(self.slave.diverged(self.addr, offset, mine))
                return
            if body and not store.append_to_commit_log(offset, body):
                self.close(self.slave.diverged(self.addr, offset, store.get_max_phy_offset()))
                return
        current = store.get_max_phy_offset()
        if current != self._reported:
            self._report(current)

    def eof_received(self) -> bool:
        self.close("closed by the master")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(f"link to {self.addr} failed: {exc}" if exc is not None else "closed by the master")

    def _report(self, offset: int) -> None:
        assert self._transport is not None
        self._transport.write(encode_report(offset))
        self._reported = self.slave.reported_offset = offset
        self._last_report = time.monotonic()

    def _arm(self) -> None:
        slave = self.slave
        due = min(
            self._last_read + slave.housekeeping_ms / 1000, self._last_report + slave.heartbeat_ms / 1000
        )
        self._timer = self._loop.call_later(max(0.001, due - time.monotonic()), self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.done.done():
            return
        slave = self.slave
        now = time.monotonic()
        if now - self._last_read > slave.housekeeping_ms / 1000:
            self.close(f"nothing from the master for {slave.housekeeping_ms} ms")
            return
        if now - self._last_report >= slave.heartbeat_ms / 1000:
            self._report(slave.store.get_max_phy_offset())
        self._arm()

    def close(self, reason: str) -> None:
        if not self.done.done():
            self.done.set_result(reason)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


class HASlave:
    def __init__(
        self,
        store: SlaveStore,
        *,
        master_address: str | None,
        heartbeat_ms: int,
        housekeeping_ms: int,
        reconnect_s: float = 5.0,
        keep_warm_ms: int = 0,
    ) -> None:
        self.store = store
        #: ``haKeepWarmMillis`` (0: off); the KeepWarm itself is made in :meth:`start`
        self.keep_warm_ms = keep_warm_ms
        self.keep_warm: KeepWarm | None = None
        self.master_address = master_address or None
        self.heartbeat_ms = heartbeat_ms
        self.housekeeping_ms = housekeeping_ms
        self.reconnect_s = reconnect_s
        #: the offset last reported to the master (what it may count as acknowledged)
        self.reported_offset = -1
        self.connected = False
        #: the last reason the link closed (diagnostics, tests)
        self.last_error = ""
        self._divergence_logged: tuple[str, int] | None = None
        #: a master whose log was shorter than this slave's: not followed again by this process
        self.diverged_from: str | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._link: MasterLink | None = None
        self._stopping = False

    def update_master_address(self, addr: str | None) -> None:
        """Java ``updateHaMasterAddress``: follow ``addr`` from the next connection on."""
        addr = addr or None
        if addr != self.master_address:
            logger.info("HA master address %s -> %s", self.master_address, addr)
            self.master_address = addr
            if self._link is not None:
                self._link.close("master address changed")
            self._wake.set()

    def start(self) -> None:
        if self.keep_warm_ms > 0:
            self.keep_warm = KeepWarm(self.keep_warm_ms)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-slave")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._link is not None:
            self._link.close("stopping")
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self.keep_warm is not None:
            self.keep_warm.stop()

    async def _pause(self, seconds: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            addr = self.master_address
            if not addr or addr == self.diverged_from:
                await self._pause(self.reconnect_s)
                continue
            host, _, port = addr.rpartition(":")
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    _, link = await loop.create_connection(
                        functools.partial(MasterLink, self, addr), host, int(port)
                    )
            except (OSError, TimeoutError, ValueError) as exc:
                self.last_error = f"connect to {addr} failed: {exc}"
                logger.debug("HA %s", self.last_error)
                await self._pause(self.reconnect_s)
                continue
            self.connected = True
            self._link = link
            logger.info(
                "HA connected to master %s (slave max offset %d)", addr, self.store.get_max_phy_offset()
            )
            try:
                self.last_error = await link.done
            finally:
                self.connected = False
                self._link = None
                link.close("stopping")
            logger.info("HA link to master %s closed: %s", addr, self.last_error)
            if not self._stopping and self.master_address == addr:
                await self._pause(self.reconnect_s)

    def diverged(self, addr: str, master_offset: int, mine: int) -> str:
        if master_offset < mine:
            # once this master grows past our end it would accept our report and count its own
            # different bytes below it as acknowledged: never follow it again (until a restart,
            # after the operator rebuilt or truncated this slave)
            self.diverged_from = addr
            why = (
                "the master's CommitLog is shorter than this slave's (it lost its tail?); not following it "
                "again: rebuild this slave (empty store) or truncate it to the master's log, then restart it"
            )
        else:
            why = "the master skips bytes this slave does not have"
        reason = (
            f"master {addr} transfers from offset {master_offset} but this slave's CommitLog ends at {mine}: "
            f"{why}; refusing to mix the two logs"
        )
        key = (addr, mine)  # the master's end moves on; ours does not while diverged
        if self._divergence_logged != key:
            self._divergence_logged = key
            logger.warning("HA %s", reason)
        else:
            logger.debug("HA %s", reason)
        return reason
