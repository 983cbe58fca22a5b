"""``Producer``: send messages to RocketMQ topics (Java ``DefaultMQProducer``).

Send path: validate → find the topic's publish info (route from the name server; for an
unknown topic the ``TBW102`` template route, so the broker auto-creates it) → pick a queue
(round robin avoiding the broker of the previous failed attempt, or the latency fault
strategy when enabled) → SEND_MESSAGE_V2. A failed attempt is retried on the next queue up to
``retry_times_when_send_failed`` more times when the error is a transport failure or a
:class:`ResponseError` whose ``retriable`` flag is set (``refresh_route`` also refreshes the
route first); any other reply error is raised at once. ``send_msg_timeout`` bounds the whole
send, retries included.

Every message gets a ``UNIQ_KEY`` (the ``msg_id`` of its :class:`SendResult`); bodies longer
than ``compress_msg_body_over_howmuch`` are zlib-compressed (sysFlag bit 0); batches go as one
SEND_BATCH_MESSAGE request whose encoded size is checked against ``max_message_size`` first
(per-message validation and encoding: :mod:`pocketmq.client.producer.prepare`).

The common send (route cached, no hooks) is one coroutine from :meth:`send` to the reply
future: no per-attempt coroutine layers, no enum-member lookups (slow on CPython 3.11).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from pocketmq.client.config import ProducerConfig
from pocketmq.client.errors import (
    BrokerNotFoundError,
    ClientClosedError,
    ClientStateError,
    RemotingConnectError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
    ResponseError,
    SendFailedError,
    TopicRouteNotFoundError,
)
from pocketmq.client.instance import MQClientInstance
from pocketmq.client.message import Message, MessageQueue, SendResult, SendStatus
from pocketmq.client.producer import async_send, transaction
from pocketmq.client.producer.fault import MQFaultStrategy
from pocketmq.client.producer.prepare import MessagePreparer, Prepared
from pocketmq.client.producer.selector import MessageQueueSelector, select_by_hash
from pocketmq.client.route import TopicPublishInfo
from pocketmq.client.validation import check_group
from pocketmq.remoting.common.clock import SYSTEM_CLOCK, Clock
from pocketmq.remoting.protocol.headers import CheckTransactionStateRequestHeader
from pocketmq.remoting.protocol.message import (
    MessageExt,
)

logger = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | None, BaseException | None], None]


class _State(enum.Enum):
    CREATED = 0
    RUNNING = 1
    SHUTDOWN = 2


# Enum members bound to module names: on CPython 3.11 ``Enum.MEMBER`` costs ~80 ns (a metaclass
# attribute lookup) against ~20 ns for a global, and the send path reads these every time.
_RUNNING = _State.RUNNING
_SEND_OK = SendStatus.SEND_OK


class Producer:
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
        if config is None:
            options["producer_group"] = group
            if namesrv is not None:
                options["namesrv_addr"] = namesrv
            config = ProducerConfig(**options)
        check_group(config.producer_group)
        self.config = config
        self.group = config.producer_group
        self.transaction_checker = transaction_checker
        self._fault = MQFaultStrategy(config.send_latency_fault_enable, clock)
        self._publish: dict[str, TopicPublishInfo] = {}
        self._instance: MQClientInstance | None = None
        self._state = _State.CREATED
        self._inflight: set[asyncio.Future[Any]] = set()
        self._prep = MessagePreparer(config)
        self._timeout = config.send_msg_timeout / 1000
        # Hot-path copies of the (frozen) config: read on every send.
        self._attempts = 1 + config.retry_times_when_send_failed
        self._attempts_async = 1 + config.retry_times_when_send_async_failed
        self._vip = config.vip_channel_enabled

    # --------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Join the shared client instance. Raises ClientStateError if started twice."""
        if self._state is not _State.CREATED:
            raise ClientStateError(f"producer {self.group} cannot start in state {self._state.name}")
        inst = await MQClientInstance.acquire(self.config)
        inst.register_producer(self)
        self._instance = inst
        self._state = _State.RUNNING

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Wait (up to ``timeout`` s) for in-flight async sends, then leave the instance."""
        if self._state is not _State.RUNNING:
            self._state = _State.SHUTDOWN
            return
        self._state = _State.SHUTDOWN
        if self._inflight:
            _, pending = await asyncio.wait(set(self._inflight), timeout=timeout)
            for fut in pending:
                fut.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        inst, self._instance = self._instance, None
        if inst is not None:
            await inst.release(producer_group=self.group)

    def detach(self) -> None:
        """Mark shut down without touching the instance (the instance is closing itself)."""
        self._state = _State.SHUTDOWN
        self._instance = None

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _check_running(self) -> None:
        if self._state is not _RUNNING or self._instance is None:
            raise ClientClosedError(f"producer {self.group} is not running ({self._state.name})")

    @property
    def instance(self) -> MQClientInstance:
        if self._state is not _RUNNING or self._instance is None:
            raise ClientClosedError(f"producer {self.group} is not running ({self._state.name})")
        return self._instance

    # -------------------------------------------------------------- ProducerInner protocol
    def publish_topics(self) -> set[str]:
        return set(self._publish)

    def publish_info_needs_update(self, topic: str) -> bool:
        info = self._publish.get(topic)
        return info is not None and not info.ok

    def update_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        if topic in self._publish:
            self._publish[topic] = info

    async def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        await transaction.answer_check(self, broker_addr, msg, header)

    # ------------------------------------------------------------------------- validation
    # ------------------------------------------------------------------------------ routes
    async def _publish_info(self, topic: str) -> TopicPublishInfo:
        info = self._publish.get(topic)
        if info is not None and info.ok:
            return info
        inst = self.instance
        self._publish.setdefault(topic, TopicPublishInfo())
        try:
            await inst.update_topic_route(topic)
        except TopicRouteNotFoundError:
            pass
        info = self._publish[topic]
        if info.ok:
            return info
        # Unknown topic: send with the template's queues; the broker creates it on first send.
        try:
            await inst.update_topic_route(
                topic,
                default_topic=self.config.create_topic_key,
                default_queue_nums=self.config.default_topic_queue_nums,
            )
        except TopicRouteNotFoundError as exc:
            raise TopicRouteNotFoundError(topic, "neither the topic nor its template route exists") from exc
        info = self._publish[topic]
        if not info.ok:
            raise TopicRouteNotFoundError(topic, "route has no writable queue")
        return info

    async def _broker_addr(self, mq: MessageQueue) -> str:
        inst = self.instance
        addr = inst.find_broker_addr_in_publish(mq.broker_name)
        if addr is None:
            try:
                await inst.update_topic_route(mq.topic)
            except TopicRouteNotFoundError:
                pass
            addr = inst.find_broker_addr_in_publish(mq.broker_name)
            if addr is None:
                raise BrokerNotFoundError(mq.broker_name)
        if self.config.vip_channel_enabled:
            host, _, port = addr.rpartition(":")
            addr = f"{host}:{int(port) - 2}"
        return addr

    # -------------------------------------------------------------------------------- send
    async def send(
        self,
        msg: Message,
        *,
        timeout: float | None = None,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        sharding_key: str | None = None,
    ) -> SendResult:
        """Send and wait for the broker's reply.

        ``queue`` sends to that queue; ``selector(queues, msg, arg)`` or ``sharding_key``
        (hash of the key) pick the queue for ordered messages. These forms are not retried on
        another queue, which would break the order.

        Raises:
            MessageValidationError: bad topic, empty/oversize body, bad properties.
            ClientClosedError: the producer is not running.
            ResponseError: a non-retriable broker reply (code and remark included).
            SendFailedError: every attempt failed with retriable errors.
        """
        if self._state is not _RUNNING or self._instance is None:
            self._check_running()  # raises
        p = self._prep.prepare(msg)
        budget = self._timeout if timeout is None else timeout
        if sharding_key is not None:
            selector, arg = select_by_hash, sharding_key
        if queue is not None or selector is not None:
            if queue is None:
                assert selector is not None
                info = await self._publish_info(msg.topic)
                queue = selector(info.message_queues, msg, arg)
            return await self._send_kernel(p, queue, budget)
        return await self._send_with_retries(p, budget, self._attempts)

    async def _send_kernel(self, p: Prepared, mq: MessageQueue, timeout: float) -> SendResult:
        inst = self.instance
        addr = inst.find_broker_addr_in_publish(mq.broker_name)
        if addr is None or self._vip:
            addr = await self._broker_addr(mq)
        api = inst.api
        response = await api.send_message_request(addr, self._prep.ext(p, mq), p.body, timeout, batch=p.batch)
        return api.process_send_response(mq, response, p.msg_id, addr)

    async def _send_with_retries(
        self, p: Prepared, budget: float, times: int, *, begin: float | None = None,
        errors: list[BaseException] | None = None, last_broker: str | None = None,
        refresh: bool = False,
    ) -> SendResult:  # fmt: skip
        # The hot path of every send: one coroutine from here to the reply's future (the route
        # and broker address come from caches; the request is written and its future awaited
        # directly), so a send costs as few Python layers as possible. ``begin``, ``errors``,
        # ``last_broker`` and ``refresh`` continue a send whose first attempt send_async made.
        resumed = begin is not None
        info = self._publish.get(p.topic)
        if info is None or not info.message_queues:
            info = await self._publish_info(p.topic)
        inst = self.instance  # raises ClientClosedError once shut down
        api = inst.api
        fault = self._fault
        if begin is None:
            begin = time.monotonic()
        if errors is None:
            errors = []
        if refresh:
            try:
                await inst.update_topic_route(p.topic)
            except (TopicRouteNotFoundError, RemotingConnectError, RemotingTimeoutError):
                pass
            info = self._publish.get(p.topic) or info
        remaining = budget
        for attempt in range(times):
            if attempt or resumed:
                inst = self.instance  # raises ClientClosedError once shut down
                api = inst.api
                remaining = budget - (time.monotonic() - begin)
                if remaining <= 0:
                    errors.append(RemotingTimeoutError(f"send to {p.topic} timed out after {budget:.3f}s"))
                    break
            if last_broker is None and not fault.enabled:
                # The first attempt without latency fault tolerance: plain round robin, inline.
                queues = info.message_queues
                info.index += 1
                mq = queues[info.index % len(queues)]
            else:
                mq = fault.select_one_message_queue(info, last_broker)
            last_broker = mq.broker_name
            t0 = time.monotonic() if fault.enabled else 0.0
            try:
                addr = inst.find_broker_addr_in_publish(last_broker)
                if addr is None or self._vip:
                    addr = await self._broker_addr(mq)
                response = await api.send_message_request(
                    addr, self._prep.ext(p, mq), p.body, remaining, batch=p.batch
                )
                result = api.process_send_response(mq, response, p.msg_id, addr)
            except (RemotingConnectError, RemotingTimeoutError, BrokerNotFoundError) as exc:
                self._record_latency(mq, t0, failed=True)
                logger.info("send to %s failed (attempt %d): %s", mq, attempt + 1, exc)
                errors.append(exc)
                continue
            except ResponseError as exc:
                self._record_latency(mq, t0, failed=True)
                if not exc.retriable:
                    raise
                errors.append(exc)
                if exc.refresh_route:
                    try:
                        await inst.update_topic_route(p.topic)
                    except (TopicRouteNotFoundError, RemotingConnectError, RemotingTimeoutError):
                        pass
                    info = self._publish.get(p.topic) or info
                continue
            if fault.enabled:
                self._record_latency(mq, t0, failed=False)
            if (
                result.send_status is not _SEND_OK
                and self.config.retry_another_broker_when_not_store_ok
                and attempt + 1 < times
            ):
                continue
            return result
        raise SendFailedError(p.topic, errors) from (errors[-1] if errors else None)

    def _record_latency(self, mq: MessageQueue, t0: float, *, failed: bool) -> None:
        if self._fault.enabled:
            self._fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), failed)

    def send_async(
        self, msg: Message, callback: SendCallback | None = None, *, timeout: float | None = None
    ) -> asyncio.Future[SendResult]:
        """Start a send and return its future; ``callback(result, error)`` runs when it ends.

        Validation errors and a closed producer raise here, synchronously.

        Raises:
            RemotingTooMuchRequestError: ``max_in_flight`` async sends are already running.
        """
        self._check_running()
        if len(self._inflight) >= self.config.max_in_flight:
            raise RemotingTooMuchRequestError(f"{len(self._inflight)} async sends in flight")
        p = self._prep.prepare(msg)
        budget = self._timeout if timeout is None else timeout
        fut = async_send.send_now(self, p, budget)
        if fut is None:
            fut = asyncio.ensure_future(self._send_with_retries(p, budget, self._attempts_async))
        self._track(fut, callback)
        return fut

    def _track(self, fut: asyncio.Future[SendResult], callback: SendCallback | None) -> None:
        self._inflight.add(fut)
        # partial of a module function, not a closure per send (STYLE.md §3.8)
        fut.add_done_callback(partial(_sent, self._inflight, callback))

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Write the request and return; no reply, no retry (Java ``sendOneway``)."""
        self._check_running()
        p = self._prep.prepare(msg)
        if queue is None:
            info = await self._publish_info(msg.topic)
            queue = self._fault.select_one_message_queue(info, None)
        addr = await self._broker_addr(queue)
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
        p = self._prep.prepare_batch(msgs)
        budget = self._timeout if timeout is None else timeout
        if queue is not None:
            return await self._send_kernel(p, queue, budget)
        return await self._send_with_retries(p, budget, self._attempts)

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's writable queues (route fetched if needed)."""
        return list((await self._publish_info(topic)).message_queues)

    # ------------------------------------------------------------------------ transactions
    async def send_in_transaction(
        self,
        msg: Message,
        execute_local: Callable[[Message, SendResult], Awaitable[transaction.TransactionState]],
    ) -> tuple[SendResult, transaction.TransactionState]:
        """Send a half message, run ``execute_local``, then commit or roll back (END_TRANSACTION)."""
        return await transaction.send_in_transaction(self, msg, execute_local)


def _sent(
    inflight: set[asyncio.Future[Any]], callback: SendCallback | None, f: asyncio.Future[SendResult]
) -> None:
    """Done callback of a send_async future: forget it, then run the user's callback."""
    inflight.discard(f)
    if callback is None:
        if not f.cancelled():
            f.exception()  # retrieved: the caller owns the future
        return
    if f.cancelled():
        callback(None, asyncio.CancelledError())
        return
    exc = f.exception()
    try:
        callback(None if exc else f.result(), exc)
    except Exception:
        logger.exception("send callback raised")
