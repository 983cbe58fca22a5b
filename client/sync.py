"""Blocking facade over the asyncio SDK, for code that is not async (e.g. the Spark source).

All clients of a process share one background thread running an event loop (uvloop when
available); each blocking call submits a coroutine to it and waits for the result. After a
``fork`` (Spark's Python workers) the child gets a fresh loop thread on first use.

Example::

    from pocketmq.client import Message
    from pocketmq.client.sync import SyncProducer, SyncLitePullConsumer

    with SyncProducer("PG", namesrv="127.0.0.1:9876") as producer:
        print(producer.send(Message("TopicTest", b"hi")).msg_id)

    with SyncLitePullConsumer("CG", namesrv="127.0.0.1:9876") as consumer:
        consumer.subscribe("TopicTest")
        consumer.start()
        for msg in consumer.poll(timeout=1.0):
            print(msg.body)

Listeners of :class:`SyncPushConsumer` are plain functions; they run in a worker thread
so that a blocking listener never stalls the event loop. So do the local transaction and the
``transaction_checker`` of :meth:`SyncProducer.send_in_transaction` (``docs/transactions.md``).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from functools import partial
from typing import Any, Protocol, Self, TypeVar

from pocketmq.client.consumer.lite_pull import LitePullConsumer
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.consumer.subscription import MessageSelector
from pocketmq.client.hooks import ConsumeMessageHook, SendMessageHook
from pocketmq.client.message import Message, MessageQueue, PullResult, SendResult
from pocketmq.client.producer.producer import Producer
from pocketmq.client.producer.sender import copy_outcome
from pocketmq.client.producer.transaction import TransactionState
from pocketmq.remoting.common.runtime import new_event_loop
from pocketmq.remoting.protocol.message import MessageExt

T = TypeVar("T")


class _LoopThread:
    def __init__(self) -> None:
        self.pid = os.getpid()
        ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

        def run() -> None:
            loop = new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self.thread = threading.Thread(target=run, name="pocketmq-sync-loop", daemon=True)
        self.thread.start()
        ready.wait()

    def stop(self) -> None:
        loop = self.loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
            self.thread.join(timeout=5.0)


_lock = threading.Lock()
_runner: _LoopThread | None = None


def _loop_thread() -> _LoopThread:
    global _runner
    with _lock:
        if _runner is None or _runner.pid != os.getpid() or not _runner.thread.is_alive():
            _runner = _LoopThread()
        return _runner


@atexit.register
def _shutdown_loop() -> None:
    runner = _runner
    if runner is not None and runner.pid == os.getpid():
        runner.stop()


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the shared loop thread and wait for its result.

    Raises:
        TimeoutError: no result within ``timeout`` seconds (the coroutine is cancelled).
        RuntimeError: called from the loop thread itself (would deadlock).
    """
    runner = _loop_thread()
    assert runner.loop is not None
    if threading.current_thread() is runner.thread:
        coro.close()
        raise RuntimeError("pocketmq.client.sync called from its own event loop thread")
    fut = asyncio.run_coroutine_threadsafe(coro, runner.loop)
    try:
        return fut.result(timeout)
    except concurrent.futures.TimeoutError:
        fut.cancel()
        raise TimeoutError(f"operation did not finish within {timeout}s") from None


class _Startable(Protocol):
    async def start(self) -> None: ...
    async def shutdown(self) -> None: ...


class _BlockingClient:
    """start/shutdown and the ``with`` block of one async client, run on the loop thread."""

    def __init__(self, client: _Startable) -> None:
        self._client = client

    def start(self) -> None:
        run(self._client.start())

    def shutdown(self) -> None:
        run(self._client.shutdown())

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class SyncProducer(_BlockingClient):
    """Blocking :class:`Producer`; same arguments, except that ``transaction_checker`` is a plain
    (blocking) function ``(MessageExt) -> TransactionState``, run in a worker thread."""

    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        namesrv: str | None = None,
        *,
        transaction_checker: Callable[[MessageExt], TransactionState] | None = None,
        **options: Any,
    ) -> None:
        checker = None
        if transaction_checker is not None:
            blocking_checker = transaction_checker

            async def checker(msg: MessageExt) -> TransactionState:
                return await asyncio.get_running_loop().run_in_executor(None, blocking_checker, msg)

        self.producer = Producer(group, namesrv, transaction_checker=checker, **options)
        super().__init__(self.producer)

    def send_in_transaction(
        self, msg: Message, execute_local: Callable[[Message, SendResult], TransactionState]
    ) -> tuple[SendResult, TransactionState]:
        """Send a half message, run ``execute_local`` (a plain function, in a worker thread), then
        commit or roll back; UNKNOW (or an exception) leaves it to the broker's check-back."""

        async def bridge(m: Message, result: SendResult) -> TransactionState:
            return await asyncio.get_running_loop().run_in_executor(None, execute_local, m, result)

        return run(self.producer.send_in_transaction(msg, bridge))

    def send(self, msg: Message, **kwargs: Any) -> SendResult:
        return run(self.producer.send(msg, **kwargs))

    def send_batch(self, msgs: Sequence[Message], **kwargs: Any) -> SendResult:
        return run(self.producer.send_batch(msgs, **kwargs))

    def send_async(
        self,
        msg: Message,
        callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
        *,
        timeout: float | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send and return a :class:`concurrent.futures.Future` of its result; blocks
        while ``max_in_flight`` sends are in flight (backpressure, :meth:`Producer.submit`).
        ``callback(result, error)`` runs on the client's loop thread: keep it short.

        Raises:
            RemotingTimeoutError: no send slot was freed within the timeout.
            MessageValidationError, ClientClosedError: as :meth:`Producer.send_async`.
        """
        out: concurrent.futures.Future[SendResult] = concurrent.futures.Future()

        async def start() -> None:
            fut = await self.producer.submit(msg, callback, timeout=timeout)
            fut.add_done_callback(partial(copy_outcome, out=out))

        run(start())
        return out

    def register_send_message_hook(self, hook: SendMessageHook) -> None:
        """:meth:`Producer.register_send_message_hook` (hooks run on the client's loop thread)."""
        self.producer.register_send_message_hook(hook)

    def send_oneway(self, msg: Message, **kwargs: Any) -> None:
        run(self.producer.send_oneway(msg, **kwargs))


class SyncLitePullConsumer(_BlockingClient):
    """Blocking :class:`LitePullConsumer`; same arguments. Its ``with`` block starts it (unless
    :meth:`start` was called already) and shuts it down; ``subscribe`` and ``assign`` work
    before or after the start, as in RocketMQ's ``DefaultLitePullConsumer``."""

    def __init__(self, group: str = "DEFAULT_CONSUMER", namesrv: str | None = None, **options: Any) -> None:
        self.consumer = LitePullConsumer(group, namesrv, **options)
        super().__init__(self.consumer)

    def __enter__(self) -> Self:
        if not self.consumer.running:
            self.start()
        return self

    def subscribe(
        self, topic: str, expression: str | MessageSelector = "*", expression_type: str = "TAG"
    ) -> None:
        async def do() -> None:  # after start it spawns a rebalance on the loop
            self.consumer.subscribe(topic, expression, expression_type)

        run(do())

    def assign(self, mqs: Iterable[MessageQueue], expression: str | MessageSelector = "*") -> None:
        async def do() -> None:
            self.consumer.assign(mqs, expression)

        run(do())

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        return run(self.consumer.poll(timeout))

    def wait_assigned(self, timeout: float | None = None) -> set[MessageQueue]:
        """Block until queues are assigned (:meth:`LitePullConsumer.wait_assigned`)."""
        return run(self.consumer.wait_assigned(timeout))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        run(self.consumer.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        run(self.consumer.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        run(self.consumer.seek_to_end(mq))

    def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        run(self.consumer.commit_sync(offsets))

    def committed(self, mq: MessageQueue) -> int:
        return run(self.consumer.committed(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        self.consumer.pause(list(mqs))

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        async def do() -> None:
            self.consumer.resume(list(mqs))

        run(do())

    def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        return run(self.consumer.fetch_message_queues(topic))

    def min_offset(self, mq: MessageQueue) -> int:
        return run(self.consumer.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return run(self.consumer.max_offset(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return run(self.consumer.offset_for_timestamp(mq, timestamp_ms))

    def pull(
        self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*", timeout: float = 10.0
    ) -> PullResult:
        """One direct pull (no process queue, no offset bookkeeping)."""
        return run(self.consumer.pull(mq, offset, max_nums, expression, timeout=timeout), timeout + 5.0)


class SyncPushConsumer(_BlockingClient):
    """Push consumer whose listener is a plain (blocking) function run in a worker thread."""

    def __init__(
        self,
        group: str = "DEFAULT_CONSUMER",
        namesrv: str | None = None,
        *,
        listener: Callable[[list[MessageExt], Any], Any],
        orderly: bool = False,
        **options: Any,
    ) -> None:
        async def bridge(msgs: list[MessageExt], ctx: Any) -> Any:
            return await asyncio.get_running_loop().run_in_executor(None, listener, msgs, ctx)

        self.consumer = PushConsumer(group, namesrv, listener=bridge, orderly=orderly, **options)
        super().__init__(self.consumer)

    def subscribe(
        self, topic: str, expression: str | MessageSelector = "*", expression_type: str = "TAG"
    ) -> None:
        self.consumer.subscribe(topic, expression, expression_type)

    def wait_assigned(self, timeout: float | None = None) -> set[MessageQueue]:
        """Block until queues are assigned (:meth:`PushConsumer.wait_assigned`)."""
        return run(self.consumer.wait_assigned(timeout))

    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        """:meth:`PushConsumer.register_consume_message_hook` (before :meth:`start`)."""
        self.consumer.register_consume_message_hook(hook)
