"""User-facing message types: :class:`Message`, :class:`MessageQueue`, send and pull results.

Received messages are :class:`pocketmq.remoting.protocol.message.MessageExt` records decoded
straight from pull bodies (properties parsed lazily), re-exported here as ``MessageExt``.

msgpack helpers: :meth:`Message.from_object` packs any msgpack-serialisable Python object as
the body and records the content type in the ``CONTENT_TYPE`` property; :func:`unpack_body`
reverses it on the consumer side (and refuses bodies that were not packed that way).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from pocketmq.remoting.protocol.bodies import MessageQueue
from pocketmq.remoting.protocol.message import MessageConst, MessageExt

#: Property naming the body's encoding (our convention; other clients simply ignore it).
CONTENT_TYPE_PROPERTY = "CONTENT_TYPE"
MSGPACK_CONTENT_TYPE = "application/msgpack"


@dataclass(slots=True, init=False)
class Message:
    """A message to send.

    ``keys`` may be one string (space-separated keys, as in Java) or a sequence of keys.
    ``properties`` holds user properties; system keys (TAGS, KEYS, DELAY ...) are managed by
    the dedicated attributes and may not be set there.
    """

    topic: str
    body: bytes = b""
    tags: str | None = None
    keys: str | Iterable[str] | None = None
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    #: 1..18: deliver after RocketMQ's ``messageDelayLevel`` (1s 5s 10s 30s 1m ... 2h).
    delay_level: int = 0
    #: False: the broker replies before flushing/replicating (property WAIT=false).
    wait_store_msg_ok: bool = True

    def __init__(
        self, topic: str, body: bytes = b"", tags: str | None = None,
        keys: str | Iterable[str] | None = None, flag: int = 0, properties: dict[str, str] | None = None,
        delay_level: int = 0, wait_store_msg_ok: bool = True,
    ) -> None:  # fmt: skip
        # written out: the generated __init__ (its default_factory call) costs a third more, on
        # every message an application builds
        self.topic = topic
        self.body = body
        self.tags = tags
        self.keys = keys
        self.flag = flag
        self.properties = {} if properties is None else properties
        self.delay_level = delay_level
        self.wait_store_msg_ok = wait_store_msg_ok

    @classmethod
    def from_object(cls, topic: str, obj: Any, **kwargs: Any) -> Message:
        """A message whose body is ``obj`` packed with msgpack (content type recorded).

        Raises:
            TypeError: ``obj`` is not msgpack-serialisable.
        """
        msg = cls(topic, msgpack.packb(obj, use_bin_type=True), **kwargs)
        msg.properties[CONTENT_TYPE_PROPERTY] = MSGPACK_CONTENT_TYPE
        return msg

    @property
    def keys_str(self) -> str | None:
        keys = self.keys
        if keys is None or isinstance(keys, str):
            return keys or None
        joined = MessageConst.KEY_SEPARATOR.join(keys)
        return joined or None

    def wire_properties(self) -> dict[str, str]:
        """All properties as they travel: user properties plus TAGS/KEYS/DELAY/WAIT."""
        props = dict(self.properties)
        if self.tags:
            props[MessageConst.TAGS] = self.tags
        keys = self.keys_str
        if keys:
            props[MessageConst.KEYS] = keys
        if self.delay_level > 0:
            props[MessageConst.DELAY] = str(self.delay_level)
        if not self.wait_store_msg_ok:
            props[MessageConst.WAIT] = "false"
        return props


def unpack_body(msg: MessageExt | Message) -> Any:
    """The Python object of a body sent with :meth:`Message.from_object`.

    Raises:
        ValueError: the message's content type is not msgpack, or the body is not valid msgpack.
    """
    ctype = msg.properties.get(CONTENT_TYPE_PROPERTY)
    if ctype != MSGPACK_CONTENT_TYPE:
        raise ValueError(f"message body content type is {ctype!r}, not {MSGPACK_CONTENT_TYPE!r}")
    try:
        return msgpack.unpackb(msg.body, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise ValueError(f"message body is not valid msgpack: {exc}") from exc


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)
class SendResult:
    """Outcome of a send. ``msg_id`` is the client UNIQ_KEY (comma-joined for batches, as in
    RocketMQ's ``SendResult``); ``offset_msg_id`` the broker's offset id(s). :attr:`msg_ids` and
    :attr:`offset_msg_ids` give them as lists, one per message in the batch's order."""

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    @property
    def msg_ids(self) -> list[str]:
        """One UNIQ_KEY per message sent (a single send: a list of one)."""
        return self.msg_id.split(",") if self.msg_id else []

    @property
    def offset_msg_ids(self) -> list[str]:
        """One broker offset msgId per message sent, as :attr:`msg_ids` (empty when the broker
        reported none)."""
        return self.offset_msg_id.split(",") if self.offset_msg_id else []


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    """A pull reply. ``msgs`` are decoded, decompressed and tag-filtered records; ``body``
    (raw CommitLog bytes) is kept only until they are decoded."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msgs: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0
    body: bytes | None = None


__all__ = [
    "CONTENT_TYPE_PROPERTY",
    "MSGPACK_CONTENT_TYPE",
    "Message",
    "MessageExt",
    "MessageQueue",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "unpack_body",
]
