"""Request-reply: SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325), as RocketMQ 4.9's
``ReplyMessageProcessor``.

A requester (``Producer.request``) sends an ordinary message carrying ``CORRELATION_ID``,
``REPLY_TO_CLIENT`` (its client id) and ``TTL``. The responder answers with a message to
``<cluster>_REPLY_TOPIC`` with ``MSG_TYPE=reply`` and the same three properties, sent with code
324 (long header names) or 325 (the SEND_MESSAGE_V2 short names). This processor:

1. finds the requester's connection by ``REPLY_TO_CLIENT`` among the clients that sent this
   broker a heartbeat (producers first, as RocketMQ's ``ProducerManager.findChannel``, then
   consumers: a client id is per process, so any of its connections reaches its instance);
2. pushes PUSH_REPLY_MESSAGE_TO_CLIENT (326) with a ``ReplyMessageRequestHeader`` (the send
   header plus born/store host and store time; ``PUSH_REPLY_TIME`` added to the properties)
   and the body, and waits for the client's answer;
3. answers the responder: SUCCESS with ``msgId`` "0" and ``queueOffset`` 0 when the push was
   acknowledged, else SYSTEM_ERROR with RocketMQ's remark (``push reply message fail, channel
   of <id> not found.``, ``reply message properties[REPLY_TO_CLIENT] is null``, ...);
4. with ``storeReplyMessageEnable`` (default true) also stores the reply in the reply topic
   through the send path (its outcome is logged, not returned, as in RocketMQ).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from inspect import isawaitable
from typing import TYPE_CHECKING, Protocol

from pocketmq.broker.processor.peer_address import born_host_of
from pocketmq.broker.state import BrokerState, Registrar
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingError
from pocketmq.remoting.protocol.headers import (
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from pocketmq.remoting.protocol.message import (
    MessageConst,
    format_host_ip,
    get_property,
    properties_to_string,
    string_to_properties,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from pocketmq.broker.client_manager import ConsumerManager, ProducerManager
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)

#: how long the broker waits for the requester to acknowledge a pushed reply (RocketMQ: 3 s)
PUSH_TIMEOUT_S = 3.0


class ClientInvoker(Protocol):
    """Sends a request to a client over its connection and awaits the answer (the server)."""

    async def invoke(
        self, conn: RemotingConnection, request: RemotingCommand, timeout: float
    ) -> RemotingCommand: ...


def find_client_connection(
    client_id: str, producers: ProducerManager, consumers: ConsumerManager
) -> RemotingConnection | None:
    """A live connection of the client ``client_id`` (producer heartbeats first)."""
    for table in (producers.table, consumers.table):
        for entry in table.values():
            channels = entry if isinstance(entry, dict) else entry.channels
            for conn, info in channels.items():
                if info.client_id == client_id and getattr(conn, "is_active", True):
                    found: RemotingConnection = conn
                    return found
    return None


@dataclass(eq=False, kw_only=True)
class ReplyMessageProcessor:
    producers: ProducerManager
    consumers: ConsumerManager
    server: ClientInvoker
    state: BrokerState
    now_ms: Callable[[], int]
    #: the send processor's entry, used to store replies (``storeReplyMessageEnable``)
    store_reply: Callable[[RemotingConnection, RemotingCommand], object]
    push_timeout: float = PUSH_TIMEOUT_S
    _codes: tuple[int, int] = field(
        default=(int(RequestCode.SEND_REPLY_MESSAGE), int(RequestCode.SEND_REPLY_MESSAGE_V2)), init=False
    )

    def register(self, register: Registrar) -> None:
        for code in self._codes:
            register(code, self.process)

    async def process(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        v2 = request.code == RequestCode.SEND_REPLY_MESSAGE_V2
        ext = request.ext_fields
        header = (
            SendMessageRequestHeader.from_ext_fields_v2(ext)
            if v2
            else SendMessageRequestHeader.from_ext_fields(ext)
        )
        ok, remark = await self._push(conn, header, request.body or b"")
        if ok:
            out = SendMessageResponseHeader(msg_id="0", queue_id=header.queue_id, queue_offset=0)
            response = RemotingCommand.response_to(
                request, ResponseCode.SUCCESS, None, ext_fields=out.to_ext_fields()
            )
        else:
            logger.warning("%s", remark)
            response = RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark)
        if self.state.config.store_reply_message_enable:
            await self._store(conn, request, v2)
        return response

    async def _push(
        self, conn: RemotingConnection, header: SendMessageRequestHeader, body: bytes
    ) -> tuple[bool, str]:
        props = header.properties or ""
        requester = get_property(props, MessageConst.REPLY_TO_CLIENT)
        if not requester:
            return False, f"reply message properties[{MessageConst.REPLY_TO_CLIENT}] is null"
        target = find_client_connection(requester, self.producers, self.consumers)
        if target is None:
            return False, f"push reply message fail, channel of <{requester}> not found."
        table = string_to_properties(props)
        table[MessageConst.PUSH_REPLY_TIME] = str(self.now_ms())
        host, port = born_host_of(conn)
        store_host = self.state.store_host
        push_header = ReplyMessageRequestHeader(
            producer_group=header.producer_group, topic=header.topic, default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums, queue_id=header.queue_id,
            sys_flag=header.sys_flag, born_timestamp=header.born_timestamp, flag=header.flag,
            properties=properties_to_string(table), reconsume_times=header.reconsume_times,
            unit_mode=header.unit_mode, born_host=f"{format_host_ip(host)}:{port}",
            store_host=f"{format_host_ip(store_host[0])}:{store_host[1]}", store_timestamp=self.now_ms(),
        )  # fmt: skip
        push = RemotingCommand.request(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
            push_header.to_ext_fields(),
            body,
            language=LanguageCode.JAVA,
        )
        try:
            answer = await self.server.invoke(target, push, self.push_timeout)
        except (RemotingError, OSError) as exc:
            return False, f"push reply message to {requester} fail. {exc}"
        if answer.code != ResponseCode.SUCCESS:
            return False, f"push reply message to {requester} return response code {answer.code}"
        return True, ""

    async def _store(self, conn: RemotingConnection, request: RemotingCommand, v2: bool) -> None:
        code = RequestCode.SEND_MESSAGE_V2 if v2 else RequestCode.SEND_MESSAGE
        copy = RemotingCommand.request(
            code, dict(request.ext_fields or {}), request.body, language=request.language
        )
        copy.opaque = request.opaque
        result = self.store_reply(conn, copy)
        if isawaitable(result):
            result = await result
        if isinstance(result, RemotingCommand) and result.code not in (
            ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
            ResponseCode.SLAVE_NOT_AVAILABLE,
        ):  # fmt: skip
            logger.warning("storing a reply message failed: code %s %s", result.code, result.remark)
