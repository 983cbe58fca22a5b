"""Consumer offset stores (Java ``RemoteBrokerOffsetStore`` / ``LocalFileOffsetStore``).

Offsets are "next offset to consume" per :class:`MessageQueue`, kept in memory and written
out every ``persist_consumer_offset_interval`` (5 s) and on shutdown:

* clustering groups keep them on the broker that owns the queue (UPDATE_CONSUMER_OFFSET;
  periodic persists are oneway as in Java, shutdown and explicit commits wait for the reply);
* broadcasting consumers keep them in ``<dir>/<clientId>/<group>/offsets.json``, written
  atomically (temp file, fsync, rename) in fastjson's ``{"offsetTable":{<mq>:offset}}`` form,
  the same file Java writes.

``read_offset`` returns -1 when no offset exists anywhere and -2 when the broker could not be
asked (the caller retries later, never guesses).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from collections.abc import Iterable
from typing import Any, Protocol

from pocketmq.client.errors import BrokerNotFoundError, RemotingConnectError, RemotingTimeoutError
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.common.persist import atomic_write_json, load_json
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.errors import ResponseError

logger = logging.getLogger(__name__)


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = 0
    READ_FROM_STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


class OffsetBroker(Protocol):
    """What the remote store needs from the client instance."""

    async def find_broker_addr_for_offsets(self, broker_name: str) -> str: ...

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> int: ...

    async def update_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, offset: int, *, oneway: bool = False
    ) -> None: ...


class OffsetStore:
    """In-memory table shared by both stores."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        """Read persisted offsets (local store only)."""

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if increase_only:
            old = self.table.get(mq)
            if old is not None and old >= offset:
                return
        self.table[mq] = offset

    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        raise NotImplementedError

    async def persist_all(
        self, mqs: Iterable[MessageQueue], *, oneway: bool = False, prune: bool = True
    ) -> None:
        """Write the offsets of ``mqs``; with ``prune`` (the periodic persist of the whole
        assignment) forget offsets of queues not in ``mqs``."""
        raise NotImplementedError

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq], prune=False)

    def remove_offset(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: off for mq, off in self.table.items() if topic is None or mq.topic == topic}

    async def update_consume_offset_to_broker(
        self, mq: MessageQueue, offset: int, *, oneway: bool = False
    ) -> None:
        """Only meaningful for the remote store (reset offset path)."""


class RemoteBrokerOffsetStore(OffsetStore):
    def __init__(self, broker: OffsetBroker, group: str) -> None:
        super().__init__(group)
        self.broker = broker

    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if how is not ReadOffsetType.READ_FROM_STORE:
            off = self.table.get(mq)
            if off is not None or how is ReadOffsetType.READ_FROM_MEMORY:
                return -1 if off is None else off
        try:
            addr = await self.broker.find_broker_addr_for_offsets(mq.broker_name)
            off = await self.broker.query_consumer_offset(addr, self.group, mq)
        except (ResponseError, RemotingConnectError, RemotingTimeoutError, BrokerNotFoundError) as exc:
            logger.warning("query offset of %s for %s failed: %s", mq, self.group, exc)
            return -2
        if off >= 0:
            self.update_offset(mq, off)
        return off

    async def persist_all(
        self, mqs: Iterable[MessageQueue], *, oneway: bool = False, prune: bool = True
    ) -> None:
        wanted = set(mqs)
        if not wanted:
            return
        jobs = [
            self.update_consume_offset_to_broker(mq, off, oneway=oneway)
            for mq, off in list(self.table.items())
            if mq in wanted
        ]
        results = await asyncio.gather(*jobs, return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException) and not isinstance(res, Exception):
                raise res
            if isinstance(res, Exception):
                logger.warning("persist offsets of %s: %s", self.group, res)
        if prune:
            for mq in [m for m in self.table if m not in wanted]:
                # Queues no longer assigned are forgotten (Java removes unused offsets here).
                del self.table[mq]

    async def update_consume_offset_to_broker(
        self, mq: MessageQueue, offset: int, *, oneway: bool = False
    ) -> None:
        addr = await self.broker.find_broker_addr_for_offsets(mq.broker_name)
        await self.broker.update_consumer_offset(addr, self.group, mq, offset, oneway=oneway)


class LocalFileOffsetStore(OffsetStore):
    def __init__(self, base_dir: str, client_id: str, group: str, *, fsync: bool = True) -> None:
        super().__init__(group)
        self.path = os.path.join(base_dir, client_id.replace(":", "_"), group, "offsets.json")
        self._fsync = fsync

    async def _read_file(self) -> dict[MessageQueue, int]:
        data = await asyncio.to_thread(load_json, self.path)
        if data is None:
            return {}
        table = fastjson.get_dict(fastjson.as_object(data, "OffsetSerializeWrapper"), "offsetTable")
        return {
            MessageQueue.from_json(fastjson.as_object(key, "offsetTable key")): int(value)
            for key, value in table.items()
        }

    async def load(self) -> None:
        self.table.update(await self._read_file())

    async def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> int:
        if how is not ReadOffsetType.READ_FROM_STORE:
            off = self.table.get(mq)
            if off is not None or how is ReadOffsetType.READ_FROM_MEMORY:
                return -1 if off is None else off
        stored = (await self._read_file()).get(mq)
        if stored is None:
            return -1
        self.table[mq] = stored
        return stored

    async def persist_all(
        self, mqs: Iterable[MessageQueue], *, oneway: bool = False, prune: bool = True
    ) -> None:
        wanted = set(mqs) if prune else set(mqs) | set(self.table)
        if not wanted:
            return
        snapshot: dict[str, Any] = {
            "offsetTable": {mq: off for mq, off in self.table.items() if mq in wanted}
        }
        await asyncio.to_thread(atomic_write_json, self.path, snapshot, fsync=self._fsync)
