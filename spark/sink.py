"""The sink's core, without pyspark: options, row checks, idempotent keys, batched blocking sends.

``df.write.format("rocketmq")`` / ``df.writeStream.format("rocketmq")`` (classes in
:mod:`pocketmq.spark.writer`) turn each row into one message:

=================  =====================  =================================================
column             type                   message field
=================  =====================  =================================================
``body``           binary or string       the body (required, not empty)
``topic``          string                 the topic (else the ``topic`` option)
``tags``           string                 ``TAGS``
``keys``           string                 ``KEYS`` (several separated by spaces, as RocketMQ)
``properties``     map<string,string>     user properties
=================  =====================  =================================================

Any other column is an error naming it (select what the sink needs).

Delivery is at-least-once: a task that fails, or a micro-batch that Spark replays after a
restart, sends its rows again. Every message therefore carries a deterministic ``UNIQ_KEY``
(the id a RocketMQ consumer sees as ``msg_id``), derived from the write job (a batch write's
nonce, or a stream's query id and batch id), the task's partition and the row's index: a
resent row has the same ``msg_id`` as its first copy, so consumers deduplicate by id. A row
whose ``properties`` carry a ``UNIQ_KEY`` keeps it.

Sends are batched: rows of one topic are grouped into SEND_BATCH_MESSAGE requests of at most
``sendBatchSize`` messages and ``sendBatchBytes`` bytes (encoded), one queue per request,
queues taken in turn (starting at an offset given by the partition, so tasks spread over the
queues). A failed request is retried on the next queue (another broker when the topic has
several) up to ``retryTimesWhenSendFailed`` times, as the Java producer does; a broker's batch
put is atomic, so a retry never splits a batch. A topic with no route is sent with the route of
``TBW102`` (the broker creates the topic when ``autoCreateTopicEnable`` is on), as RocketMQ's
producer does; with neither, the task fails naming the topic.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingError, for_code
from pocketmq.remoting.protocol.message import MessageConst, encode_batch, properties_to_string
from pocketmq.remoting.protocol.route import TopicRouteData
from pocketmq.remoting.protocol.topics import AUTO_CREATE_TOPIC_KEY_TOPIC, PermName, group_error, topic_error
from pocketmq.spark.errors import InvalidOptionError, RocketMQSourceError
from pocketmq.spark.metadata import ClusterClient
from pocketmq.spark.options import _int_default, _parse_name_servers

logger = logging.getLogger("pocketmq.spark")

COLUMNS = ("body", "topic", "tags", "keys", "properties")
DEFAULT_PRODUCER_GROUP = "spark-rocketmq-writer"
#: RocketMQ's default maxMessageSize: a batch request's body may not be larger.
MAX_BATCH_BYTES = 4 * 1024 * 1024
_STORED = {
    int(ResponseCode.SUCCESS),
    int(ResponseCode.FLUSH_DISK_TIMEOUT),
    int(ResponseCode.FLUSH_SLAVE_TIMEOUT),
    int(ResponseCode.SLAVE_NOT_AVAILABLE),
}

_SINK_OPTIONS = {
    "nameServer", "topic", "producerGroup", "sendBatchSize", "sendBatchBytes", "sendTimeoutMs",
    "retryTimesWhenSendFailed", "checkpointLocation", "path",
}  # fmt: skip
_BY_LOWER = {name.lower(): name for name in _SINK_OPTIONS}


class SendError(RocketMQSourceError):
    """A batch could not be stored after every retry."""


@dataclass(frozen=True, slots=True)
class SinkOptions:
    name_servers: tuple[str, ...]
    topic: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    batch_size: int = 256
    batch_bytes: int = 1024 * 1024
    send_timeout_ms: int = 3000
    retries: int = 2


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the writer's options; the error names the option.

    Raises:
        InvalidOptionError: unknown, malformed or out-of-range options.
    """
    opts: dict[str, str] = {}
    for raw, value in options.items():
        name = _BY_LOWER.get(str(raw).lower())
        if name is None:
            known = ", ".join(sorted(_SINK_OPTIONS - {"checkpointLocation", "path"}))
            raise InvalidOptionError(
                str(raw), f"unknown option for the rocketmq sink (known options: {known})"
            )
        opts[name] = str(value)
    topic = opts.get("topic")
    if topic is not None:
        topic = topic.strip()
        error = topic_error(topic)
        if error is not None:
            raise InvalidOptionError("topic", error)
    group = opts.get("producerGroup", DEFAULT_PRODUCER_GROUP)
    if group_error(group) is not None:
        raise InvalidOptionError("producerGroup", str(group_error(group)))
    return SinkOptions(
        name_servers=_parse_name_servers(opts.get("nameServer")),
        topic=topic,
        producer_group=group,
        batch_size=_bounded(opts, "sendBatchSize", 256, 1, 65536),
        batch_bytes=_bounded(opts, "sendBatchBytes", 1024 * 1024, 1024, MAX_BATCH_BYTES),
        send_timeout_ms=_bounded(opts, "sendTimeoutMs", 3000, 1, 600_000),
        retries=_bounded(opts, "retryTimesWhenSendFailed", 2, 0, 16),
    )


def _bounded(opts: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    value = _int_default(opts, name, default, minimum=low)
    if value > high:
        raise InvalidOptionError(name, f"must be between {low} and {high}, got {value}")
    return value


def check_columns(names: Iterable[str], types: Mapping[str, str], opts: SinkOptions) -> None:
    """Fail before any task runs when the DataFrame cannot be written.

    ``types`` maps a column to Spark's simple type string (``binary``, ``string``,
    ``map<string,string>``).
    """
    cols = list(names)
    extra = [c for c in cols if c not in COLUMNS]
    if extra:
        raise InvalidOptionError(
            "columns", f"column(s) {extra} are not written by the rocketmq sink (it writes {list(COLUMNS)})"
        )
    if "body" not in cols:
        raise InvalidOptionError("columns", "the rocketmq sink needs a 'body' column (binary or string)")
    if "topic" not in cols and opts.topic is None:
        raise InvalidOptionError("topic", "give the 'topic' option or a 'topic' column")
    expected = {"body": ("binary", "string"), "topic": ("string",), "tags": ("string",), "keys": ("string",),
                "properties": ("map<string,string>",)}  # fmt: skip
    for col in cols:
        if types.get(col) not in expected[col]:
            raise InvalidOptionError(
                "columns", f"column {col!r} has type {types.get(col)}, expected {' or '.join(expected[col])}"
            )


def uniq_key(job: str, partition: int, index: int) -> str:
    """A deterministic RocketMQ-style message id (32 upper-case hex digits) for one row."""
    digest = hashlib.blake2b(f"{job}/{partition}/{index}".encode(), digest_size=16).hexdigest()
    return digest.upper()


def message_properties(uniq: str, tags: str | None, keys: str | None, props: Mapping[str, str] | None) -> str:
    """The batch item's properties string: user properties, then TAGS, KEYS and UNIQ_KEY."""
    out: dict[str, str] = dict(props) if props else {}
    if tags:
        out[MessageConst.TAGS] = tags
    if keys:
        out[MessageConst.KEYS] = keys
    out.setdefault(MessageConst.UNIQ_KEY, uniq)
    return properties_to_string(out)


@dataclass(slots=True)
class _Pending:
    items: list[tuple[int, bytes, str]]
    size: int


class BatchSender:
    """Groups messages per topic into batch requests and sends them (blocking; one per task)."""

    def __init__(self, opts: SinkOptions, partition: int, cluster: ClusterClient | None = None) -> None:
        self.opts = opts
        self.cluster = cluster or ClusterClient(opts.name_servers, timeout_ms=opts.send_timeout_ms)
        self._pending: dict[str, _Pending] = {}
        self._queues: dict[str, list[tuple[str, int, str]]] = {}
        self._turn = partition
        self.sent = 0
        self.requests = 0

    def add(self, topic: str, body: bytes, props: str) -> None:
        size = len(body) + len(props) + 22  # batch item head (20) + properties length (2)
        if size > self.opts.batch_bytes and size > MAX_BATCH_BYTES:
            raise SendError(f"a message of {size} bytes for topic {topic!r} is over {MAX_BATCH_BYTES} bytes")
        p = self._pending.get(topic)
        if p is not None and (p.size + size > self.opts.batch_bytes or len(p.items) >= self.opts.batch_size):
            self._send(topic, p.items)
            p = None
        if p is None:
            p = self._pending[topic] = _Pending([], 0)
        p.items.append((0, body, props))
        p.size += size

    def flush(self) -> None:
        for topic, p in list(self._pending.items()):
            if p.items:
                self._send(topic, p.items)
        self._pending.clear()

    # ------------------------------------------------------------------------------ sending
    def _writable(self, topic: str, refresh: bool = False) -> list[tuple[str, int, str]]:
        queues = None if refresh else self._queues.get(topic)
        if queues is None:
            route = self.cluster.route(topic)
            if route is None:
                route = self.cluster.route(AUTO_CREATE_TOPIC_KEY_TOPIC)
                if route is None:
                    raise SendError(f"topic {topic!r} does not exist and no broker auto-creates topics")
                logger.info("topic %r has no route yet: sending with TBW102's (auto-create)", topic)
            queues = writable_queues(route)
            if not queues:
                raise SendError(f"topic {topic!r} has no writable queue on a reachable master")
            self._queues[topic] = queues
        return queues

    def _send(self, topic: str, items: Sequence[tuple[int, bytes, str]]) -> None:
        body = encode_batch(items)
        last = ""
        for attempt in range(self.opts.retries + 1):
            queues = self._writable(topic, refresh=attempt > 0)
            broker, queue_id, addr = queues[self._turn % len(queues)]
            self._turn += 1
            try:
                reply, _ = self.cluster.pool.invoke(
                    addr, self._request(topic, broker, queue_id, body), self.opts.send_timeout_ms / 1000
                )
            except (RemotingError, OSError) as exc:
                last = f"broker {broker} ({addr}): {exc}"
                continue
            if reply.code in _STORED:
                self.sent += len(items)
                self.requests += 1
                return
            last = f"broker {broker} ({addr}) answered code {reply.code}: {reply.remark}"
            if not for_code(reply.code).retriable:
                break
            time.sleep(0.05 * (attempt + 1))
        raise SendError(f"sending {len(items)} message(s) to topic {topic!r} failed: {last}")

    def _request(self, topic: str, broker: str, queue_id: int, body: bytes) -> RemotingCommand:
        ext = {
            "a": self.opts.producer_group, "b": topic, "c": AUTO_CREATE_TOPIC_KEY_TOPIC, "d": "4",
            "e": str(queue_id), "f": "0", "g": str(time.time_ns() // 1_000_000), "h": "0",
            "i": "WAIT\x01true", "j": "0", "k": "false", "m": "true", "n": broker,
        }  # fmt: skip
        return RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE, ext, body, language=LanguageCode.PYTHON
        )


def writable_queues(route: TopicRouteData) -> list[tuple[str, int, str]]:
    """``(brokerName, queueId, masterAddr)`` of every writable queue whose master is known."""
    masters = {bd.broker_name: bd.broker_addrs.get(0) for bd in route.broker_datas}
    return [
        (qd.broker_name, qid, addr)
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if PermName.is_writeable(qd.perm) and (addr := masters.get(qd.broker_name))
        for qid in range(qd.write_queue_nums)
    ]
