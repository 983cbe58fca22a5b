"""Message lookups: QUERY_MESSAGE (12) by key through the index, VIEW_MESSAGE_BY_ID (33).

Rules (RocketMQ ``QueryMessageProcessor``):

* QUERY_MESSAGE: messages of ``topic`` whose KEYS (space-separated) or UNIQ_KEY equal ``key``,
  stored within ``[beginTimestamp, endTimestamp]``, at most ``maxNum`` (capped by the store's
  ``maxMsgsNumBatch``, 64); with ext field ``_UNIQUE_KEY_QUERY=true`` (a query by client msgId)
  ``maxNum`` becomes ``defaultQueryMaxNum`` (32). The reply header always carries
  ``indexLastUpdateTimestamp`` and ``indexLastUpdatePhyoffset``; the body is the matching raw
  records back to back; none → 22 QUERY_NOT_FOUND ``can not find message, maybe time range not
  correct``.
* VIEW_MESSAGE_BY_ID: ``offset`` is a CommitLog offset (decoded by the client from an offset
  msgId); the body is that one raw record; no valid record there → 1 ``can not find message by
  the offset, N``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.state import HandlerTable
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from pocketmq.remoting.protocol.message import MessageDecodeError, decode_message

if TYPE_CHECKING:
    from pocketmq.broker.state import BrokerState
    from pocketmq.remoting.transport.connection import RemotingConnection
    from pocketmq.store import MessageStore

#: ``MixAll.UNIQUE_MSG_QUERY_FLAG``
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


@dataclass(eq=False, kw_only=True)
class QueryMessageProcessor(HandlerTable):
    store: MessageStore
    state: BrokerState

    HANDLERS = {
        RequestCode.QUERY_MESSAGE: "query_message",
        RequestCode.VIEW_MESSAGE_BY_ID: "view_message_by_id",
    }

    def query_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        max_num = h.max_num
        if request.ext(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = self.state.config.store.default_query_max_num
        result = self.store.query_message(h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp)
        ext = QueryMessageResponseHeader(  # type: ignore[call-arg, unused-ignore]
            index_last_update_timestamp=result.index_last_update_timestamp,
            index_last_update_phyoffset=result.index_last_update_phyoffset,
        ).to_ext_fields()
        if not result.messages:
            return RemotingCommand.response_to(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                ext,
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, ext, result.body)

    def view_message_by_id(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        raw = self.store.get_message_bytes_by_offset(h.offset) if h.offset >= 0 else None
        if raw is not None:
            try:
                # an offset inside a record reads a random "size": only a real record goes out
                decode_message(raw, read_body=False)
            except MessageDecodeError:
                raw = None
        if raw is None:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, None, raw)
