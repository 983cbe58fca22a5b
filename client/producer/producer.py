"""``Producer``: send messages to RocketMQ topics (Java ``DefaultMQProducer``).

Send path: validate and encode (:mod:`pocketmq.client.producer.prepare`: every message gets a
``UNIQ_KEY``, the ``msg_id`` of its :class:`SendResult`; bodies longer than
``compress_msg_body_over_howmuch`` are zlib-compressed; batches go as one SEND_BATCH_MESSAGE
request checked against ``max_message_size``) → the send attempts, their retries and the latency
fault bookkeeping (:class:`~pocketmq.client.producer.sender.Sender`, shared by :meth:`send`,
:meth:`send_batch` and :meth:`send_async`). ``send_msg_timeout`` bounds the whole send, retries
included.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from pocketmq.client.config import ProducerConfig, resolve_config
from pocketmq.client.hooks import SendMessageHook, install_send_hooks
from pocketmq.client.instance import MQClientInstance
from pocketmq.client.lifecycle import RUNNING, SHUTDOWN, AsyncClient, Lifecycle
from pocketmq.client.message import Message, MessageQueue, SendResult
from pocketmq.client.namespace import unwrap_queue, wrap, wrap_queue
from pocketmq.client.producer import request_reply, transaction
from pocketmq.client.producer.prepare import MessagePreparer, Prepared
from pocketmq.client.producer.selector import MessageQueueSelector, select_by_hash
from pocketmq.client.producer.sender import Sender, SendFuture
from pocketmq.client.producer.window import SendWindow
from pocketmq.client.route import TopicPublishInfo
from pocketmq.client.trace import hook_producer
from pocketmq.client.validation import check_group
from pocketmq.remoting.common.clock import SYSTEM_CLOCK, Clock
from pocketmq.remoting.protocol.headers import CheckTransactionStateRequestHeader
from pocketmq.remoting.protocol.message import (
    MessageExt,
)

logger = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | None, BaseException | None], None]


class Producer(AsyncClient):
    """An asyncio producer; use as ``async with Producer("PG", namesrv="127.0.0.1:9876") as p``.

    Args:
        group: producer group (only transactional checks use it for routing).
        namesrv: name server list ``host:port;host:port`` (default: env ``NAMESRV_ADDR``).
        config: a full :class:`ProducerConfig` instead of keyword options.
        transaction_checker: async ``(MessageExt) -> TransactionState`` answering the broker's
            CHECK_TRANSACTION_STATE for half messages of this group.
        **options: any :class:`ProducerConfig` field (``retry_times_when_send_failed=...``).
    """

    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv: str | None = None,
        *,
        config: ProducerConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        transaction_checker: transaction.TransactionChecker | None = None,
        **options: Any,
    ) -> None:
        config = resolve_config(ProducerConfig, config, "producer_group", group, namesrv, options)
        if config.namespace:  # the group on the wire is 'ns%group' (client/namespace.py)
            config = config.model_copy(
                update={"producer_group": wrap(config.namespace, config.producer_group)}
            )
        self._ns = config.namespace or None
        check_group(config.producer_group)
        self.config = config
        self.group = config.producer_group
        self.transaction_checker = transaction_checker
        self._life = Lifecycle("producer", self.group)
        self._inflight: set[asyncio.Future[Any]] = set()
        self._window = SendWindow(config.max_in_flight)
        # send_first's done work, the same for every send (the callback is on its future)
        self._first_done = partial(_sent_first, self._inflight, self._window)
        self._prep = MessagePreparer(config)
        self._sender = Sender(config, self._prep, self._life.closed_error, clock)
        self._timeout = config.send_msg_timeout / 1000
        if config.enable_msg_trace:  # message traces: shadows send/start/shutdown (client/trace.py)
            hook_producer(self)
        self._send_hooks: list[SendMessageHook] | None = None

    def register_send_message_hook(self, hook: SendMessageHook) -> None:
        """Call ``hook.send_message_before(ctx)`` / ``send_message_after(ctx)`` around every send
        (RocketMQ's ``registerSendMessageHook``; :mod:`pocketmq.client.hooks`)."""
        if self._send_hooks is None:
            self._send_hooks = []
            install_send_hooks(self, self._send_hooks)
        self._send_hooks.append(hook)

    # --------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Join the shared client instance. Raises ClientStateError if started twice."""
        self._life.check(RUNNING)
        inst = await MQClientInstance.acquire(self.config)
        inst.register_producer(self)
        self._sender.loop = asyncio.get_running_loop()
        self._sender.instance = inst
        self._life.move(RUNNING)

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Wait (up to ``timeout`` s) for in-flight async sends, then leave the instance."""
        if self._life.move(SHUTDOWN) is not RUNNING:
            return
        # retries of in-flight sends stop here (ClientClosedError); their replies still arrive
        inst, self._sender.instance = self._sender.instance, None
        if self._inflight:
            _, pending = await asyncio.wait(set(self._inflight), timeout=timeout)
            for fut in pending:
                fut.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        if inst is not None:
            await inst.release(producer_group=self.group)

    def detach(self) -> None:
        """Mark shut down without touching the instance (the instance is closing itself)."""
        self._life.move(SHUTDOWN)
        self._sender.instance = None

    def _check_running(self) -> None:
        if self._sender.instance is None:
            raise self._life.closed_error()

    @property
    def instance(self) -> MQClientInstance:
        """The shared client instance. Raises ClientClosedError when not running."""
        return self._sender.running_instance()

    def running_instance(self) -> MQClientInstance:
        """:attr:`instance` as a method, for the transaction path: a property is called from C
        (a new interpreter frame), a method inline, and this reads the sender's slot itself."""
        inst = self._sender.instance
        if inst is None:
            raise self._life.closed_error()
        return inst

    # -------------------------------------------------------------- ProducerInner protocol
    def publish_topics(self) -> set[str]:
        return set(self._sender.publish)

    def publish_info_needs_update(self, topic: str) -> bool:
        info = self._sender.publish.get(topic)
        return info is not None and not info.ok

    def update_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        publish = self._sender.publish
        if topic in publish:
            publish[topic] = info

    async def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        await transaction.answer_check(self, broker_addr, msg, header)

    # -------------------------------------------------------------------------------- send
    def send(
        self,
        msg: Message,
        *,
        timeout: float | None = None,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> Coroutine[Any, Any, SendResult]:
        """Send and wait for the broker's reply (a coroutine, to await).

        ``queue`` sends to that queue; ``selector(queues, msg, arg)`` or ``sharding_key``
        (hash of the key) pick the queue for ordered messages. These forms are not retried on
        another queue, which would break the order.

        Raises (when awaited):
            MessageValidationError: bad topic, empty/oversize body, bad properties.
            ClientClosedError: the producer is not running.
            ResponseError: a non-retriable broker reply (code and remark included).
            SendFailedError: every attempt failed with retriable errors.
        """
        sender = self._sender
        if (
            sender.instance is not None
            and self._ns is None
            and queue is None
            and selector is None
            and sharding_key is None
        ):
            # The common send (no namespace, no queue choice): the sender's coroutine itself,
            # with no frame of this method in between (one coroutine less per send).
            try:
                p = self._prep.prepare(msg)
            except Exception:  # the general path raises it again, when awaited
                pass
            else:
                return sender.send(p, self._timeout if timeout is None else timeout, sender.attempts)
        return self._send(msg, timeout, queue, selector, arg, sharding_key)

    async def _send(
        self, msg: Message, timeout: float | None, queue: MessageQueue | None,
        selector: MessageQueueSelector | None, arg: Any, sharding_key: str | None,
    ) -> SendResult:  # fmt: skip
        """:meth:`send`'s general path."""
        sender = self._sender
        if sender.instance is None:
            raise self._life.closed_error()
        ns = self._ns
        if ns is not None:
            msg, queue = replace(msg, topic=wrap(ns, msg.topic)), queue and wrap_queue(ns, queue)
        p = self._prep.prepare(msg)
        budget = self._timeout if timeout is None else timeout
        if sharding_key is not None:
            selector, arg = select_by_hash, sharding_key
        if queue is not None or selector is not None:
            if queue is None:
                assert selector is not None
                info = await sender.publish_info(msg.topic)
                queue = selector(info.message_queues, msg, arg)
            result = await sender.send_to(p, queue, budget)
        else:
            result = await sender.send(p, budget, sender.attempts)
        if ns is not None:
            result.message_queue = unwrap_queue(ns, result.message_queue)
        return result

    def send_async(
        self, msg: Message, callback: SendCallback | None = None, *, timeout: float | None = None
    ) -> asyncio.Future[SendResult]:
        """Start a send and return its future; ``callback(result, error)`` runs when it ends.

        When ``max_in_flight`` sends are already in flight the send waits for one of them to end
        (RocketMQ's async semaphore); the wait counts in its timeout, and a send that got no slot
        in time fails with RemotingTimeoutError. A loop that sends faster than the broker replies
        should ``await`` :meth:`submit` instead, which waits before it starts the send.

        Validation errors and a closed producer raise here, synchronously.
        """
        if self._sender.instance is None:  # inline of _check_running
            raise self._life.closed_error()
        if self._ns is not None:
            msg = replace(msg, topic=wrap(self._ns, msg.topic))
        p = self._prep.prepare(msg)
        budget = self._timeout if timeout is None else timeout
        window = self._window
        inflight = self._inflight
        if window.busy < window.size:
            window.busy += 1
            sender = self._sender
            # the common case runs its done work from its reply callback, not as a done callback
            first = sender.send_first(p, budget, self._first_done, p.born)
            if first is not None:
                first.callback = callback  # before any reply: it is read in a later turn
                fut: asyncio.Future[SendResult] = first
            else:
                fut = asyncio.ensure_future(sender.send(p, budget, sender.attempts_async))
                # partial of a module function, not a closure per send (docs/development.md, hot paths)
                fut.add_done_callback(partial(_sent, inflight, window, callback))
        else:
            fut = asyncio.ensure_future(self._send_when_free(p, budget))
            # the coroutine frees its own slot
            fut.add_done_callback(partial(_sent, inflight, None, callback))
        inflight.add(fut)
        return fut

    async def _send_when_free(self, p: Prepared, budget: float) -> SendResult:
        window = self._window
        remaining = await window.wait(budget)
        try:
            sender = self._sender
            fut = sender.send_first(p, remaining)
            if fut is None:
                return await sender.send(p, remaining, sender.attempts_async)
            return await fut
        finally:
            window.release()

    async def submit(
        self, msg: Message, callback: SendCallback | None = None, *, timeout: float | None = None
    ) -> asyncio.Future[SendResult]:
        """Wait for a free send slot (at most ``max_in_flight`` sends in flight), then start the
        send as :meth:`send_async` does and return its future: backpressure for a sending loop.

        The wait counts in the send's ``timeout`` (default ``send_msg_timeout``).

        Raises:
            RemotingTimeoutError: no slot was freed within the timeout.
            MessageValidationError, ClientClosedError: as :meth:`send_async`.
        """
        self._check_running()
        window = self._window
        if window.busy >= window.size:
            budget = self._timeout if timeout is None else timeout
            timeout = await window.wait(budget)
            window.busy -= 1  # handed to send_async, which takes it back before anything else runs
        return self.send_async(msg, callback, timeout=timeout)

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Write the request and return; no reply, no retry (Java ``sendOneway``)."""
        self._check_running()
        if self._ns is not None:
            msg, queue = replace(msg, topic=wrap(self._ns, msg.topic)), queue and wrap_queue(self._ns, queue)
        p = self._prep.prepare(msg)
        sender = self._sender
        if queue is None:
            info = await sender.publish_info(msg.topic)
            queue = sender.fault.select_one_message_queue(info, None)
        addr = await sender.broker_addr(queue)
        await self.instance.api.send_message_oneway(addr, self._prep.ext(p, queue), p.body)

    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout: float | None = None
    ) -> SendResult:
        """Send several messages of one topic in one request (SEND_BATCH_MESSAGE).

        Raises:
            MessageValidationError: empty batch, mixed topics, retry topics, delay levels, or an
                encoded batch larger than ``max_message_size``.
        """
        self._check_running()
        ns = self._ns
        if ns is not None:
            msgs = [replace(m, topic=wrap(ns, m.topic)) for m in msgs]
            queue = queue and wrap_queue(ns, queue)
        p = self._prep.prepare_batch(msgs)
        budget = self._timeout if timeout is None else timeout
        sender = self._sender
        if queue is not None:
            result = await sender.send_to(p, queue, budget)
        else:
            result = await sender.send(p, budget, sender.attempts)
        if ns is not None:
            result.message_queue = unwrap_queue(ns, result.message_queue)
        return result

    # ------------------------------------------------------------------------ request-reply
    async def request(self, msg: Message, timeout: float = 3.0) -> MessageExt:
        """Send ``msg`` as a request and wait for its reply (RocketMQ 4.x request-reply).

        The responder answers with :meth:`send_reply` of
        :func:`~pocketmq.client.producer.request_reply.create_reply_message`.

        Raises:
            RequestTimeoutError: the request was sent but no reply came within ``timeout`` s.
            SendFailedError, ResponseError, MessageValidationError: the request was not sent.
        """
        if self._ns is not None:
            msg = replace(msg, topic=wrap(self._ns, msg.topic))
        return await request_reply.request(self, msg, timeout)

    async def send_reply(self, msg: Message, *, timeout: float | None = None) -> SendResult:
        """Send a reply message (SEND_REPLY_MESSAGE_V2); the broker pushes it to the requester.

        Raises:
            SendFailedError: every attempt failed, e.g. with SYSTEM_ERROR when the broker could
                not reach the requester (gone, or it never sent that broker a heartbeat).
        """
        return await request_reply.send_reply(self, msg, self._timeout if timeout is None else timeout)

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues (route fetched if needed)."""
        return list((await self._sender.publish_info(topic)).message_queues)

    # ------------------------------------------------------------------------ transactions
    #: ``send_in_transaction(msg, execute_local)``: send a half message, run ``execute_local``,
    #: then commit or roll back (END_TRANSACTION). The transaction module's coroutine function
    #: itself as the method (the producer its first argument): no frame of a method in between.
    send_in_transaction = transaction.send_in_transaction

    def send_half(self, msg: Message) -> Coroutine[Any, Any, SendResult]:
        """:meth:`send` of ``msg`` as a transactional half (``TRAN_MSG``, ``PGROUP``).

        A message of the common shape, with no namespace and ``send`` not shadowed (traces,
        send hooks), goes straight to the sender (prepared without touching ``msg``); any other
        through ``send`` with those properties set for the send."""
        sender = self._sender
        if self._ns is None and sender.instance is not None and "send" not in self.__dict__:
            p = self._prep.prepare_half(msg)
            if p is not None:
                return sender.send(p, self._timeout, sender.attempts)
        return transaction.send_half(self, msg)


def _sent_first(
    inflight: set[asyncio.Future[Any]], window: SendWindow, f: SendFuture, result: SendResult | None = None
) -> None:
    """send_first's done work (:func:`_sent` with the future's own callback): called by the
    reply callback with the result, or as a done callback (cancelled, or finished by a retry)."""
    if result is None:
        _sent(inflight, window, f.callback, f)
        return
    # the reply's case inline (one call less per send): forget, free the slot, call back
    inflight.discard(f)
    window.busy -= 1
    if window.waiters:
        window.wake()
    callback = f.callback
    if callback is not None:
        try:
            callback(result, None)
        except Exception:
            logger.exception("send callback raised")


def _sent(
    inflight: set[asyncio.Future[Any]], window: SendWindow | None, callback: SendCallback | None,
    f: asyncio.Future[SendResult], result: SendResult | None = None,
) -> None:  # fmt: skip
    """Done callback of a send_async future: forget it, free its slot (``window``: the send held
    one), then run the user's callback (``result``: the future's, given by the first attempt's
    reply, not read back from the future)."""
    inflight.discard(f)
    if window is not None:
        # inline of SendWindow.release (one call less per send)
        window.busy -= 1
        if window.waiters:
            window.wake()
    if result is not None:
        exc = None
    elif callback is None:
        if not f.cancelled():
            f.exception()  # retrieved: the caller owns the future
        return
    elif f.cancelled():
        callback(None, asyncio.CancelledError())
        return
    else:
        exc = f.exception()
        result = None if exc else f.result()
    if callback is not None:
        try:
            callback(result, exc)
        except Exception:
            logger.exception("send callback raised")
