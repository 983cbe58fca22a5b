"""Base of the broker's JSON metadata managers (topics.json, subscriptionGroup.json, consumerOffset.json).

:class:`VersionedConfigFile` adds what topics.json and subscriptionGroup.json share: a
``{name: config}`` table with a ``DataVersion`` bumped on every change, persisted as its wire
wrapper (the body of GET_ALL_TOPIC_CONFIG / GET_ALL_SUBSCRIPTIONGROUP_CONFIG).

Rules (RocketMQ ``ConfigManager`` without its locks):

* the table lives on the event loop and changes synchronously; a change sets ``dirty``;
* :meth:`snapshot` serialises on the loop (a consistent picture, no lock needed) and the
  blocking write (temp file, fsync, rename, ``.bak``) runs in the default executor through
  :meth:`persist_async`; :meth:`persist` is the blocking form for shutdown and tests;
* :meth:`load` is tolerant: a missing file is a first start, an unreadable one falls back to
  ``.bak`` (:mod:`pocketmq.remoting.common.persist`), and both broken is a startup error;
* a change a reply acknowledges (a topic or group auto-created while serving a request) calls
  :meth:`persist_soon`: one write is scheduled (concurrent changes coalesce into it) and
  ``durable`` is its future until it completes; :func:`reply_when_durable` defers a reply until
  then (RocketMQ persists such a topic before answering the send).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, Self, TypeVar, cast

from pocketmq.remoting.common import persist
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.remoting.protocol.route import DataVersion

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ConfigFileManager:
    """A table persisted atomically as one JSON file."""

    #: File name under the broker's config directory.
    file_name = ""

    def __init__(self, config_dir: str | None, *, fsync: bool = True) -> None:
        self.path = os.path.join(config_dir, self.file_name) if config_dir else None
        self.fsync = fsync
        self.dirty = False
        self._writing: asyncio.Future[None] | None = None
        #: The write covering the latest acknowledged change, until it completes (else None).
        self.durable: asyncio.Future[None] | None = None
        #: A scheduled write that has not taken its snapshot yet (later changes join it).
        self._queued: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- to override ---------------------------------------------------------------------------
    def encode(self) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> None:
        """Replace the table with the file content; raises (any ``Exception``) on a bad file."""
        raise NotImplementedError

    # -- persistence -----------------------------------------------------------------------------
    def load(self) -> bool:
        """Load the file (or its ``.bak``); False when neither exists.

        Raises:
            persist.PersistCorruptError: the file and its backup are both unreadable.
        """
        if self.path is None:
            return False
        if persist.load_bytes(self.path, self._decode_ok) is None:
            return False
        self.dirty = False
        logger.info("loaded %s", self.path)
        return True

    def _decode_ok(self, data: bytes) -> bool:
        self.decode(data)
        return True

    def snapshot(self) -> bytes:
        self.dirty = False
        return self.encode()

    def persist(self) -> None:
        """Write the table now (blocking)."""
        if self.path is None:
            return
        persist.atomic_write_bytes(self.path, self.snapshot(), fsync=self.fsync)

    async def persist_async(self) -> None:
        """Snapshot on the loop, write in the executor; one write at a time, in order."""
        if self.path is None:
            self.dirty = False
            return
        # A write that is done but whose owner has not resumed yet counts as finished: awaiting a
        # done future never yields, so waiting for its owner to clear it would spin the loop.
        while (writing := self._writing) is not None and not writing.done():
            await asyncio.shield(writing)
        data = self.snapshot()
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, self._write, data)
        self._writing = fut
        try:
            await asyncio.shield(fut)
        except BaseException:
            self.dirty = True
            raise
        finally:
            if self._writing is fut:
                self._writing = None

    def _write(self, data: bytes) -> None:
        assert self.path is not None
        persist.atomic_write_bytes(self.path, data, fsync=self.fsync)

    def persist_soon(self) -> None:
        """Schedule a write covering the current table; ``durable`` completes with it.

        Changes made before the scheduled write takes its snapshot join it (one write). Without
        a running loop (tools, tests) the change stays ``dirty`` for the next persist.
        """
        if self.path is None or self._queued is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        fut: asyncio.Future[None] = loop.create_future()
        fut.add_done_callback(_retrieve)
        self._queued = self.durable = fut
        task = loop.create_task(self._write_queued(fut))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_queued(self, fut: asyncio.Future[None]) -> None:
        try:
            # a write in progress took its snapshot before this change: wait, then write again
            while (writing := self._writing) is not None and not writing.done():
                await asyncio.shield(writing)
            self._queued = None  # the snapshot below covers every change up to here
            await self.persist_async()
        except Exception as exc:
            logger.error("could not persist %s: %s", self.path, exc)
            fut.set_exception(exc)
        else:
            fut.set_result(None)
        finally:
            if not fut.done():  # cancelled (shutdown): the final persist writes the table
                fut.cancel()
            if self._queued is fut:
                self._queued = None
            if self.durable is fut:
                self.durable = None


def _retrieve(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled():
        fut.exception()  # logged by _write_queued; waiters see it too


def reply_when_durable(reply: T | Awaitable[T], *managers: ConfigFileManager) -> T | Awaitable[T]:
    """``reply`` now, or an awaitable of it once the managers' pending writes are durable.

    The writes pending now are the ones awaited (a write failing while the reply itself is still
    awaited is not missed); a failed write answers SYSTEM_ERROR instead of the reply.
    """
    pending = [(mgr.file_name, mgr.durable) for mgr in managers if mgr.durable is not None]
    if not pending:
        return reply
    return _after_writes(reply, pending)


async def _after_writes(reply: T | Awaitable[T], pending: list[tuple[str, asyncio.Future[None]]]) -> T:
    result = cast(T, await reply if inspect.isawaitable(reply) else reply)
    for file_name, fut in pending:
        try:
            await asyncio.shield(fut)
        except OSError as exc:
            raise RemoteSystemError(f"could not persist {file_name}: {exc}") from None
    return result


class VersionedWrapper(Protocol):
    """A config table's wire wrapper (``TopicConfigSerializeWrapper``, ``SubscriptionGroupWrapper``):
    built from ``(table, data_version)``, encoded and decoded as JSON."""

    data_version: DataVersion

    def __init__(self, table: dict[str, Any], data_version: DataVersion, /) -> None: ...

    def encode(self, *, pretty: bool = False) -> bytes: ...

    @classmethod
    def decode(cls, data: bytes | str) -> Self: ...


_V = TypeVar("_V")
_W = TypeVar("_W", bound=VersionedWrapper)


class VersionedConfigFile(ConfigFileManager, ABC, Generic[_V, _W]):
    """A ``{name: config}`` table (``table``) versioned by ``data_version``, persisted as its wrapper.

    A subclass names its wrapper class (``wrapper_type``) and how to read a wrapper's table
    (:meth:`unwrap`).
    """

    def __init__(
        self,
        config_dir: str | None,
        table: dict[str, _V],
        *,
        now_ms: Callable[[], int],
        fsync: bool = True,
    ) -> None:
        super().__init__(config_dir, fsync=fsync)
        self.now_ms = now_ms
        self.table = table
        self.data_version = DataVersion(now_ms(), 0)

    # -- the wrapper (to override) -----------------------------------------------------------------
    wrapper_type: type[_W]
    #: the file's table key (``topicConfigTable``); missing or null in the file makes it unusable
    #: (the backup is tried), never an empty table started from in silence (issue 23)
    table_key: str = ""

    @staticmethod
    @abstractmethod
    def unwrap(wrapper: _W) -> dict[str, _V]: ...

    # -- changes -----------------------------------------------------------------------------------
    def bump_version(self) -> None:
        """Every change: the next ``DataVersion`` and the file dirty."""
        self.data_version = self.data_version.next_version(self.now_ms())
        self.dirty = True

    def pop(self, name: str) -> _V | None:
        """Remove ``name``'s config (a change when it was there); the removed config or None."""
        old = self.table.pop(name, None)
        if old is not None:
            self.bump_version()
        return old

    # -- the wrapper: the wire body and the file ---------------------------------------------------
    def build_wrapper(self) -> _W:
        return self.wrapper_type(dict(self.table), self.data_version)

    def encode(self) -> bytes:
        return self.build_wrapper().encode(pretty=True)

    def decode(self, data: bytes) -> None:
        if self.table_key:  # startup only: the second parse costs nothing that matters
            obj = fastjson.loads(data)
            if not isinstance(obj, dict) or obj.get(self.table_key) is None:
                raise ValueError(f"{self.table_key} is missing or null")
        wrapper = self.wrapper_type.decode(data)
        self.table.update(self.unwrap(wrapper))
        self.data_version = wrapper.data_version

    def replace_all(self, wrapper: _W) -> None:
        """Adopt a master's table (slave sync)."""
        self.table.clear()
        self.table.update(self.unwrap(wrapper))
        self.data_version = wrapper.data_version
        self.dirty = True
