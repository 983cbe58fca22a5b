"""Offsets and consumer lists: codes 14, 15, 29, 30, 31, 32, 38.

* QUERY_CONSUMER_OFFSET (14): the committed offset; with none, **0 when the queue is young**
  (min offset <= 0 and its first message, if any, is still "in memory"), so a brand-new group
  consumes a young topic from the start even with CONSUME_FROM_LAST_OFFSET, as RocketMQ's
  ``ConsumerManageProcessor`` does (docs/differences.md); otherwise 22 QUERY_NOT_FOUND.
* UPDATE_CONSUMER_OFFSET (15): store the offset (persisted every ``flushConsumerOffsetInterval``).
* GET_MAX_OFFSET (30) / GET_MIN_OFFSET (31) / SEARCH_OFFSET_BY_TIMESTAMP (29) /
  GET_EARLIEST_MSG_STORETIME (32): straight from the store.
* GET_CONSUMER_LIST_BY_GROUP (38): sorted client ids; code 1 "no consumer for this group" when none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.state import HandlerTable
from pocketmq.remoting.protocol.bodies import GetConsumerListByGroupResponseBody
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import QueryNotFoundError, RemoteSystemError
from pocketmq.remoting.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

_memory_limits: dict[int, int] = {}


def memory_limit(ratio_percent: int) -> int:
    """Bytes of CommitLog considered "in memory": physical RAM x ``accessMessageInMemoryMaxRatio`` %."""
    limit = _memory_limits.get(ratio_percent)
    if limit is None:
        try:
            ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):  # pragma: no cover - non-POSIX
            ram = 8 << 30
        limit = _memory_limits[ratio_percent] = ram * ratio_percent // 100
    return limit


if TYPE_CHECKING:
    from pocketmq.broker.client_manager import ConsumerManager
    from pocketmq.broker.offset_manager import ConsumerOffsetManager
    from pocketmq.broker.state import BrokerState
    from pocketmq.remoting.transport.connection import RemotingConnection
    from pocketmq.store import MessageStore


@dataclass(eq=False, kw_only=True)
class ConsumerManageProcessor(HandlerTable):
    store: MessageStore
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    state: BrokerState

    HANDLERS = {
        RequestCode.QUERY_CONSUMER_OFFSET: "query_consumer_offset",
        RequestCode.UPDATE_CONSUMER_OFFSET: "update_consumer_offset",
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: "get_consumer_list_by_group",
        RequestCode.GET_MAX_OFFSET: "get_max_offset",
        RequestCode.GET_MIN_OFFSET: "get_min_offset",
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: "search_offset_by_timestamp",
        RequestCode.GET_EARLIEST_MSG_STORETIME: "get_earliest_msg_storetime",
    }

    def query_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        offset = self.offsets.query_offset(h.consumer_group, h.topic, h.queue_id)
        if offset >= 0:
            return offset_reply(request, offset)
        store = self.store
        min_offset = store.get_min_offset_in_queue(h.topic, h.queue_id)
        if min_offset <= 0 and not self._in_disk(h.topic, h.queue_id, 0):
            return offset_reply(request, 0)
        raise QueryNotFoundError("Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    def _in_disk(self, topic: str, queue_id: int, cq_offset: int) -> bool:
        """``checkInDiskByConsumeOffset``: the unit exists and its message is no longer "in memory"."""
        store = self.store
        if store.get_max_offset_in_queue(topic, queue_id) <= cq_offset:
            return False
        phy = store.get_commit_log_offset_in_queue(topic, queue_id, cq_offset)
        return store.get_max_phy_offset() - phy > memory_limit(
            self.state.config.store.access_message_in_memory_max_ratio
        )

    def update_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self.offsets.commit_offset(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return RemotingCommand.response_to(request)

    def get_consumer_list_by_group(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        cgi = self.consumers.get_consumer_group_info(h.consumer_group)
        ids = cgi.client_ids() if cgi is not None else []
        if not ids:
            raise RemoteSystemError(f"no consumer for this group, {h.consumer_group}")
        body = GetConsumerListByGroupResponseBody(ids).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, None, body)

    def get_max_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext_fields(request.ext_fields)
        return offset_reply(request, self.store.get_max_offset_in_queue(h.topic, h.queue_id))

    def get_min_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.from_ext_fields(request.ext_fields)
        return offset_reply(request, self.store.get_min_offset_in_queue(h.topic, h.queue_id))

    def search_offset_by_timestamp(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        return offset_reply(request, self.store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp))

    def get_earliest_msg_storetime(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        h = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(request.ext_fields)
        ts = self.store.get_earliest_message_time(h.topic, h.queue_id)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, {"timestamp": str(ts)})


def offset_reply(request: RemotingCommand, offset: int) -> RemotingCommand:
    """SUCCESS with ext field ``offset`` (the offset queries' reply)."""
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, {"offset": str(offset)})
