"""Request-reply over RocketMQ 4.x (Java ``DefaultMQProducer.request`` and ``MessageUtil``).

Requester: :func:`request` puts three properties on the message, ``CORRELATION_ID`` (a fresh
id), ``REPLY_TO_CLIENT`` (this process's client id) and ``TTL`` (the timeout in ms), makes sure
the brokers of the topic have this client's heartbeat (a broker can only push a reply to a
client it knows), registers a future under the correlation id in the client instance's
:class:`ReplyTable`, sends the message and waits for the reply.

Responder: a consumer of the request topic builds the answer with
:func:`create_reply_message` (topic ``<cluster>_REPLY_TOPIC`` from the request's ``CLUSTER``
property, the three properties copied, ``MSG_TYPE=reply``) and sends it with
``Producer.send_reply``: SEND_REPLY_MESSAGE_V2 (325). The broker pushes it to the requester as
PUSH_REPLY_MESSAGE_TO_CLIENT (326, ``broker/processor/reply.py``); :func:`on_push_reply`
completes the waiting future. A reply nobody waits for any more (timed out) is logged and
dropped, as RocketMQ does.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import zlib
from typing import TYPE_CHECKING

from pocketmq.client.errors import MQClientError, SendFailedError
from pocketmq.client.message import Message, MessageQueue, SendResult
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import ResponseError
from pocketmq.remoting.protocol.headers import ReplyMessageRequestHeader
from pocketmq.remoting.protocol.message import (
    COMPRESSED_FLAG,
    MessageConst,
    MessageExt,
    string_to_properties,
)
from pocketmq.remoting.protocol.topics import reply_topic

if TYPE_CHECKING:
    from pocketmq.client.producer.producer import Producer
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)

#: the property a reply carries (``MSG_TYPE``) and its value
MSG_TYPE_REPLY = "reply"
#: when the reply reached the requester (RocketMQ's ``ARRIVE_TIME``)
REPLY_ARRIVE_TIME = "ARRIVE_TIME"


class RequestTimeoutError(MQClientError, TimeoutError):
    """The request was sent but no reply came within the timeout (Java
    ``RequestTimeoutException``)."""


class ReplyTable:
    """Correlation id -> the requester's future (one table per client instance)."""

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future[MessageExt]] = {}

    def expect(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self.waiting[correlation_id] = fut
        return fut

    def forget(self, correlation_id: str) -> None:
        self.waiting.pop(correlation_id, None)

    def complete(self, msg: MessageExt) -> bool:
        cid = msg.get_property(MessageConst.CORRELATION_ID)
        fut = self.waiting.pop(cid, None) if cid else None
        if fut is None or fut.done():
            logger.warning("reply message %s matches no waiting request (timed out?)", cid)
            return False
        fut.set_result(msg)
        return True


def reply_message_ext(header: ReplyMessageRequestHeader, body: bytes, arrived_ms: int) -> MessageExt:
    """The reply as the requester sees it, from a PUSH_REPLY_MESSAGE_TO_CLIENT request."""
    if header.sys_flag & COMPRESSED_FLAG:
        body = zlib.decompress(body)
    props = string_to_properties(header.properties or "")
    props[REPLY_ARRIVE_TIME] = str(arrived_ms)

    def host(text: str) -> tuple[str, int]:
        addr, _, port = text.rpartition(":")
        return (addr.lstrip("/"), int(port)) if port.isdigit() else ("", 0)

    msg = MessageExt(
        store_size=0, magic=0, body_crc=0, queue_id=header.queue_id, flag=header.flag, queue_offset=0,
        commit_log_offset=0, sys_flag=header.sys_flag & ~COMPRESSED_FLAG, born_timestamp=header.born_timestamp,
        born_host=host(header.born_host), store_timestamp=header.store_timestamp,
        store_host=host(header.store_host), reconsume_times=header.reconsume_times or 0,
        prepared_transaction_offset=0, body=body, topic=header.topic, properties_str="",
        msg_id=props.get(MessageConst.UNIQ_KEY, ""),
    )  # fmt: skip
    msg._properties = props
    return msg


def on_push_reply(table: ReplyTable, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
    """The client instance's handler of PUSH_REPLY_MESSAGE_TO_CLIENT (326)."""
    try:
        header = ReplyMessageRequestHeader.from_ext_fields(req.ext_fields)
        msg = reply_message_ext(header, req.body or b"", int(time.time() * 1000))
    except (ValueError, zlib.error) as exc:
        logger.warning("bad reply message from %s: %s", conn.remote_addr, exc)
        return RemotingCommand.response_to(req, ResponseCode.SYSTEM_ERROR, str(exc))
    table.complete(msg)
    return RemotingCommand.response_to(req)


def create_reply_message(request: MessageExt, body: bytes) -> Message:
    """The reply to ``request`` (Java ``MessageUtil.createReplyMessage``).

    Raises:
        MQClientError: ``request`` is not a request (no ``CLUSTER`` property: it was not stored by
            a broker, or carries no ``REPLY_TO_CLIENT``).
    """
    cluster = request.get_property(MessageConst.CLUSTER)
    if not cluster:
        raise MQClientError("create reply message fail, requestMessage error, property[CLUSTER] is null.")
    props = {MessageConst.MSG_TYPE: MSG_TYPE_REPLY}
    for key in (MessageConst.CORRELATION_ID, MessageConst.REPLY_TO_CLIENT, MessageConst.TTL):
        value = request.get_property(key)
        if value is not None:
            props[key] = value
    if MessageConst.REPLY_TO_CLIENT not in props:
        raise MQClientError("create reply message fail, requestMessage has no property[REPLY_TO_CLIENT].")
    return Message(reply_topic(cluster), body, properties=props)


async def request(producer: Producer, msg: Message, timeout: float) -> MessageExt:
    """Send ``msg`` and wait ``timeout`` seconds for its reply (see the module docstring).

    Raises:
        RequestTimeoutError: the request was stored but no reply came in time.
        SendFailedError / ResponseError / MessageValidationError: the request was not sent.
    """
    sender = producer._sender
    inst = sender.running_instance()
    started = time.monotonic()
    correlation_id = uuid.uuid4().hex
    msg.properties[MessageConst.CORRELATION_ID] = correlation_id
    msg.properties[MessageConst.REPLY_TO_CLIENT] = inst.client_id
    msg.properties[MessageConst.TTL] = str(int(timeout * 1000))
    if msg.topic not in inst.topic_routes:
        await sender.publish_info(msg.topic)
        await inst.send_heartbeat_to_all_brokers()  # the brokers must know where to push
    fut = inst.replies.expect(correlation_id)
    try:
        await producer.send(msg, timeout=timeout)
        remaining = timeout - (time.monotonic() - started)
        try:
            async with asyncio.timeout(max(remaining, 0.0)):
                return await fut
        except TimeoutError:
            raise RequestTimeoutError(
                f"send request message to <{msg.topic}> OK, but wait reply message timeout, {int(timeout * 1000)} ms."
            ) from None
    finally:
        inst.replies.forget(correlation_id)


async def send_reply(producer: Producer, msg: Message, timeout: float) -> SendResult:
    """Send a reply built by :func:`create_reply_message` (SEND_REPLY_MESSAGE_V2), trying the
    reply topic's queues in turn up to ``1 + retry_times_when_send_failed`` times.

    Raises:
        SendFailedError: every attempt failed; e.g. each answered SYSTEM_ERROR (retriable, as in
            the Java producer) "push reply message fail, channel of <id> not found." when the
            requester is gone or never sent that broker a heartbeat.
        ResponseError: a non-retriable broker answer.
    """
    sender = producer._sender
    inst = sender.running_instance()
    prepared = producer._prep.prepare(msg)
    queues = (await sender.publish_info(msg.topic)).message_queues
    errors: list[BaseException] = []
    start = int(time.monotonic() * 1000)
    for attempt in range(sender.attempts):
        mq: MessageQueue = queues[(start + attempt) % len(queues)]
        addr = inst.find_broker_addr_in_publish(mq.broker_name) or await sender.broker_addr(mq)
        ext = producer._prep.ext(prepared, mq)
        cmd = RemotingCommand(
            int(RequestCode.SEND_REPLY_MESSAGE_V2), 0, 0, None, ext, prepared.body, LanguageCode.PYTHON
        )
        try:
            response = await inst.api.remoting.invoke(addr, cmd, timeout)
            return inst.api.process_send_response(mq, response, prepared.msg_id, addr)
        except ResponseError as exc:
            if not exc.retriable:
                raise
            errors.append(exc)
        except OSError as exc:
            errors.append(exc)
    raise SendFailedError(msg.topic, errors)
