"""``HASlave``: a slave's HA client (Java ``HAService.HAClient``). Frames: :mod:`pocketmq.store.ha.codec`.

The client connects to the master's HA address (``haMasterAddress``, or the one the name server
returned in the REGISTER_BROKER reply: :meth:`HASlave.update_master_address`), reports its max
CommitLog offset at once (RocketMQ waits for the first heartbeat period; the bytes are the same),
then applies each transfer by appending its bytes at the reported offset (the store's reput
builds ConsumeQueues and the index from them) and reports the new max offset after every read.
It reports at least every ``haSendHeartbeatInterval``, closes a link silent for
``haHousekeepingInterval``, and reconnects every :attr:`HASlave.reconnect_s` (5 s) after a failure.

A transfer whose offset is not this slave's max offset (its CommitLog not being empty) means the
two logs diverge (e.g. the master restarted with a shorter log than the slave's): the slave
never mixes them. It closes the link and says why in one warning (repeats of the same
divergence are logged at debug level); nothing is appended, so nothing is acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Protocol

from pocketmq.store.ha.codec import HAFrameError, TransferDecoder, encode_report

__all__ = ["HASlave", "SlaveStore"]

logger = logging.getLogger(__name__)

_READ_SIZE = 256 * 1024
CONNECT_TIMEOUT_S = 3.0


class SlaveStore(Protocol):
    """What the slave side uses of the store."""

    def get_max_phy_offset(self) -> int: ...

    def append_to_commit_log(self, start_offset: int, data: bytes | memoryview) -> bool: ...


class HASlave:
    def __init__(
        self,
        store: SlaveStore,
        *,
        master_address: str | None,
        heartbeat_ms: int,
        housekeeping_ms: int,
        reconnect_s: float = 5.0,
    ) -> None:
        self.store = store
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
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def update_master_address(self, addr: str | None) -> None:
        """Java ``updateHaMasterAddress``: follow ``addr`` from the next connection on."""
        addr = addr or None
        if addr != self.master_address:
            logger.info("HA master address %s -> %s", self.master_address, addr)
            self.master_address = addr
            self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-slave")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None

    async def _pause(self, seconds: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    async def _run(self) -> None:
        while not self._stopping:
            addr = self.master_address
            if not addr:
                await self._pause(self.reconnect_s)
                continue
            host, _, port = addr.rpartition(":")
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    reader, writer = await asyncio.open_connection(host, int(port))
            except (OSError, TimeoutError, ValueError) as exc:
                self.last_error = f"connect to {addr} failed: {exc}"
                logger.debug("HA %s", self.last_error)
                await self._pause(self.reconnect_s)
                continue
            self.connected = True
            logger.info(
                "HA connected to master %s (slave max offset %d)", addr, self.store.get_max_phy_offset()
            )
            try:
                self.last_error = await self._follow(addr, reader, writer)
            except (OSError, asyncio.IncompleteReadError) as exc:
                self.last_error = f"link to {addr} failed: {exc}"
            finally:
                self.connected = False
                with contextlib.suppress(Exception):
                    writer.close()
            logger.info("HA link to master %s closed: %s", addr, self.last_error)
            if not self._stopping:
                await self._pause(self.reconnect_s)

    async def _follow(self, addr: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """Apply transfers until the link fails; returns why it closed."""
        store = self.store
        decoder = TransferDecoder()
        heartbeat_s = self.heartbeat_ms / 1000
        housekeeping_s = self.housekeeping_ms / 1000
        reported = store.get_max_phy_offset()
        writer.write(encode_report(reported))
        await writer.drain()
        self.reported_offset = reported
        last_read = last_report = time.monotonic()
        while not self._stopping and self.master_address == addr:
            data: bytes | None = None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(heartbeat_s):
                    data = await reader.read(_READ_SIZE)
            now = time.monotonic()
            if data is not None:
                if not data:
                    return "closed by the master"
                last_read = now
                try:
                    frames = decoder.feed(data)
                except HAFrameError as exc:
                    return str(exc)
                for offset, body in frames:
                    mine = store.get_max_phy_offset()
                    if mine not in (0, offset):  # an empty slave takes any start
                        return self._diverged(addr, offset, mine)
                    if body and not store.append_to_commit_log(offset, body):
                        return self._diverged(addr, offset, store.get_max_phy_offset())
            elif now - last_read > housekeeping_s:
                return f"nothing from the master for {self.housekeeping_ms} ms"
            current = store.get_max_phy_offset()
            if current != reported or now - last_report >= heartbeat_s:
                writer.write(encode_report(current))
                await writer.drain()
                reported = self.reported_offset = current
                last_report = now
        return "master address changed" if not self._stopping else "stopping"

    def _diverged(self, addr: str, master_offset: int, mine: int) -> str:
        if master_offset < mine:
            why = "the master's CommitLog is shorter than this slave's (restarted with a shorter log?)"
        else:
            why = "the master skips bytes this slave does not have"
        reason = (
            f"master {addr} transfers from offset {master_offset} but this slave's CommitLog ends at {mine}: "
            f"{why}; refusing to mix the two logs (reconcile them: truncate the slave or let the master catch up)"
        )
        key = (addr, mine)  # the master's end moves on; ours does not while diverged
        if self._divergence_logged != key:
            self._divergence_logged = key
            logger.warning("HA %s", reason)
        else:
            logger.debug("HA %s", reason)
        return reason
