"""Heartbeat bodies and their parts: HeartbeatData (34), ConsumerData,
ProducerData, SubscriptionData, MessageQueue, and the consumer enums. Layouts are in
:mod:`pocketmq.remoting.protocol.bodies`'s docstring, which re-exports everything here.

Client quirks accepted: enums as names or ordinals (C++ sends ints), ``subVersion``
as a number or a string, missing ``*DataSet`` keys, missing ``expressionType`` (→ ``TAG``). Tag
codes are always recomputed from the tags with Java's ``String.hashCode``; a client's ``codeSet``
is never trusted (C++ sends ``atoi(tag)``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.fastjson import (
    BodyFormatError,
    as_object,
    decode_object,
    get_bool,
    get_enum,
    get_int,
    get_list,
    get_str,
)
from pocketmq.remoting.protocol.message import java_string_hash

__all__ = [
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "ExpressionType",
    "HeartbeatData",
    "MessageModel",
    "MessageQueue",
    "ProducerData",
    "SUB_ALL",
    "SubscriptionData",
    "split_tags",
]

SUB_ALL = "*"


class ConsumeType(enum.Enum):
    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push


class MessageModel(enum.Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = (
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    )
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ExpressionType(enum.Enum):
    TAG = "TAG"
    SQL92 = "SQL92"


def encode_body(obj: Any, quote_int_keys: bool = True) -> bytes:
    return fastjson.dumpb(obj, quote_int_keys=quote_int_keys)


# --------------------------------------------------------------------------------------------
# MessageQueue


class MessageQueue(NamedTuple):
    """(topic, brokerName, queueId); ordering matches Java's ``compareTo``."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    def __fastjson__(self) -> dict[str, Any]:
        return self.to_json()

    @classmethod
    def from_json(cls, obj: Any) -> MessageQueue:
        """Accepts an object, a :class:`FrozenDict` key, or a JSON string of one.

        Raises: BodyFormatError.
        """
        if isinstance(obj, str):
            obj = fastjson.decode_object(obj, "messageQueue")
        obj = as_object(obj, "messageQueue")
        return cls(get_str(obj, "topic"), get_str(obj, "brokerName"), get_int(obj, "queueId", min_value=0))


def mq_table(raw: Mapping[Any, Any], value: Any) -> dict[MessageQueue, Any]:
    return {MessageQueue.from_json(k): value(v) for k, v in raw.items()}


# --------------------------------------------------------------------------------------------
# heartbeat


def split_tags(sub_string: str | None) -> tuple[str, ...]:
    """Tags of a TAG expression (``"a || b"``); empty for ``*``/empty (= all tags)."""
    if sub_string is None or sub_string.strip() in ("", SUB_ALL):
        return ()
    tags = (t.strip() for t in sub_string.split("||"))
    return tuple(dict.fromkeys(t for t in tags if t))


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: str = ExpressionType.TAG.value
    class_filter_mode: bool = False

    @classmethod
    def build(
        cls, topic: str, sub_string: str | None, *, sub_version: int = 0, expression_type: str = "TAG"
    ) -> SubscriptionData:
        """Like ``FilterAPI.buildSubscriptionData``: tags and their Java hash codes from the expression."""
        if expression_type.upper() != ExpressionType.TAG.value:
            return cls(topic, sub_string or "", (), (), sub_version, expression_type.upper())
        tags = split_tags(sub_string)
        sub = (
            SUB_ALL
            if not tags and (sub_string or "").strip() in ("", SUB_ALL)
            else (sub_string or "").strip()
        )
        return cls(topic, sub, tags, tuple(java_string_hash(t) for t in tags), sub_version)

    @property
    def is_all(self) -> bool:
        """Matches every tag (Java compares ``subString`` with ``*``)."""
        return self.expression_type == ExpressionType.TAG.value and self.sub_string == SUB_ALL

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": list(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": list(self.tags_set),
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, obj: Any) -> SubscriptionData:
        """Tags come from ``subString`` (or ``tagsSet`` when it is absent); ``codeSet`` is recomputed.

        Raises: BodyFormatError.
        """
        obj = as_object(obj, "subscriptionData")
        expression_type = get_str(obj, "expressionType", "TAG").upper() or "TAG"
        if expression_type not in ExpressionType.__members__:
            raise BodyFormatError(f"unknown expression type {expression_type!r:.20}", field="expressionType")
        sub_string = get_str(obj, "subString", None)
        if sub_string is None and expression_type == "TAG":
            tags = tuple(dict.fromkeys(str(t).strip() for t in get_list(obj, "tagsSet") if str(t).strip()))
            sub_string = " || ".join(tags) if tags else SUB_ALL
        result = cls.build(
            get_str(obj, "topic"),
            sub_string,
            sub_version=get_int(obj, "subVersion", 0),
            expression_type=expression_type,
        )
        if get_bool(obj, "classFilterMode", False):
            return dataclasses.replace(result, class_filter_mode=True)
        return result


@dataclass(frozen=True, slots=True)
class ProducerData:
    group_name: str

    def to_json(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_json(cls, obj: Any) -> ProducerData:
        """Raises: BodyFormatError."""
        return cls(get_str(as_object(obj, "producerData"), "groupName"))


@dataclass(frozen=True, slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.value,
            "consumeType": self.consume_type.value,
            "groupName": self.group_name,
            "messageModel": self.message_model.value,
            "subscriptionDataSet": [s.to_json() for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json(cls, obj: Any) -> ConsumerData:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "consumerData")
        return cls(
            group_name=get_str(obj, "groupName"),
            consume_type=get_enum(obj, "consumeType", ConsumeType, ConsumeType.CONSUME_PASSIVELY),
            message_model=get_enum(obj, "messageModel", MessageModel, MessageModel.CLUSTERING),
            consume_from_where=get_enum(
                obj, "consumeFromWhere", ConsumeFromWhere, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
            ),
            subscription_data_set=tuple(
                SubscriptionData.from_json(s) for s in get_list(obj, "subscriptionDataSet")
            ),
            unit_mode=get_bool(obj, "unitMode", False),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    client_id: str
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json() for c in self.consumer_data_set],
            "producerDataSet": [p.to_json() for p in self.producer_data_set],
        }

    def encode(self) -> bytes:
        return encode_body(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> HeartbeatData:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "heartbeatData")
        client_id = get_str(obj, "clientID", aliases=("clientId",))
        if not client_id:
            raise BodyFormatError("empty client id", field="clientID")
        return cls(
            client_id=client_id,
            producer_data_set=tuple(ProducerData.from_json(p) for p in get_list(obj, "producerDataSet")),
            consumer_data_set=tuple(ConsumerData.from_json(c) for c in get_list(obj, "consumerDataSet")),
        )

    @classmethod
    def decode(cls, data: bytes | str) -> HeartbeatData:
        """Raises: BodyFormatError."""
        return cls.from_json(decode_object(data, "heartbeatData"))
