"""Message traces: RocketMQ's trace hook (``enableMsgTrace``), in the Java client's record format.

A producer or push consumer built with ``enable_msg_trace=True`` records one hop per send and two
per consumed message (before and after the listener) and sends them, batched, to the trace topic
(``RMQ_SYS_TRACE_TOPIC``, or ``customized_trace_topic``) through an inner producer of group
``_INNER_TRACE_PRODUCER-<group>``. Brokers keep that topic when ``traceTopicEnable=true`` (or
auto-create it). ``mqadmin queryMsgTraceById`` and the console read the hops back by message id.

Record layout (text, UTF-8; fields end with ``\\x01``, a record ends with ``\\x02``; a trace
message's body is one or more records; its KEYS are every message id and key it covers, so a
query by key on the trace topic finds it)::

    Pub       timestamp region group topic msgId tags keys storeHost bodyLength costTime
              msgType offsetMsgId success
    SubBefore timestamp region group requestId msgId retryTimes keys
    SubAfter  requestId msgId costTime success keys contextCode timestamp group

``msgType``: 0 normal, 1 transaction half, 2 transaction commit, 3 delayed. ``contextCode``
(Java ``ConsumeReturnType``): 0 SUCCESS, 1 TIME_OUT, 2 EXCEPTION, 3 RETURNNULL, 4 FAILED. An
absent tag or key is written ``null``, as the Java client writes it. Tracing never fails a send or
a consume: a trace that cannot be sent is logged and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pocketmq.remoting.protocol.message import create_uniq_id, decode_offset_msg_id

if TYPE_CHECKING:
    from pocketmq.client.consumer.push import PushConsumer
    from pocketmq.client.message import Message, SendResult
    from pocketmq.client.producer.producer import Producer
    from pocketmq.remoting.protocol.message import MessageExt

logger = logging.getLogger(__name__)

__all__ = [
    "TRACE_TOPIC",
    "TraceDispatcher",
    "TraceHop",
    "decode_traces",
    "encode_pub",
    "encode_sub_after",
    "encode_sub_before",
    "hook_consumer",
    "hook_producer",
]

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
INNER_PRODUCER_PREFIX = "_INNER_TRACE_PRODUCER-"
C1, F2 = "\x01", "\x02"
#: Java's AsyncTraceDispatcher caps one trace message at 128 KiB
MAX_BATCH_BYTES = 128 * 1024
FLUSH_INTERVAL = 0.1
NORMAL_MSG, DELAY_MSG = 0, 3
SUCCESS_CODE, EXCEPTION_CODE, RETURNNULL_CODE, FAILED_CODE = 0, 2, 3, 4
_CONTEXT = {0: "SUCCESS", 1: "TIME_OUT", 2: "EXCEPTION", 3: "RETURNNULL", 4: "FAILED"}


def _s(value: object) -> str:
    return "null" if value is None else str(value)


def _keys(keys: str | None) -> list[str]:
    return [k for k in (keys or "").split(" ") if k]


def encode_pub(
    *, timestamp: int, region: str, group: str, topic: str, msg_id: str, tags: str | None, keys: str | None,
    store_host: str, body_length: int, cost_ms: int, msg_type: int, offset_msg_id: str, success: bool,
) -> str:  # fmt: skip
    fields = (
        "Pub", timestamp, region, group, topic, msg_id, _s(tags), _s(keys), store_host, body_length, cost_ms,
        msg_type, offset_msg_id, "true" if success else "false",
    )  # fmt: skip
    return C1.join(str(f) for f in fields) + F2


def encode_sub_before(
    *,
    timestamp: int,
    region: str,
    group: str,
    request_id: str,
    msg_id: str,
    retry_times: int,
    keys: str | None,
) -> str:
    fields = ("SubBefore", timestamp, region, group, request_id, msg_id, retry_times, _s(keys))
    return C1.join(str(f) for f in fields) + F2


def encode_sub_after(
    *, request_id: str, msg_id: str, cost_ms: int, success: bool, keys: str | None, context_code: int,
    timestamp: int, group: str,
) -> str:  # fmt: skip
    ok = "true" if success else "false"
    fields = ("SubAfter", request_id, msg_id, cost_ms, ok, _s(keys), context_code, timestamp, group)
    return C1.join(str(f) for f in fields) + F2


@dataclass(slots=True)
class TraceHop:
    """One decoded record (``type``: Pub, SubBefore or SubAfter)."""

    type: str
    msg_id: str
    group_name: str = ""
    timestamp: int = 0
    cost_time: int = 0
    success: bool = True
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    offset_msg_id: str = ""
    request_id: str = ""
    retry_times: int = 0
    context_code: int = 0
    region: str = ""
    #: the host that wrote the trace record (the trace message's born host)
    client_host: str = ""

    @property
    def status(self) -> str:
        return "success" if self.success else "failed"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type, "msgId": self.msg_id, "groupName": self.group_name, "timestamp": self.timestamp,
            "costTime": self.cost_time, "status": self.status.upper(), "topic": self.topic, "tags": self.tags,
            "keys": self.keys, "storeHost": self.store_host, "offsetMsgId": self.offset_msg_id,
            "requestId": self.request_id, "retryTimes": self.retry_times,
            "contextCode": _CONTEXT.get(self.context_code, str(self.context_code)), "regionId": self.region,
            "clientHost": self.client_host,
        }  # fmt: skip


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def decode_traces(body: str, client_host: str = "") -> list[TraceHop]:
    """Every record of a trace message body (unknown record types are skipped)."""
    hops = []
    for record in body.split(F2):
        f = record.split(C1)
        kind = f[0]
        if kind == "Pub" and len(f) >= 13:
            ok = f[13] if len(f) >= 14 else f[12]
            hops.append(
                TraceHop(
                    "Pub", f[5], f[3], _int(f[1]), _int(f[10]), ok == "true", topic=f[4], tags=f[6], keys=f[7],
                    store_host=f[8], offset_msg_id=f[12] if len(f) >= 14 else "", region=f[2],
                    client_host=client_host,
                )
            )  # fmt: skip
        elif kind == "SubBefore" and len(f) >= 8:
            hops.append(
                TraceHop(
                    "SubBefore", f[5], f[3], _int(f[1]), request_id=f[4], retry_times=_int(f[6]), keys=f[7],
                    region=f[2], client_host=client_host,
                )
            )  # fmt: skip
        elif kind == "SubAfter" and len(f) >= 6:
            hops.append(
                TraceHop(
                    "SubAfter", f[2], f[8] if len(f) >= 9 else "", _int(f[7]) if len(f) >= 8 else 0, _int(f[3]),
                    f[4] == "true", keys=f[5], request_id=f[1], context_code=_int(f[6]) if len(f) >= 7 else 0,
                    client_host=client_host,
                )
            )  # fmt: skip
    return hops


class TraceDispatcher:
    """Batches trace records and sends them to the trace topic from an inner producer."""

    def __init__(self, group: str, namesrv: str | None, trace_topic: str | None) -> None:
        self.group = group
        self.namesrv = namesrv
        self.topic = trace_topic or TRACE_TOPIC
        self._pending: list[tuple[str, list[str]]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._producer: Producer | None = None

    async def start(self) -> None:
        from pocketmq.client.producer.producer import Producer

        producer = Producer(INNER_PRODUCER_PREFIX + self.group, self.namesrv)
        await producer.start()
        self._producer = producer
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"trace-{self.group}")

    def add(self, record: str, keys: Iterable[str]) -> None:
        self._pending.append((record, list(keys)))

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), FLUSH_INTERVAL)
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Send what is pending, in messages of at most 128 KiB of records."""
        from pocketmq.client.message import Message

        pending, self._pending = self._pending, []
        producer = self._producer
        while pending and producer is not None:
            body: list[str] = []
            keys: dict[str, None] = {}
            size = 0
            while pending and (not body or size + len(pending[0][0]) <= MAX_BATCH_BYTES):
                record, ks = pending.pop(0)
                body.append(record)
                size += len(record)
                keys.update(dict.fromkeys(ks))
            try:
                await producer.send(Message(self.topic, "".join(body).encode("utf-8"), keys=" ".join(keys)))
            except Exception as exc:  # a trace never fails the traced work
                logger.warning("trace records of %s not sent to %s: %s", self.group, self.topic, exc)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.flush()
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.shutdown()


def _store_host(offset_msg_id: str) -> str:
    try:
        ip, port, _ = decode_offset_msg_id(offset_msg_id.split(",", maxsplit=1)[0])
    except Exception:
        return ""
    return f"{ip}:{port}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def hook_producer(producer: Producer) -> TraceDispatcher:
    """Trace every ``send``/``send_async`` of ``producer`` (its config's ``enable_msg_trace``).

    The hook shadows the producer's methods on the instance: a producer without tracing runs the
    plain methods, with no per-send test.
    """
    cfg = producer.config
    dispatcher = TraceDispatcher(producer.group, cfg.namesrv_addr, cfg.customized_trace_topic)
    start, shutdown, send, send_async = producer.start, producer.shutdown, producer.send, producer.send_async

    def record(msg: Message, result: SendResult, begin: int) -> None:
        if msg.topic == dispatcher.topic:
            return
        keys = msg.keys if isinstance(msg.keys, str) or msg.keys is None else " ".join(msg.keys)
        dispatcher.add(
            encode_pub(
                timestamp=begin, region=result.region_id, group=producer.group, topic=msg.topic,
                msg_id=result.msg_id, tags=msg.tags, keys=keys,
                store_host=_store_host(result.offset_msg_id), body_length=len(msg.body),
                cost_ms=_now_ms() - begin, msg_type=DELAY_MSG if msg.delay_level > 0 else NORMAL_MSG,
                offset_msg_id=result.offset_msg_id, success=result.send_status.name == "SEND_OK",
            ),
            [result.msg_id, *_keys(keys)],
        )  # fmt: skip

    async def traced_start() -> None:
        await start()
        await dispatcher.start()

    async def traced_shutdown(timeout: float = 5.0) -> None:
        await dispatcher.stop()
        await shutdown(timeout)

    async def traced_send(msg: Message, **kwargs: Any) -> SendResult:
        begin = _now_ms()
        result = await send(msg, **kwargs)
        record(msg, result, begin)
        return result

    def traced_send_async(msg: Message, callback: Any = None, **kwargs: Any) -> asyncio.Future[SendResult]:
        begin = _now_ms()
        fut = send_async(msg, callback, **kwargs)

        def done(f: asyncio.Future[SendResult]) -> None:
            if not f.cancelled() and f.exception() is None:
                record(msg, f.result(), begin)

        fut.add_done_callback(done)
        return fut

    for name, fn in (("start", traced_start), ("shutdown", traced_shutdown), ("send", traced_send),
                     ("send_async", traced_send_async)):  # fmt: skip
        setattr(producer, name, fn)
    return dispatcher


def hook_consumer(consumer: PushConsumer) -> TraceDispatcher:
    """Trace every listener call of ``consumer``: SubBefore per message, then SubAfter."""
    cfg = consumer.config
    dispatcher = TraceDispatcher(consumer.group, cfg.namesrv_addr, cfg.customized_trace_topic)
    start, shutdown = consumer.start, consumer.shutdown

    def wrap(listener: Callable[..., Any]) -> Callable[[list[MessageExt], Any], Awaitable[Any]]:
        async def traced(msgs: list[MessageExt], ctx: Any) -> Any:
            traced_msgs = [m for m in msgs if m.topic != dispatcher.topic
                           and m.properties.get("TRACE_ON", "true") != "false"]  # fmt: skip
            request_id = create_uniq_id()
            begin = _now_ms()
            for m in traced_msgs:
                msg_id = m.uniq_key or m.msg_id
                dispatcher.add(
                    encode_sub_before(
                        timestamp=begin, region=m.properties.get("MSG_REGION", "DefaultRegion"),
                        group=consumer.group, request_id=request_id, msg_id=msg_id,
                        retry_times=m.reconsume_times, keys=m.keys,
                    ),
                    [msg_id, *_keys(m.keys)],
                )  # fmt: skip
            code = EXCEPTION_CODE
            status: Any = None
            try:
                status = listener(msgs, ctx)
                if asyncio.iscoroutine(status) or isinstance(status, asyncio.Future):
                    status = await status
                name = getattr(status, "name", None)
                code = RETURNNULL_CODE if status is None else (
                    SUCCESS_CODE if name in ("CONSUME_SUCCESS", "SUCCESS", "COMMIT") else FAILED_CODE
                )  # fmt: skip
                return status
            finally:
                end = _now_ms()
                for m in traced_msgs:
                    msg_id = m.uniq_key or m.msg_id
                    dispatcher.add(
                        encode_sub_after(
                            request_id=request_id, msg_id=msg_id, cost_ms=end - begin, success=code == SUCCESS_CODE,
                            keys=m.keys, context_code=code, timestamp=end, group=consumer.group,
                        ),
                        [msg_id, *_keys(m.keys)],
                    )  # fmt: skip

        return traced

    async def traced_start() -> None:
        listener = consumer._listener
        if listener is not None:
            consumer._listener = wrap(listener)
        await dispatcher.start()
        try:
            await start()
        except BaseException:
            await dispatcher.stop()
            raise

    async def traced_shutdown() -> None:
        await shutdown()
        await dispatcher.stop()

    setattr(consumer, "start", traced_start)  # noqa: B010 - shadows the method on this instance
    setattr(consumer, "shutdown", traced_shutdown)  # noqa: B010
    return dispatcher
