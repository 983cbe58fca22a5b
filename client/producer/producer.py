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
SEND_BATCH_MESSAGE request whose encoded size is checked against ``max_message_size`` first.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pocketmq.client.config import ProducerConfig
from pocketmq.client.errors import (
    BrokerNotFoundError,
    ClientClosedError,
    ClientStateError,
    MessageValidationError,
    RemotingConnectError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
    ResponseError,
    SendFailedError,
    TopicRouteNotFoundError,
)
from pocketmq.client.instance import MQClientInstance
from pocketmq.client.message import Message, MessageQueue, SendResult
from pocketmq.client.producer import transaction
from pocketmq.client.producer.fault import MQFaultStrategy
from pocketmq.client.producer.selector import MessageQueueSelector, select_by_hash
from pocketmq.client.route import TopicPublishInfo, check_group, check_send_topic, is_retry_topic
from pocketmq.remoting.common.clock import SYSTEM_CLOCK, Clock
from pocketmq.remoting.protocol.headers import CheckTransactionStateRequestHeader
from pocketmq.remoting.protocol.message import (
    COMPRESSED_FLAG,
    MAX_PROPERTIES_LENGTH,
    MessageConst,
    MessageExt,
    UniqIdGenerator,
    encode_batch,
    pack_host_ip,
    properties_to_string,
)

logger = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | None, BaseException | None], None]


class _State(enum.Enum):
    CREATED = 0
    RUNNING = 1
    SHUTDOWN = 2


class _Prepared:
    """A message encoded once for every attempt: body, sysFlag, properties, ids."""

    __slots__ = (
        "batch",
        "body",
        "flag",
        "max_reconsume",
        "msg_id",
        "props",
        "reconsume",
        "sys_flag",
        "topic",
    )

    def __init__(
        self, topic: str, body: bytes, sys_flag: int, flag: int, props: str, msg_id: str, batch: bool
    ) -> None:
        self.topic = topic
        self.body = body
        self.sys_flag = sys_flag
        self.flag = flag
        self.props = props
        self.msg_id = msg_id
        self.batch = batch
        self.reconsume: str | None = None
        self.max_reconsume: str | None = None


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
        self._uniq = UniqIdGenerator(pack_host_ip(config.client_ip) if "." in config.client_ip else None)
        self._timeout = config.send_msg_timeout / 1000
        self._valid_topics: set[str] = set()
        self._create_topic_key = config.create_topic_key
        self._default_queue_nums = str(config.default_topic_queue_nums)

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
        if self._state is not _State.RUNNING or self._instance is None:
            raise ClientClosedError(f"producer {self.group} is not running ({self._state.name})")

    @property
    def instance(self) -> MQClientInstance:
        if self._state is not _State.RUNNING or self._instance is None:
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
    def _validate(self, msg: Message) -> None:
        if not isinstance(msg, Message):
            raise MessageValidationError(f"expected a Message, got {type(msg).__name__}")
        if msg.topic not in self._valid_topics:
            check_send_topic(msg.topic)
            if len(self._valid_topics) < 10_000:
                self._valid_topics.add(msg.topic)
        body = msg.body
        if not isinstance(body, bytes | bytearray | memoryview):
            raise MessageValidationError(f"message body must be bytes, got {type(body).__name__}")
        size = len(body)
        if size == 0:
            raise MessageValidationError("the message body length is zero")
        if size > self.config.max_message_size:
            raise MessageValidationError(
                f"the message body size {size} is over the max value {self.config.max_message_size}"
            )
        if msg.delay_level < 0:
            raise MessageValidationError(f"delay level {msg.delay_level} is negative")
        for k, v in msg.properties.items():
            if not k or "\x01" in k or "\x02" in k or "\x01" in str(v) or "\x02" in str(v):
                raise MessageValidationError(f"property {k!r} contains a reserved separator character")

    def _prepare(self, msg: Message) -> _Prepared:
        self._validate(msg)
        body = bytes(msg.body)
        sys_flag = 0
        if len(body) >= self.config.compress_msg_body_over_howmuch:
            body = zlib.compress(body, self.config.compress_level)
            sys_flag |= COMPRESSED_FLAG
        if not msg.properties and not msg.keys and not msg.delay_level and msg.wait_store_msg_ok:
            # The common case, without building a dict: TAGS and UNIQ_KEY only.
            uniq = self._uniq.create()
            tags = msg.tags
            props_str = f"TAGS\x01{tags}\x02UNIQ_KEY\x01{uniq}" if tags else f"UNIQ_KEY\x01{uniq}"
            if tags and ("\x01" in tags or "\x02" in tags):
                raise MessageValidationError("tags contain a reserved separator character")
            return _Prepared(msg.topic, body, sys_flag, msg.flag, props_str, uniq, False)
        props = msg.wire_properties()
        uniq = props.get(MessageConst.UNIQ_KEY) or self._uniq.create()
        props[MessageConst.UNIQ_KEY] = uniq
        if props.get(MessageConst.TRAN_MSG) == "true":
            sys_flag |= 0x4  # TRANSACTION_PREPARED_TYPE
        retry = is_retry_topic(msg.topic)
        reconsume = props.pop(MessageConst.RECONSUME_TIME, None) if retry else None
        max_reconsume = props.pop(MessageConst.MAX_RECONSUME_TIMES, None) if retry else None
        props_str = properties_to_string(props)
        if len(props_str) > MAX_PROPERTIES_LENGTH // 3 and len(props_str.encode()) > MAX_PROPERTIES_LENGTH:
            raise MessageValidationError(f"message properties are longer than {MAX_PROPERTIES_LENGTH} bytes")
        prepared = _Prepared(msg.topic, body, sys_flag, msg.flag, props_str, uniq, False)
        prepared.reconsume = reconsume
        prepared.max_reconsume = max_reconsume
        return prepared

    def _ext(self, p: _Prepared, mq: MessageQueue) -> dict[str, str]:
        ext = {
            "a": self.group,
            "b": p.topic,
            "c": self._create_topic_key,
            "d": self._default_queue_nums,
            "e": str(mq.queue_id),
            "f": str(p.sys_flag),
            "g": str(time.time_ns() // 1_000_000),
            "h": str(p.flag),
            "i": p.props,
            "j": p.reconsume or "0",
            "k": "false",
            "m": "true" if p.batch else "false",
            "n": mq.broker_name,
        }
        if p.max_reconsume is not None:
            ext["l"] = p.max_reconsume
        return ext

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
        self._check_running()
        p = self._prepare(msg)
        budget = self._timeout if timeout is None else timeout
        if sharding_key is not None:
            selector, arg = select_by_hash, sharding_key
        if queue is not None or selector is not None:
            if queue is None:
                assert selector is not None
                info = await self._publish_info(msg.topic)
                queue = selector(info.message_queues, msg, arg)
            return await self._send_kernel(p, queue, budget)
        return await self._send_with_retries(p, budget, 1 + self.config.retry_times_when_send_failed)

    async def _send_kernel(self, p: _Prepared, mq: MessageQueue, timeout: float) -> SendResult:
        addr = await self._broker_addr(mq)
        api = self.instance.api
        return await api.send_message(addr, mq, self._ext(p, mq), p.body, p.msg_id, timeout, batch=p.batch)

    async def _send_with_retries(self, p: _Prepared, budget: float, times: int) -> SendResult:
        begin = time.monotonic()
        info = await self._publish_info(p.topic)
        errors: list[BaseException] = []
        last_broker: str | None = None
        for attempt in range(times):
            remaining = budget - (time.monotonic() - begin)
            if remaining <= 0:
                errors.append(RemotingTimeoutError(f"send to {p.topic} timed out after {budget:.3f}s"))
                break
            mq = self._fault.select_one_message_queue(info, last_broker)
            last_broker = mq.broker_name
            t0 = time.monotonic()
            try:
                result = await self._send_kernel(p, mq, remaining)
            except (RemotingConnectError, RemotingTimeoutError, BrokerNotFoundError) as exc:
                self._fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), True)
                logger.info("send to %s failed (attempt %d): %s", mq, attempt + 1, exc)
                errors.append(exc)
                continue
            except ResponseError as exc:
                self._fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), True)
                if not exc.retriable:
                    raise
                errors.append(exc)
                if exc.refresh_route:
                    try:
                        await self.instance.update_topic_route(p.topic)
                    except (TopicRouteNotFoundError, RemotingConnectError, RemotingTimeoutError):
                        pass
                    info = self._publish.get(p.topic) or info
                continue
            self._fault.update_fault_item(mq.broker_name, int((time.monotonic() - t0) * 1000), False)
            if (
                result.send_status.name != "SEND_OK"
                and self.config.retry_another_broker_when_not_store_ok
                and attempt + 1 < times
            ):
                continue
            return result
        raise SendFailedError(p.topic, errors) from (errors[-1] if errors else None)

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
        p = self._prepare(msg)
        budget = self._timeout if timeout is None else timeout
        fut = asyncio.ensure_future(
            self._send_with_retries(p, budget, 1 + self.config.retry_times_when_send_async_failed)
        )
        self._track(fut, callback)
        return fut

    def _track(self, fut: asyncio.Future[SendResult], callback: SendCallback | None) -> None:
        self._inflight.add(fut)

        def done(f: asyncio.Future[SendResult]) -> None:
            self._inflight.discard(f)
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

        fut.add_done_callback(done)

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Write the request and return; no reply, no retry (Java ``sendOneway``)."""
        self._check_running()
        p = self._prepare(msg)
        if queue is None:
            info = await self._publish_info(msg.topic)
            queue = self._fault.select_one_message_queue(info, None)
        addr = await self._broker_addr(queue)
        await self.instance.api.send_message_oneway(addr, self._ext(p, queue), p.body)

    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout: float | None = None
    ) -> SendResult:
        """Send several messages of one topic in one request (SEND_BATCH_MESSAGE).

        Raises:
            MessageValidationError: empty batch, mixed topics, retry topics, delay levels, or an
                encoded batch larger than ``max_message_size``.
        """
        self._check_running()
        if not msgs:
            raise MessageValidationError("a batch needs at least one message")
        topic = msgs[0].topic
        ids: list[str] = []
        items: list[tuple[int, bytes, str]] = []
        for m in msgs:
            self._validate(m)
            if m.topic != topic:
                raise MessageValidationError("all messages of a batch must have the same topic")
            if is_retry_topic(m.topic):
                raise MessageValidationError("retry topics are not supported in batches")
            if m.delay_level > 0:
                raise MessageValidationError("delay levels are not supported in batches")
            props = m.wire_properties()
            uniq = props.get(MessageConst.UNIQ_KEY) or self._uniq.create()
            props[MessageConst.UNIQ_KEY] = uniq
            ids.append(uniq)
            items.append((m.flag, bytes(m.body), properties_to_string(props)))
        body = encode_batch(items)
        if len(body) > self.config.max_message_size:
            raise MessageValidationError(
                f"the batch size {len(body)} is over the max value {self.config.max_message_size}"
            )
        wait = "true" if all(m.wait_store_msg_ok for m in msgs) else "false"
        p = _Prepared(topic, body, 0, 0, f"WAIT\x01{wait}", ",".join(ids), True)
        budget = self._timeout if timeout is None else timeout
        if queue is not None:
            return await self._send_kernel(p, queue, budget)
        return await self._send_with_retries(p, budget, 1 + self.config.retry_times_when_send_failed)

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
