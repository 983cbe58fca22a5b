"""``Producer.send_async``'s common case, kept apart from the general send path.

When the topic's route and the broker connection are ready and no fault strategy is on, the
first attempt is written before ``send_async`` returns and finished in a callback on the reply
future: no task and no loop turn between the call and the request leaving (the request used
to wait for a new task's first step). A failed first attempt continues in the producer's
general retry loop with what is known so far (start time, error, broker to avoid), so the
retry rules are those of :meth:`Producer.send`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable
from functools import partial
from typing import TYPE_CHECKING, Any

from pocketmq.client.api import MQClientAPI
from pocketmq.client.errors import (
    BrokerNotFoundError,
    RemotingConnectError,
    RemotingTimeoutError,
    ResponseError,
    SendFailedError,
)
from pocketmq.client.message import MessageQueue, SendResult, SendStatus
from pocketmq.client.producer.prepare import Prepared

if TYPE_CHECKING:
    from pocketmq.client.producer.producer import Producer

logger = logging.getLogger(__name__)

_SEND_OK = SendStatus.SEND_OK


def send_now(producer: Producer, p: Prepared, budget: float) -> asyncio.Future[SendResult] | None:
    """send_async's common case (route and connection ready, no fault strategy): write the
    first attempt before returning and finish it in a reply callback, with no task and no
    loop turn between the call and the request leaving; a failed attempt continues in
    :meth:`_send_with_retries`. ``None``: take the general path."""
    info = producer._publish.get(p.topic)
    inst = producer._instance
    if info is None or not info.message_queues or producer._fault.enabled or producer._vip or inst is None:
        return None
    queues = info.message_queues
    mq = queues[(info.index + 1) % len(queues)]
    addr = inst.find_broker_addr_in_publish(mq.broker_name)
    if addr is None:
        return None
    api = inst.api
    try:
        reply = api.send_message_request(addr, producer._prep.ext(p, mq), p.body, budget, batch=p.batch)
    except Exception:
        return None  # e.g. too many requests pending: the general path reports it in the future
    if not isinstance(reply, asyncio.Future):
        # The connection is not open (or RPC hooks run): remoting handed back its slow-path
        # coroutine, which has not started, so nothing was written. Drop it unstarted.
        if inspect.iscoroutine(reply):
            reply.close()
        return None
    info.index += 1
    out: asyncio.Future[SendResult] = reply.get_loop().create_future()
    begin = time.monotonic()
    # partial, not a closure: a C call into the callback (STYLE.md §3.8)
    reply.add_done_callback(partial(_first_reply, producer, out, p, budget, begin, mq, addr))
    return out


def _first_reply(
    producer: Producer, out: asyncio.Future[SendResult], p: Prepared, budget: float, begin: float,
    mq: MessageQueue, addr: str, reply: asyncio.Future[Any],
) -> None:  # fmt: skip
    if reply.cancelled():
        out.cancel()
        return
    exc = reply.exception()
    if out.done():  # cancelled by the caller: nothing to deliver (exception retrieved)
        return
    retry: BaseException | None = None
    if exc is None:
        try:
            result = MQClientAPI.process_send_response(mq, reply.result(), p.msg_id, addr)
        except Exception as err:
            exc = err
        else:
            if result.send_status is _SEND_OK or not _retry_on_status(producer):
                out.set_result(result)
                return
    if exc is not None:
        transport = isinstance(exc, RemotingConnectError | RemotingTimeoutError | BrokerNotFoundError)
        if not transport and not (isinstance(exc, ResponseError) and exc.retriable):
            out.set_exception(exc)
            return
        retry = exc
    if producer._attempts_async <= 1:
        failed = SendFailedError(p.topic, [retry] if retry else [])
        failed.__cause__ = retry
        out.set_exception(failed)
        return
    if retry is not None and not isinstance(retry, ResponseError):
        logger.info("send to %s failed (attempt 1): %s", mq, retry)
    task = asyncio.ensure_future(_retry_after(producer, p, budget, begin, mq, retry))
    task.add_done_callback(partial(_chain, out=out))


def _retry_after(
    producer: Producer,
    p: Prepared,
    budget: float,
    begin: float,
    mq: MessageQueue,
    exc: BaseException | None,
) -> Awaitable[SendResult]:
    return producer._send_with_retries(
        p, budget, producer._attempts_async - 1, begin=begin, errors=[] if exc is None else [exc],
        last_broker=mq.broker_name, refresh=isinstance(exc, ResponseError) and exc.refresh_route,
    )  # fmt: skip


def _retry_on_status(producer: Producer) -> bool:
    return producer.config.retry_another_broker_when_not_store_ok and producer._attempts_async > 1


def _chain(task: asyncio.Future[SendResult], *, out: asyncio.Future[SendResult]) -> None:
    if out.done():
        if not task.cancelled():
            task.exception()  # retrieved: the caller gave up on this send
        return
    if task.cancelled():
        out.cancel()
    elif (exc := task.exception()) is not None:
        out.set_exception(exc)
    else:
        out.set_result(task.result())
