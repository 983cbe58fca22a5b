"""Source options: one validated, picklable :class:`SourceOptions` built from Spark's options.

Spark hands a case-insensitive mapping (SPARK_SOURCE.md pitfall 3), so names are matched
case-insensitively; an unknown name, a value that does not parse, an option that does not
apply to the query kind (batch / streaming) or two options that contradict each other raise
:class:`InvalidOptionError` naming the option. Names follow the Kafka source where the concept
is the same (``startingOffsets``, ``maxOffsetsPerTrigger`` ...) and rocketmq-spark otherwise
(``nameServer``, ``subExpression``, ``pullBatchSize`` ...).

``filter`` is a RocketMQ SQL92 expression over the message properties (``"region IN ('eu','us')
AND a > 50"``, the language of ``MessageSelector.bySql``), evaluated in the executors by the
same compiler the broker uses (:mod:`pocketmq.remoting.protocol.filter`): rows it does not match
(FALSE, NULL or an evaluation error) are dropped. It needs no broker setting. An expression that
does not compile is an InvalidOptionError with the position and the reason.

Starting position, most specific first: ``startingOffsets`` as JSON, or
``startingOffsetsByTimestamp``, or ``startingTimestamp``, or ``group`` (the group's committed
offsets); at most one of them. Queues they do not cover fall back to ``startingOffsets`` when
it is ``earliest``/``latest`` (default: ``latest`` for streams, ``earliest`` for batch reads);
queues a ``startingOffsets`` JSON does not list start at their earliest offset.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pocketmq.remoting.protocol.acl import RequestSigner
from pocketmq.remoting.protocol.filter import SqlFilterError, compile_sql
from pocketmq.remoting.protocol.heartbeat import SubscriptionData
from pocketmq.remoting.protocol.topics import group_error, topic_error
from pocketmq.spark.errors import InvalidOptionError
from pocketmq.spark.offsets import EARLIEST, LATEST, OffsetMap, from_json_dict, parse_json_option

Mode = Literal["stream", "batch"]

#: The pull group when the query names none. Pulls never commit offsets (no COMMIT_OFFSET
#: flag), so one shared name is harmless and does not litter the broker with random groups.
DEFAULT_PULL_GROUP = "spark-rocketmq-reader"

# canonical name -> where it applies ("both", "stream", "batch")
_KNOWN: dict[str, str] = {
    "nameServer": "both",
    "topic": "both",
    "startingOffsets": "both",
    "endingOffsets": "batch",
    "startingTimestamp": "both",
    "startingOffsetsByTimestamp": "both",
    "maxOffsetsPerTrigger": "stream",
    "minOffsetsPerTrigger": "stream",
    "maxTriggerDelay": "stream",
    "minPartitions": "both",
    "maxRecordsPerPartition": "both",
    "failOnDataLoss": "both",
    "subExpression": "both",
    "filter": "both",
    "includeProperties": "both",
    "pullBatchSize": "both",
    "pullTimeoutMs": "both",
    "group": "both",
    "fetchOffset.numRetries": "both",
    "fetchOffset.retryIntervalMs": "both",
    "accessKey": "both",
    "secretKey": "both",
}
_BY_LOWER = {name.lower(): name for name in _KNOWN}
#: Options Spark itself may add to a load() (a path argument); not ours, never an error.
_IGNORED = {"path"}

_ADDR = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")
_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


@dataclass(frozen=True, slots=True)
class StartSpec:
    """Where reading starts. ``default`` covers queues the specific spec does not list."""

    default: Literal["earliest", "latest"]
    offsets: OffsetMap | None = None  # startingOffsets JSON (values may be EARLIEST/LATEST)
    timestamps: OffsetMap | None = None  # startingOffsetsByTimestamp (values: ms)
    timestamp: int | None = None  # startingTimestamp
    group: str | None = None  # committed offsets of this consumer group

    @property
    def deterministic(self) -> bool:
        """False when the start depends on when it is resolved (latest, timestamps, a group)."""
        if self.group is not None or self.timestamp is not None or self.timestamps is not None:
            return False
        if self.offsets is not None:
            return LATEST not in self.offsets.values()
        return self.default == "earliest"


@dataclass(frozen=True, slots=True)
class SourceOptions:
    mode: Mode
    name_servers: tuple[str, ...]
    topics: tuple[str, ...]
    start: StartSpec
    end: OffsetMap | None = None  # batch: None = latest; JSON values may be LATEST
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    sub_expression: str = "*"
    #: a SQL92 expression the executors evaluate on each message's properties
    sql_filter: str | None = None
    include_properties: bool = False
    pull_batch_size: int = 32
    pull_timeout_ms: int = 10_000
    group: str | None = None
    fetch_retries: int = 3
    fetch_retry_interval_ms: int = 200
    #: ACL credentials: every request is signed when both are set
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    def signer(self) -> RequestSigner | None:
        """Signs requests with the ACL credentials (None: unsigned)."""
        return (
            RequestSigner(self.access_key, self.secret_key) if self.access_key and self.secret_key else None
        )

    @property
    def pull_group(self) -> str:
        return self.group or DEFAULT_PULL_GROUP

    @property
    def filtered(self) -> bool:
        """True when a tag filter leaves holes in the offsets read (limits count offsets)."""
        return self.sub_expression.strip() not in ("", "*")


def canonical_options(options: Mapping[str, str]) -> dict[str, str]:
    """Map user option names to canonical names; unknown names raise."""
    out: dict[str, str] = {}
    for raw_name, value in options.items():
        lower = str(raw_name).lower()
        if lower in _IGNORED:
            continue
        name = _BY_LOWER.get(lower)
        if name is None:
            known = ", ".join(sorted(_KNOWN))
            raise InvalidOptionError(str(raw_name), f"unknown option (known options: {known})")
        out[name] = str(value)
    return out


def parse_options(options: Mapping[str, str], mode: Mode) -> SourceOptions:
    """Validate everything; the error names the offending option.

    Raises:
        InvalidOptionError: unknown, malformed, conflicting or inapplicable options.
    """
    opts = canonical_options(options)
    for name in opts:
        where = _KNOWN[name]
        if where not in ("both", mode):
            kind = "batch reads (spark.read)" if where == "batch" else "streaming queries (spark.readStream)"
            raise InvalidOptionError(name, f"only applies to {kind}")
    name_servers = _parse_name_servers(opts.get("nameServer"))
    topics = _parse_topics(opts.get("topic"))
    start = _parse_start(opts, mode, topics)
    end = _parse_end(opts.get("endingOffsets"), topics) if mode == "batch" else None
    group = opts.get("group")
    if group is not None:
        _check("group", group_error(group))
    sub = opts.get("subExpression", "*")
    subscription = SubscriptionData.build(topics[0], sub)
    if not subscription.is_all and not subscription.tags_set:
        raise InvalidOptionError("subExpression", f"subscription expression {sub!r} names no tag")
    sql_filter = opts.get("filter")
    if sql_filter is not None:
        try:
            compile_sql(sql_filter)
        except SqlFilterError as exc:
            raise InvalidOptionError("filter", f"invalid SQL92 expression: {exc}") from None
    return SourceOptions(
        mode=mode,
        name_servers=name_servers,
        topics=topics,
        start=start,
        end=end,
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", minimum=1),
        min_offsets_per_trigger=_int(opts, "minOffsetsPerTrigger", minimum=1),
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60 * 1000),
        min_partitions=_int(opts, "minPartitions", minimum=1),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition", minimum=1),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        sub_expression=sub.strip() or "*",
        sql_filter=sql_filter,
        include_properties=_bool(opts, "includeProperties", False),
        pull_batch_size=_int(opts, "pullBatchSize", minimum=1, maximum=65536) or 32,
        pull_timeout_ms=_int(opts, "pullTimeoutMs", minimum=1) or 10_000,
        group=group,
        fetch_retries=_int_default(opts, "fetchOffset.numRetries", 3, minimum=0),
        fetch_retry_interval_ms=_int_default(opts, "fetchOffset.retryIntervalMs", 200, minimum=0),
        access_key=_credential(opts, "accessKey", "secretKey"),
        secret_key=_credential(opts, "secretKey", "accessKey"),
    )


# -------------------------------------------------------------------------------- helpers


def _credential(opts: dict[str, str], name: str, pair: str) -> str | None:
    """``accessKey`` / ``secretKey``: both or neither."""
    value = (opts.get(name) or "").strip() or None
    if value is not None and not (opts.get(pair) or "").strip():
        raise InvalidOptionError(pair, f"{name} is set: {pair} is needed too (ACL signs with both)")
    return value


def _check(name: str, error: str | None) -> None:
    """Raise the protocol's remark (``topic_error``/``group_error``) for ``name``, if any."""
    if error is not None:
        raise InvalidOptionError(name, error)


def _parse_name_servers(value: str | None) -> tuple[str, ...]:
    if value is None or not value.strip():
        raise InvalidOptionError("nameServer", "is required (host:port, several separated by ';')")
    addrs = tuple(a.strip() for a in re.split(r"[;,]", value) if a.strip())
    for addr in addrs:
        if not _ADDR.match(addr) or not 0 < int(addr.rpartition(":")[2]) < 65536:
            raise InvalidOptionError("nameServer", f"{addr!r} is not a host:port address")
    return addrs


def _parse_topics(value: str | None) -> tuple[str, ...]:
    if value is None or not value.strip():
        raise InvalidOptionError("topic", "is required (one topic or a comma-separated list)")
    topics: list[str] = []
    for topic in (t.strip() for t in value.split(",")):
        if not topic:
            raise InvalidOptionError("topic", f"empty topic name in {value!r}")
        _check("topic", topic_error(topic))
        if topic not in topics:
            topics.append(topic)
    return tuple(topics)


def _only_listed_topics(name: str, offsets: OffsetMap, topics: tuple[str, ...]) -> None:
    for key in offsets:
        if key.topic not in topics:
            raise InvalidOptionError(name, f"topic {key.topic!r} is not in the 'topic' option {list(topics)}")


def _parse_start(opts: dict[str, str], mode: Mode, topics: tuple[str, ...]) -> StartSpec:
    raw = opts.get("startingOffsets")
    default: Literal["earliest", "latest"] = "latest" if mode == "stream" else "earliest"
    offsets: OffsetMap | None = None
    if raw is not None:
        text = raw.strip()
        if text.lower() in ("earliest", "latest"):
            default = "earliest" if text.lower() == "earliest" else "latest"
        else:
            offsets = from_json_dict(
                parse_json_option("startingOffsets", text), what="startingOffsets", allow_special=True
            )
            default = "earliest"  # queues the JSON does not list start at their earliest offset
            _only_listed_topics("startingOffsets", offsets, topics)
    if mode == "batch":
        if default == "latest":
            raise InvalidOptionError("startingOffsets", "'latest' is not allowed for batch reads")
        if offsets is not None and LATEST in offsets.values():
            raise InvalidOptionError("startingOffsets", "-1 (latest) is not allowed for batch reads")
    timestamp = _int(opts, "startingTimestamp", minimum=0)
    timestamps: OffsetMap | None = None
    if "startingOffsetsByTimestamp" in opts:
        timestamps = from_json_dict(
            parse_json_option("startingOffsetsByTimestamp", opts["startingOffsetsByTimestamp"]),
            what="startingOffsetsByTimestamp",
        )
        _only_listed_topics("startingOffsetsByTimestamp", timestamps, topics)
    group = opts.get("group")
    chosen = [
        n
        for n, present in (
            ("startingOffsets", offsets is not None),
            ("startingOffsetsByTimestamp", timestamps is not None),
            ("startingTimestamp", timestamp is not None),
            ("group", group is not None),
        )
        if present
    ]
    if len(chosen) > 1:
        raise InvalidOptionError(chosen[1], f"conflicts with {chosen[0]!r}: give only one starting position")
    return StartSpec(default, offsets, timestamps, timestamp, group)


def _parse_end(raw: str | None, topics: tuple[str, ...]) -> OffsetMap | None:
    if raw is None or raw.strip().lower() == "latest":
        return None
    if raw.strip().lower() == "earliest":
        raise InvalidOptionError("endingOffsets", "'earliest' is not allowed as an ending offset")
    end = from_json_dict(parse_json_option("endingOffsets", raw), what="endingOffsets", allow_special=True)
    if EARLIEST in end.values():
        raise InvalidOptionError("endingOffsets", "-2 (earliest) is not allowed as an ending offset")
    _only_listed_topics("endingOffsets", end, topics)
    return end


def _int(opts: dict[str, str], name: str, *, minimum: int, maximum: int | None = None) -> int | None:
    raw = opts.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidOptionError(name, f"{raw!r} is not an integer") from None
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise InvalidOptionError(name, f"must be {bound}, got {value}")
    return value


def _int_default(opts: dict[str, str], name: str, default: int, *, minimum: int) -> int:
    value = _int(opts, name, minimum=minimum)
    return default if value is None else value


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    text = raw.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidOptionError(name, f"must be true or false, got {raw!r}")


def _duration_ms(opts: dict[str, str], name: str, default: int) -> int:
    raw = opts.get(name)
    if raw is None:
        return default
    m = _DURATION.match(raw)
    if m is None:
        raise InvalidOptionError(name, f"{raw!r} is not a duration (e.g. 500ms, 30s, 15m, 1h)")
    return int(int(m.group(1)) * _DURATION_MS[(m.group(2) or "ms").lower()])
