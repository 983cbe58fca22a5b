"""``SlaveSynchronize``: a slave copies its master's metadata (RocketMQ ``SlaveSynchronize``).

Every 10 s (first after 3 s), while the name server names a live master (``masterAddr`` of the
REGISTER_BROKER reply), the slave asks it for:

====  ===============================  ==================================================
code  request                          adopted as
====  ===============================  ==================================================
21    GET_ALL_TOPIC_CONFIG             the whole topic table, when its dataVersion differs
43    GET_ALL_CONSUMER_OFFSET          the master's offsets over the slave's (``putAll``:
                                       a queue committed only on the slave is kept)
45    GET_ALL_DELAY_OFFSET             the schedule progress (delayOffset.json)
201   GET_ALL_SUBSCRIPTIONGROUP_CONFIG the whole group table, when its dataVersion differs
====  ===============================  ==================================================

Each step fails alone (logged): an unreachable master or an unreadable body changes nothing.
Copied tables are persisted like local changes, so a slave restarted as the new master
(RocketMQ 4.x's manual failover) starts with its master's topics, groups and offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Protocol

from pocketmq.broker.offset_manager import ConsumerOffsetManager
from pocketmq.broker.subscription import SubscriptionGroupManager
from pocketmq.broker.topic_config import TopicConfigManager
from pocketmq.remoting.common.service import Service
from pocketmq.remoting.protocol.bodies import ConsumerOffsetTable, SubscriptionGroupWrapper
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.fastjson import BodyFormatError
from pocketmq.remoting.protocol.route import TopicConfigSerializeWrapper

__all__ = ["SYNC_INITIAL_DELAY_S", "SYNC_INTERVAL_S", "SlaveSynchronize"]

logger = logging.getLogger(__name__)

SYNC_INITIAL_DELAY_S = 3.0
SYNC_INTERVAL_S = 10.0
_TIMEOUT_S = 3.0


class _Invoker(Protocol):
    def invoke(
        self, addr: str, request: RemotingCommand, timeout: float | None = ...
    ) -> Awaitable[RemotingCommand]: ...


class _DelayOffsets(Protocol):
    def replace_all(self, data: bytes) -> None: ...

    async def persist_async(self) -> None: ...


class SlaveSynchronize:
    """The four copies above; ``master_addr`` is set from each registration reply."""

    def __init__(
        self,
        *,
        client: _Invoker,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        delay_offsets: _DelayOffsets | None,
    ) -> None:
        self.client = client
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.delay_offsets = delay_offsets
        #: the live master's remoting address (None: no master to copy from)
        self.master_addr: str | None = None
        #: completed rounds (tests)
        self.rounds = 0

    def service(self) -> Service:
        return _SyncService(self)

    async def _fetch(self, addr: str, code: int) -> bytes | None:
        try:
            reply = await self.client.invoke(addr, RemotingCommand.request(code, {}), _TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            logger.warning("slave sync: request %d to master %s failed: %s", code, addr, exc)
            return None
        if reply.code != ResponseCode.SUCCESS:
            logger.warning(
                "slave sync: master %s answered %d to %d: %s", addr, reply.code, code, reply.remark
            )
            return None
        return reply.body or b""

    async def sync_all(self) -> None:
        addr = self.master_addr
        if not addr:
            return
        for code, adopt in (
            (RequestCode.GET_ALL_TOPIC_CONFIG, self._adopt_topics),
            (RequestCode.GET_ALL_CONSUMER_OFFSET, self._adopt_offsets),
            (RequestCode.GET_ALL_DELAY_OFFSET, self._adopt_delay_offsets),
            (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self._adopt_groups),
        ):
            body = await self._fetch(addr, code)
            if body is None:
                continue
            try:
                adopt(body)
            except (BodyFormatError, ValueError) as exc:
                logger.warning("slave sync: unreadable reply to %d from master %s: %s", code, addr, exc)
        if self.delay_offsets is not None:
            try:
                await self.delay_offsets.persist_async()
            except OSError:
                logger.exception("slave sync: could not persist delayOffset.json")
        self.rounds += 1

    def _adopt_topics(self, body: bytes) -> None:
        wrapper = TopicConfigSerializeWrapper.decode(body)
        if wrapper.data_version != self.topics.data_version:
            self.topics.replace_all(wrapper)
            logger.info(
                "slave sync: topic configs updated from the master (%d topics)", len(self.topics.table)
            )

    def _adopt_offsets(self, body: bytes) -> None:
        master = ConsumerOffsetTable.decode(body).offset_table
        self.offsets.offset_table.update(master)
        self.offsets.dirty = True

    def _adopt_delay_offsets(self, body: bytes) -> None:
        if self.delay_offsets is not None and body:
            self.delay_offsets.replace_all(body)

    def _adopt_groups(self, body: bytes) -> None:
        wrapper = SubscriptionGroupWrapper.decode(body)
        if wrapper.data_version != self.groups.data_version:
            self.groups.replace_all(wrapper)
            logger.info(
                "slave sync: subscription groups updated from the master (%d groups)", len(self.groups.table)
            )


class _SyncService(Service):
    def __init__(self, sync: SlaveSynchronize) -> None:
        super().__init__(interval=SYNC_INTERVAL_S, initial_delay=SYNC_INITIAL_DELAY_S, name="slave-sync")
        self.sync = sync

    async def run_once(self) -> None:
        await self.sync.sync_all()
