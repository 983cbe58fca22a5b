"""Send and consume hooks: RocketMQ's ``SendMessageHook`` and ``ConsumeMessageHook`` for the SDK.

A hook is any object with the two methods of its kind; the SDK calls them around every send
(``send``, ``send_async``, ``send_oneway``, ``send_batch``) or every listener call::

    class Audit:
        def hook_name(self) -> str: return "audit"
        def send_message_before(self, ctx: SendMessageContext) -> None: ...
        def send_message_after(self, ctx: SendMessageContext) -> None: ...   # result or exception set

    producer.register_send_message_hook(Audit())

    class Timing:
        def hook_name(self) -> str: return "timing"
        def consume_message_before(self, ctx: ConsumeMessageContext) -> None: ...
        def consume_message_after(self, ctx: ConsumeMessageContext) -> None: ...  # status, success set

    consumer.register_consume_message_hook(Timing())

As in RocketMQ, a hook that raises is logged and skipped: it never fails a send or a consume.
``ctx.props`` is a dict the hook may use to carry values from ``before`` to ``after``.

Send hooks are installed by shadowing the producer's send methods on that one instance at the
first registration (as message traces do, ``client/trace.py``): a producer without hooks runs its
plain methods, with no per-send test. Consume hooks wrap the listener when the consumer starts,
so register them before ``start()``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pocketmq.client.message import Message, MessageQueue, SendResult
from pocketmq.remoting.protocol.message import MessageExt

if TYPE_CHECKING:
    from pocketmq.client.producer.producer import Producer

__all__ = [
    "ConsumeMessageContext",
    "ConsumeMessageHook",
    "SendMessageContext",
    "SendMessageHook",
    "hooked_listener",
    "install_send_hooks",
]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class SendMessageContext:
    """One send as hooks see it (RocketMQ's ``SendMessageContext``)."""

    producer_group: str
    #: the message, or the list of a ``send_batch``
    message: Message | Sequence[Message]
    #: ``SYNC``, ``ASYNC`` or ``ONEWAY`` (RocketMQ's CommunicationMode names)
    communication_mode: str
    #: the queue the send went to (after a successful send; the requested queue before, if any)
    mq: MessageQueue | None = None
    send_result: SendResult | None = None
    exception: BaseException | None = None
    #: wall-clock ms when the send began
    begin_timestamp: int = 0
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ConsumeMessageContext:
    """One listener call as hooks see it (RocketMQ's ``ConsumeMessageContext``)."""

    consumer_group: str
    msg_list: list[MessageExt]
    mq: MessageQueue | None
    #: the listener's result (its enum member) or None when it raised
    status: Any = None
    #: the listener returned a success status (CONSUME_SUCCESS / SUCCESS)
    success: bool = False
    exception: BaseException | None = None
    begin_timestamp: int = 0
    props: dict[str, Any] = field(default_factory=dict)


class SendMessageHook(Protocol):
    def hook_name(self) -> str: ...

    def send_message_before(self, ctx: SendMessageContext) -> None: ...

    def send_message_after(self, ctx: SendMessageContext) -> None: ...


class ConsumeMessageHook(Protocol):
    def hook_name(self) -> str: ...

    def consume_message_before(self, ctx: ConsumeMessageContext) -> None: ...

    def consume_message_after(self, ctx: ConsumeMessageContext) -> None: ...


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _call(hooks: Sequence[Any], method: str, ctx: Any) -> None:
    for hook in hooks:
        try:
            getattr(hook, method)(ctx)
        except Exception:  # a hook never fails the operation (RocketMQ logs and goes on)
            name_of = getattr(hook, "hook_name", None)
            name = name_of() if callable(name_of) else type(hook).__name__
            logger.warning("%s hook %s raised; ignored", method, name, exc_info=True)


def install_send_hooks(producer: Producer, hooks: list[SendMessageHook]) -> None:
    """Shadow ``producer``'s send methods so that every send runs ``hooks`` (read at call time,
    so hooks registered later are called too)."""
    group = producer.group
    send, send_async = producer.send, producer.send_async
    send_oneway, send_batch = producer.send_oneway, producer.send_batch

    def before(msg: Message | Sequence[Message], mode: str, queue: MessageQueue | None) -> SendMessageContext:
        ctx = SendMessageContext(group, msg, mode, queue, begin_timestamp=_now_ms())
        _call(hooks, "send_message_before", ctx)
        return ctx

    def after(ctx: SendMessageContext, result: SendResult | None, exc: BaseException | None) -> None:
        ctx.send_result, ctx.exception = result, exc
        if result is not None:
            ctx.mq = result.message_queue
        _call(hooks, "send_message_after", ctx)

    async def around(
        call: Callable[..., Awaitable[Any]],
        msg: Message | Sequence[Message],
        mode: str,
        kwargs: dict[str, Any],
    ) -> Any:
        ctx = before(msg, mode, kwargs.get("queue"))
        try:
            result = await call(msg, **kwargs)
        except BaseException as exc:
            after(ctx, None, exc)
            raise
        after(ctx, result, None)  # None for a oneway send: there is no reply
        return result

    async def hooked_send(msg: Message, **kwargs: Any) -> SendResult:
        result: SendResult = await around(send, msg, "SYNC", kwargs)
        return result

    def hooked_send_async(msg: Message, callback: Any = None, **kwargs: Any) -> asyncio.Future[SendResult]:
        ctx = before(msg, "ASYNC", None)
        try:
            fut = send_async(msg, callback, **kwargs)
        except BaseException as exc:
            after(ctx, None, exc)
            raise

        def done(f: asyncio.Future[SendResult]) -> None:
            if f.cancelled():
                after(ctx, None, asyncio.CancelledError())
            else:
                exc = f.exception()
                after(ctx, None if exc is not None else f.result(), exc)

        fut.add_done_callback(done)
        return fut

    async def hooked_send_oneway(msg: Message, **kwargs: Any) -> None:
        await around(send_oneway, msg, "ONEWAY", kwargs)

    async def hooked_send_batch(msgs: Sequence[Message], **kwargs: Any) -> SendResult:
        result: SendResult = await around(send_batch, msgs, "SYNC", kwargs)
        return result

    shadows: tuple[tuple[str, Callable[..., Any]], ...] = (
        ("send", hooked_send), ("send_async", hooked_send_async),
        ("send_oneway", hooked_send_oneway), ("send_batch", hooked_send_batch),
    )  # fmt: skip
    for name, fn in shadows:
        setattr(producer, name, fn)


_SUCCESS_NAMES = frozenset({"CONSUME_SUCCESS", "SUCCESS", "COMMIT"})


def hooked_listener(
    group: str, listener: Callable[..., Any], hooks: list[ConsumeMessageHook]
) -> Callable[[list[MessageExt], Any], Any]:
    """``listener`` wrapped so that every call runs ``hooks`` (the consumer wraps its listener
    with it at ``start`` when hooks are registered)."""

    async def hooked(msgs: list[MessageExt], ctx: Any) -> Any:
        hctx = ConsumeMessageContext(
            group, msgs, getattr(ctx, "message_queue", None), begin_timestamp=_now_ms()
        )
        _call(hooks, "consume_message_before", hctx)
        try:
            status = listener(msgs, ctx)
            if inspect.isawaitable(status):
                status = await status
        except BaseException as exc:
            hctx.exception = exc
            _call(hooks, "consume_message_after", hctx)
            raise
        hctx.status = status
        hctx.success = getattr(status, "name", None) in _SUCCESS_NAMES
        _call(hooks, "consume_message_after", hctx)
        return status

    return hooked
