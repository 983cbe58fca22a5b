"""Results of :class:`~pocketmq.client.admin.MQAdmin` calls (pure data; no I/O).

Every result has ``to_json()`` giving the ``--json`` document of the matching ``mqadmin``
command. Keys are camelCase, RocketMQ's own field names where one exists, and stable: new keys
may be added, existing ones never change meaning. Offsets are integers, timestamps epoch
milliseconds (0 = unknown), TPS floats.

==========================  =====================================================================
result                      JSON keys
==========================  =====================================================================
QueueStatus                 brokerName, queueId, minOffset, maxOffset, lastUpdateTimestamp
TopicStatus                 topic, queues[QueueStatus], totalMessages
BrokerRuntime               cluster, brokerName, brokerId, addr, version, inTps, outTps,
                            sendQueueSize, sendQueueHeadWaitMs, pullQueueSize,
                            pullQueueHeadWaitMs, pageCacheLockTimeMills,
                            earliestMessageTimeStamp, commitLogDiskRatio, inTotalYest,
                            outTotalYest, inTotalToday, outTotalToday, stats{raw KVTable},
                            error (null when the broker answered)
ProgressRow                 topic, brokerName, queueId, brokerOffset, consumerOffset, diff,
                            lastTimestamp, clientIp (null unless asked)
GroupProgress               group, consumeTps, diffTotal, queues[ProgressRow]
GroupSummary                group, count, version, consumeType, messageModel, consumeTps,
                            diffTotal
ConnectionRow               clientId, clientAddr, language, version, versionDesc
ConsumerConnectionInfo      group, connections[ConnectionRow], subscriptions[{topic,
                            subExpression, expressionType}], consumeType, messageModel,
                            consumeFromWhere
ResetRow                    brokerName, queueId, consumerOffset (-1 = unknown), offset
ResetResult                 group, topic, timestamp, force, dryRun, queues[ResetRow]
BrokerConsumeRow            topic, group, brokerName, queueId, brokerOffset, consumerOffset,
                            diff, lastTimestamp
StatsRow                    topic, consumerGroup, accumulation, inTps, outTps, inMsg24Hour,
                            outMsg24Hour
MessageTrack                consumerGroup, trackType, exceptionDesc
message (see message_json)  msgId, offsetMsgId, topic, tags, keys, queueId, queueOffset,
                            commitLogOffset, reconsumeTimes, bornTimestamp, storeTimestamp,
                            bornHost, storeHost, sysFlag, properties, bodySize, body,
                            bodyEncoding ("utf-8", "base64" or null when not printed)
==========================  =====================================================================
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field, fields
from typing import Any

from pocketmq.remoting.protocol.message import MessageExt

__all__ = [
    "BrokerConsumeRow",
    "BrokerRuntime",
    "ConnectionRow",
    "ConsumerConnectionInfo",
    "GroupProgress",
    "GroupSummary",
    "MessageTrack",
    "ProgressRow",
    "QueueRange",
    "QueueStatus",
    "ResetResult",
    "ResetRow",
    "StatsRow",
    "TopicStatus",
    "message_json",
    "version_desc",
]

# MQVersion.Version ordinals: V4_1_0_SNAPSHOT = 232, then SNAPSHOT/release pairs for x.y.0..x.y.9.
_V4_1_0_SNAPSHOT = 232


def version_desc(ordinal: int) -> str:
    """``V4_9_8`` for 409 (Java ``MQVersion.getVersionDesc``); 4.1.0 and later are decoded."""
    if ordinal < _V4_1_0_SNAPSHOT:
        return f"V_ORDINAL_{ordinal}" if ordinal >= 0 else "UNKNOWN"
    idx = ordinal - _V4_1_0_SNAPSHOT
    n = idx // 2
    minor_seq, patch = divmod(n, 10)  # 4.1 .. 4.9, then 5.0 ...
    minor_seq += 1
    major, minor = (4, minor_seq) if minor_seq < 10 else (5 + (minor_seq - 10) // 10, (minor_seq - 10) % 10)
    return f"V{major}_{minor}_{patch}" + ("_SNAPSHOT" if idx % 2 == 0 else "")


def _first_float(value: str | None) -> float:
    """RocketMQ TPS values are ``"10s 1min 10min"``: the first one is the live rate."""
    if not value:
        return 0.0
    try:
        return float(value.split()[0])
    except (ValueError, IndexError):
        return 0.0


def _int(value: str | None) -> int:
    try:
        return int(float(value)) if value else 0
    except ValueError:
        return 0


def _float(value: str | None) -> float:
    try:
        return float(value) if value else 0.0
    except ValueError:
        return 0.0


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _fields_json(row: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The dataclass fields of ``row`` in declaration order, keyed by their camelCase names (a
    field's ``metadata["json"]`` overrides the name); ``skip`` leaves fields out."""
    return {
        f.metadata.get("json") or _camel(f.name): getattr(row, f.name)
        for f in fields(row)
        if f.name not in skip
    }


class _FlatRow:
    """A result whose JSON is exactly its fields (see :func:`_fields_json`)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self)


@dataclass(slots=True)
class QueueStatus(_FlatRow):
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int = 0


@dataclass(slots=True)
class TopicStatus:
    topic: str
    queues: list[QueueStatus] = field(default_factory=list)

    @property
    def total_messages(self) -> int:
        return sum(q.max_offset - q.min_offset for q in self.queues)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "queues": [q.to_json() for q in self.queues],
            "totalMessages": self.total_messages,
        }


class _CounterDiff:
    """A :class:`BrokerRuntime` column read as counter ``later`` minus counter ``earlier``."""

    def __init__(self, later: str, earlier: str) -> None:
        self.later = later
        self.earlier = earlier

    def __get__(self, runtime: BrokerRuntime, owner: type[BrokerRuntime] | None = None) -> int:
        stats = runtime.stats
        return _int(stats.get(self.later)) - _int(stats.get(self.earlier))


@dataclass(slots=True)
class BrokerRuntime:
    """One broker's GET_BROKER_RUNTIME_INFO table, with clusterList's derived columns."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    stats: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    def get(self, key: str) -> str | None:
        return self.stats.get(key)

    @property
    def version(self) -> str:
        return self.stats.get("brokerVersionDesc", "")

    @property
    def in_tps(self) -> float:
        return _first_float(self.stats.get("putTps"))

    @property
    def out_tps(self) -> float:
        # Java 4.x spells it "getTransferedTps"; accept the corrected spelling too.
        return _first_float(self.stats.get("getTransferedTps") or self.stats.get("getTransferredTps"))

    @property
    def page_cache_lock_time(self) -> int:
        return _int(self.stats.get("pageCacheLockTimeMills"))

    @property
    def earliest_message_timestamp(self) -> int:
        return _int(self.stats.get("earliestMessageTimeStamp"))

    def hours(self, now_ms: int) -> float:
        """Age of the earliest stored message in hours (clusterList ``#Hour``); 0 when unknown."""
        earliest = self.earliest_message_timestamp
        return (now_ms - earliest) / 3_600_000 if earliest > 0 else 0.0

    @property
    def disk_ratio(self) -> float:
        return _float(self.stats.get("commitLogDiskRatio"))

    # clusterList's day totals: one of RocketMQ's BrokerStats counters minus another
    in_total_yest = _CounterDiff("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning")
    out_total_yest = _CounterDiff("msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning")
    in_total_today = _CounterDiff("msgPutTotalTodayNow", "msgPutTotalTodayMorning")
    out_total_today = _CounterDiff("msgGetTotalTodayNow", "msgGetTotalTodayMorning")

    def to_json(self) -> dict[str, Any]:
        s = self.stats
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "addr": self.addr,
            "version": self.version,
            "inTps": self.in_tps,
            "outTps": self.out_tps,
            "sendQueueSize": _int(s.get("sendThreadPoolQueueSize")),
            "sendQueueHeadWaitMs": _int(s.get("sendThreadPoolQueueHeadWaitTimeMills")),
            "pullQueueSize": _int(s.get("pullThreadPoolQueueSize")),
            "pullQueueHeadWaitMs": _int(s.get("pullThreadPoolQueueHeadWaitTimeMills")),
            "pageCacheLockTimeMills": self.page_cache_lock_time,
            "earliestMessageTimeStamp": self.earliest_message_timestamp,
            "commitLogDiskRatio": self.disk_ratio,
            "inTotalYest": self.in_total_yest,
            "outTotalYest": self.out_total_yest,
            "inTotalToday": self.in_total_today,
            "outTotalToday": self.out_total_today,
            "stats": dict(sorted(s.items())),
            "error": self.error,
        }


#: the keys of :meth:`_QueueOffsets.offsets_json`, in order (``diff`` is a property)
_OFFSETS_JSON = ("broker_name", "queue_id", "broker_offset", "consumer_offset", "diff", "last_timestamp")


class _QueueOffsets:
    """The per-queue offsets a progress row carries (its dataclass declares the fields)."""

    __slots__ = ()
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    def offsets_json(self) -> dict[str, Any]:
        return {_camel(name): getattr(self, name) for name in _OFFSETS_JSON}


@dataclass(slots=True)
class ProgressRow(_QueueOffsets):
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0
    client_ip: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, **self.offsets_json(), "clientIp": self.client_ip}


@dataclass(slots=True)
class GroupProgress:
    group: str
    rows: list[ProgressRow] = field(default_factory=list)
    consume_tps: float = 0.0

    @property
    def diff_total(self) -> int:
        return sum(r.diff for r in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "consumeTps": self.consume_tps,
            "diffTotal": self.diff_total,
            "queues": [r.to_json() for r in self.rows],
        }


@dataclass(slots=True)
class GroupSummary(_FlatRow):
    """One line of ``consumerProgress`` without ``-g``."""

    group: str
    count: int = 0
    version: str = ""
    consume_type: str = ""
    message_model: str = ""
    consume_tps: float = 0.0
    diff_total: int = 0


@dataclass(slots=True)
class ConnectionRow:
    client_id: str
    client_addr: str
    language: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {**_fields_json(self), "versionDesc": version_desc(self.version)}


@dataclass(slots=True)
class ConsumerConnectionInfo:
    group: str
    connections: list[ConnectionRow] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None
    #: topic -> "TAG" or "SQL92" (a topic missing here is TAG)
    expression_types: dict[str, str] = field(default_factory=dict)

    def expression_type(self, topic: str) -> str:
        return self.expression_types.get(topic, "TAG")

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "connections": [c.to_json() for c in self.connections],
            "subscriptions": [
                {"topic": t, "subExpression": e, "expressionType": self.expression_type(t)}
                for t, e in self.subscriptions
            ],
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
        }


@dataclass(slots=True)
class ResetRow(_FlatRow):
    broker_name: str
    queue_id: int
    consumer_offset: int
    offset: int


@dataclass(slots=True)
class ResetResult:
    group: str
    topic: str
    #: Epoch ms the offsets were reset to; -1 = the end of every queue (skipAccumulatedMessage).
    timestamp: int
    force: bool
    dry_run: bool
    rows: list[ResetRow] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {**_fields_json(self, skip=("rows",)), "queues": [r.to_json() for r in self.rows]}


@dataclass(slots=True)
class BrokerConsumeRow(_QueueOffsets):
    topic: str
    group: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "group": self.group, **self.offsets_json()}


@dataclass(slots=True)
class StatsRow(_FlatRow):
    topic: str
    consumer_group: str | None
    accumulation: int = 0
    in_tps: float = 0.0
    out_tps: float = 0.0
    in_msg_24h: int = field(default=0, metadata={"json": "inMsg24Hour"})
    out_msg_24h: int = field(default=0, metadata={"json": "outMsg24Hour"})


@dataclass(slots=True)
class MessageTrack(_FlatRow):
    consumer_group: str
    track_type: str
    exception_desc: str | None = None


@dataclass(slots=True)
class QueueRange:
    """A queue's offsets as printMsg/consumeMessage read it, with the messages found."""

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)


def body_json(body: bytes, charset: str = "utf-8") -> tuple[str, str]:
    """``(text, encoding)``: the body as text when it decodes, else base64."""
    try:
        return body.decode(charset), charset
    except (UnicodeDecodeError, LookupError):
        return base64.b64encode(body).decode("ascii"), "base64"


def message_json(msg: MessageExt, *, with_body: bool = True, charset: str = "utf-8") -> dict[str, Any]:
    """The JSON form of a stored message (``msgId`` is the producer's UNIQ_KEY when present)."""
    body: str | None = None
    encoding: str | None = None
    if with_body:
        body, encoding = body_json(msg.body, charset)
    return {
        "msgId": msg.uniq_key or msg.msg_id,
        "offsetMsgId": msg.msg_id,
        "topic": msg.topic,
        "tags": msg.tags,
        "keys": msg.keys,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "bornHost": f"{msg.born_host[0]}:{msg.born_host[1]}",
        "storeHost": f"{msg.store_host[0]}:{msg.store_host[1]}",
        "sysFlag": msg.sys_flag,
        "properties": dict(sorted(msg.properties.items())),
        "bodySize": len(msg.body),
        "body": body,
        "bodyEncoding": encoding,
    }
