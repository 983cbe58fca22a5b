"""JSON bodies of the client/broker requests.

==============================  ==================================================================
body                            JSON (fastjson: keys alphabetical; ``<MQ>`` = object-as-key)
==============================  ==================================================================
HeartbeatData (34)              ``{"clientID","consumerDataSet":[ConsumerData],"producerDataSet":[{"groupName"}]}``
ConsumerData                    ``{"consumeFromWhere","consumeType","groupName","messageModel",
                                "subscriptionDataSet":[SubscriptionData],"unitMode"}``
SubscriptionData                ``{"classFilterMode","codeSet","expressionType","subString",
                                "subVersion","tagsSet","topic"}``
MessageQueue                    ``{"brokerName","queueId","topic"}``
Lock/UnlockBatchRequestBody     ``{"clientId","consumerGroup","mqSet":[MQ]}``
LockBatchResponseBody           ``{"lockOKMQSet":[MQ]}``
GetConsumerListByGroupResp.     ``{"consumerIdList":[..]}``
TopicStatsTable (202)           ``{"offsetTable":{<MQ>:{"lastUpdateTimestamp","maxOffset","minOffset"}}}``
ConsumeStats (208)              ``{"consumeTps":d,"offsetTable":{<MQ>:{"brokerOffset","consumerOffset","lastTimestamp"}}}``
ConsumerConnection (203)        ``{"connectionSet":[Connection],"consumeFromWhere","consumeType",
                                "messageModel","subscriptionTable":{topic:SubscriptionData}}``
ProducerConnection (204)        ``{"connectionSet":[{"clientAddr","clientId","language","version"}]}``
ResetOffsetBody (220/222)       ``{"offsetTable":{<MQ>:offset}}``; for C++: ``{"offsetTable":[{MQ + "offset"}]}``
SubscriptionGroupConfig         Java defaults; subscriptionGroup.json ``{"dataVersion","subscriptionGroupTable"}``
GroupList                       ``{"groupList":[..]}``
consumerOffset.json             ``{"offsetTable":{"topic@group":{0:123,1:45}}}`` (bare int keys)
delayOffset.json                ``{"offsetTable":{1:0,2:17}}`` (bare int keys)
==============================  ==================================================================

Client quirks accepted: enums as names or ordinals (C++ sends ints), ``subVersion``
as a number or a string, missing ``*DataSet`` keys, missing ``expressionType`` (→ ``TAG``). Tag
codes are always recomputed from the tags with Java's ``String.hashCode``; a client's ``codeSet``
is never trusted (C++ sends ``atoi(tag)``). The heartbeat bodies live in heartbeat.py (re-exported).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.fastjson import (
    BodyFormatError,
    FrozenDict,
    as_object,
    decode_object,
    get_bool,
    get_dict,
    get_enum,
    get_float,
    get_int,
    get_list,
    get_str,
)

# heartbeat bodies, MessageQueue and the consumer enums live in heartbeat.py; re-exported here
from pocketmq.remoting.protocol.heartbeat import *  # noqa: F403
from pocketmq.remoting.protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    encode_body,
    mq_table,
)
from pocketmq.remoting.protocol.route import MASTER_ID, DataVersion

# --------------------------------------------------------------------------------------------
# lock / consumer list / connections


def _mq_list(obj: Mapping[str, Any], key: str) -> list[MessageQueue]:
    return list(dict.fromkeys(MessageQueue.from_json(m) for m in get_list(obj, key)))


@dataclass(slots=True)
class LockBatchRequestBody:
    consumer_group: str
    client_id: str
    mq_set: list[MessageQueue] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": [mq.to_json() for mq in sorted(self.mq_set)],
        }

    def encode(self) -> bytes:
        return encode_body(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "lockBatchRequestBody")
        return cls(get_str(obj, "consumerGroup"), get_str(obj, "clientId"), _mq_list(obj, "mqSet"))

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        """Raises: BodyFormatError."""
        return cls.from_json(decode_object(data, "lockBatchRequestBody"))


class UnlockBatchRequestBody(LockBatchRequestBody):
    """Same shape as :class:`LockBatchRequestBody`."""

    __slots__ = ()


@dataclass(slots=True)
class LockBatchResponseBody:
    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"lockOKMQSet": [mq.to_json() for mq in sorted(self.lock_ok_mq_set)]}

    def encode(self) -> bytes:
        return encode_body(self.to_json())

    @classmethod
    def decode(cls, data: bytes | str) -> LockBatchResponseBody:
        """Raises: BodyFormatError."""
        return cls(_mq_list(decode_object(data, "lockBatchResponseBody"), "lockOKMQSet"))


@dataclass(slots=True)
class GetConsumerListByGroupResponseBody:
    consumer_id_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return encode_body({"consumerIdList": list(self.consumer_id_list)})

    @classmethod
    def decode(cls, data: bytes | str) -> GetConsumerListByGroupResponseBody:
        """Raises: BodyFormatError."""
        obj = decode_object(data, "getConsumerListByGroupResponseBody")
        return cls([str(c) for c in get_list(obj, "consumerIdList")])


@dataclass(frozen=True, slots=True)
class Connection:
    client_id: str
    client_addr: str
    language: str = "JAVA"
    version: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Connection:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "connection")
        return cls(
            get_str(obj, "clientId", ""),
            get_str(obj, "clientAddr", ""),
            get_str(obj, "language", "JAVA"),
            get_int(obj, "version", 0),
        )


@dataclass(slots=True)
class ConsumerConnection:
    connection_set: list[Connection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"connectionSet": [c.to_json() for c in self.connection_set]}
        if self.consume_from_where is not None:
            out["consumeFromWhere"] = self.consume_from_where.value
        if self.consume_type is not None:
            out["consumeType"] = self.consume_type.value
        if self.message_model is not None:
            out["messageModel"] = self.message_model.value
        out["subscriptionTable"] = {t: s.to_json() for t, s in self.subscription_table.items()}
        return out

    def encode(self) -> bytes:
        return encode_body(self.to_json())

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumerConnection:
        """Raises: BodyFormatError."""
        obj = decode_object(data, "consumerConnection")
        return cls(
            [Connection.from_json(c) for c in get_list(obj, "connectionSet")],
            {str(t): SubscriptionData.from_json(s) for t, s in get_dict(obj, "subscriptionTable").items()},
            get_enum(obj, "consumeType", ConsumeType, None),
            get_enum(obj, "messageModel", MessageModel, None),
            get_enum(obj, "consumeFromWhere", ConsumeFromWhere, None),
        )


@dataclass(slots=True)
class ProducerConnection:
    connection_set: list[Connection] = field(default_factory=list)

    def encode(self) -> bytes:
        return encode_body({"connectionSet": [c.to_json() for c in self.connection_set]})

    @classmethod
    def decode(cls, data: bytes | str) -> ProducerConnection:
        """Raises: BodyFormatError."""
        obj = decode_object(data, "producerConnection")
        return cls([Connection.from_json(c) for c in get_list(obj, "connectionSet")])


# --------------------------------------------------------------------------------------------
# MessageQueue-keyed stats and offsets


@dataclass(frozen=True, slots=True)
class TopicOffset:
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def __fastjson__(self) -> dict[str, Any]:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_json(cls, obj: Any) -> TopicOffset:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "topicOffset")
        return cls(
            get_int(obj, "minOffset", 0), get_int(obj, "maxOffset", 0), get_int(obj, "lastUpdateTimestamp", 0)
        )


@dataclass(slots=True)
class TopicStatsTable:
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def encode(self) -> bytes:
        return encode_body({"offsetTable": self.offset_table})

    @classmethod
    def decode(cls, data: bytes | str) -> TopicStatsTable:
        """Raises: BodyFormatError."""
        obj = decode_object(data, "topicStatsTable")
        return cls(mq_table(get_dict(obj, "offsetTable"), TopicOffset.from_json))


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0

    def __fastjson__(self) -> dict[str, Any]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
        }

    @classmethod
    def from_json(cls, obj: Any) -> OffsetWrapper:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "offsetWrapper")
        return cls(
            get_int(obj, "brokerOffset", 0),
            get_int(obj, "consumerOffset", 0),
            get_int(obj, "lastTimestamp", 0),
        )


@dataclass(slots=True)
class ConsumeStats:
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def compute_total_diff(self) -> int:
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())

    def encode(self) -> bytes:
        return encode_body({"consumeTps": float(self.consume_tps), "offsetTable": self.offset_table})

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumeStats:
        """Raises: BodyFormatError."""
        obj = decode_object(data, "consumeStats")
        return cls(
            mq_table(get_dict(obj, "offsetTable"), OffsetWrapper.from_json),
            get_float(obj, "consumeTps", 0.0),
        )


def _offset(v: Any) -> int:
    result: int = get_int({"offset": v}, "offset")
    return result


@dataclass(slots=True)
class ResetOffsetBody:
    """RESET_CONSUMER_CLIENT_OFFSET / INVOKE_BROKER_TO_RESET_OFFSET body."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        """fastjson's MessageQueue-keyed form (Java clients)."""
        return encode_body({"offsetTable": self.offset_table})

    def encode_for_c(self) -> bytes:
        """``ResetOffsetBodyForC``: a list of MessageQueue objects with an ``offset`` (C++ clients)."""
        entries = [{**mq.to_json(), "offset": off} for mq, off in sorted(self.offset_table.items())]
        return encode_body({"offsetTable": entries})

    @classmethod
    def decode(cls, data: bytes | str) -> ResetOffsetBody:
        """Either form.

        Raises: BodyFormatError.
        """
        obj = decode_object(data, "resetOffsetBody")
        raw = obj.get("offsetTable")
        if isinstance(raw, list):
            table = {
                MessageQueue.from_json(e): _offset(as_object(e, "offsetTable").get("offset")) for e in raw
            }
            return cls(table)
        return cls(mq_table(get_dict(obj, "offsetTable"), _offset))


# --------------------------------------------------------------------------------------------
# subscription groups, group list, running info, offset files


_GROUP_CONFIG_KEYS = (
    ("brokerId", "broker_id"),
    ("consumeBroadcastEnable", "consume_broadcast_enable"),
    ("consumeEnable", "consume_enable"),
    ("consumeFromMinEnable", "consume_from_min_enable"),
    ("groupName", "group_name"),
    ("notifyConsumerIdsChangedEnable", "notify_consumer_ids_changed_enable"),
    ("retryMaxTimes", "retry_max_times"),
    ("retryQueueNums", "retry_queue_nums"),
    ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly"),
)


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, attr) for key, attr in _GROUP_CONFIG_KEYS}

    def encode(self) -> bytes:
        return encode_body(self.to_json())

    @classmethod
    def from_json(cls, obj: Any, group_name: str | None = None) -> SubscriptionGroupConfig:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "subscriptionGroupConfig")
        return cls(
            group_name=get_str(obj, "groupName", group_name) if group_name else get_str(obj, "groupName"),
            consume_enable=get_bool(obj, "consumeEnable", True),
            consume_from_min_enable=get_bool(obj, "consumeFromMinEnable", True),
            consume_broadcast_enable=get_bool(obj, "consumeBroadcastEnable", True),
            retry_queue_nums=get_int(obj, "retryQueueNums", 1, min_value=0, max_value=2**31 - 1),
            retry_max_times=get_int(obj, "retryMaxTimes", 16, min_value=-1, max_value=2**31 - 1),
            broker_id=get_int(obj, "brokerId", MASTER_ID, min_value=0),
            which_broker_when_consume_slowly=get_int(obj, "whichBrokerWhenConsumeSlowly", 1, min_value=0),
            notify_consumer_ids_changed_enable=get_bool(obj, "notifyConsumerIdsChangedEnable", True),
        )

    @classmethod
    def decode(cls, data: bytes | str) -> SubscriptionGroupConfig:
        """Raises: BodyFormatError."""
        return cls.from_json(decode_object(data, "subscriptionGroupConfig"))


@dataclass(slots=True)
class SubscriptionGroupWrapper:
    """subscriptionGroup.json and the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "subscriptionGroupTable": {g: c.to_json() for g, c in self.subscription_group_table.items()},
        }

    def encode(self, *, pretty: bool = False) -> bytes:
        return fastjson.dumpb(self.to_json(), pretty=pretty)

    @classmethod
    def decode(cls, data: bytes | str) -> SubscriptionGroupWrapper:
        """Raises: BodyFormatError."""
        obj = decode_object(data, "subscriptionGroupWrapper")
        table = {
            str(g): SubscriptionGroupConfig.from_json(c, str(g))
            for g, c in get_dict(obj, "subscriptionGroupTable").items()
        }
        raw_version = obj.get("dataVersion")
        return cls(table, DataVersion() if raw_version is None else DataVersion.from_json(raw_version))


@dataclass(slots=True)
class GroupList:
    group_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return encode_body({"groupList": sorted(set(self.group_list))})

    @classmethod
    def decode(cls, data: bytes | str) -> GroupList:
        """Raises: BodyFormatError."""
        return cls([str(g) for g in get_list(decode_object(data, "groupList"), "groupList")])


@dataclass(slots=True)
class ConsumerRunningInfo:
    """GET_CONSUMER_RUNNING_INFO reply; loose: nested process-queue and status objects stay dicts."""

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, dict[str, Any]] = field(default_factory=dict)
    status_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    jstack: str | None = None

    def encode(self) -> bytes:
        out: dict[str, Any] = {"properties": self.properties}
        if self.jstack is not None:
            out["jstack"] = self.jstack
        out.update(
            mqTable=self.mq_table,
            statusTable=self.status_table,
            subscriptionSet=[s.to_json() for s in self.subscription_set],
        )
        return encode_body(out)

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumerRunningInfo:
        """Raises: BodyFormatError."""
        obj = decode_object(data, "consumerRunningInfo")
        return cls(
            {str(k): str(v) for k, v in get_dict(obj, "properties").items()},
            [SubscriptionData.from_json(s) for s in get_list(obj, "subscriptionSet")],
            mq_table(get_dict(obj, "mqTable"), lambda v: dict(as_object(v, "mqTable"))),
            {str(k): dict(as_object(v, "statusTable")) for k, v in get_dict(obj, "statusTable").items()},
            get_str(obj, "jstack", None),
        )


def _int_keyed(raw: Mapping[Any, Any], what: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for k, v in raw.items():
        try:
            out[int(k)] = _offset(v)
        except (TypeError, ValueError) as exc:
            raise BodyFormatError(f"bad entry {k!r:.20}: {exc}", field=what) from None
    return out


@dataclass(slots=True)
class ConsumerOffsetTable:
    """config/consumerOffset.json: ``"topic@group" → {queueId: offset}``."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    def encode(self, *, quote_int_keys: bool = False, pretty: bool = True) -> bytes:
        """Java's exact form (bare int keys, pretty) by default; both forms load back."""
        return fastjson.dumpb(
            {"offsetTable": self.offset_table}, quote_int_keys=quote_int_keys, pretty=pretty
        )

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumerOffsetTable:
        """Raises: BodyFormatError."""
        obj = decode_object(data, "consumerOffset")
        return cls(
            {
                str(k): _int_keyed(as_object(v, "offsetTable"), "offsetTable")
                for k, v in get_dict(obj, "offsetTable").items()
            }
        )


@dataclass(slots=True)
class DelayOffsetTable:
    """config/delayOffset.json: delay level → offset consumed in the SCHEDULE_TOPIC_XXXX queue."""

    offset_table: dict[int, int] = field(default_factory=dict)

    def encode(self, *, quote_int_keys: bool = False, pretty: bool = True) -> bytes:
        return fastjson.dumpb(
            {"offsetTable": self.offset_table}, quote_int_keys=quote_int_keys, pretty=pretty
        )

    @classmethod
    def decode(cls, data: bytes | str) -> DelayOffsetTable:
        """Raises: BodyFormatError."""
        return cls(_int_keyed(get_dict(decode_object(data, "delayOffset"), "offsetTable"), "offsetTable"))


def mq_key(topic: str, broker_name: str, queue_id: int) -> FrozenDict:
    """The parsed form of a fastjson MessageQueue key (for tests and tools)."""
    return FrozenDict({"brokerName": broker_name, "queueId": queue_id, "topic": topic})
