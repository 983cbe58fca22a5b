"""Topic configs and broker registration bodies: DataVersion, TopicConfig,
TopicConfigSerializeWrapper, RegisterBrokerBody (JSON and the compressed form), RegisterBrokerResult.
Byte layouts and JSON shapes are in :mod:`pocketmq.remoting.protocol.route`'s docstring, which
re-exports everything here.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.fastjson import (
    BodyFormatError,
    as_object,
    decode_object,
    get_bool,
    get_dict,
    get_enum,
    get_int,
    get_list,
    get_str,
)
from pocketmq.remoting.protocol.topics import PermName, TopicFilterType

__all__ = [
    "KVTable",
    "DataVersion",
    "MAX_INFLATED_REGISTER_BODY",
    "MAX_REGISTER_TOPICS",
    "RegisterBrokerBody",
    "RegisterBrokerResult",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "order_topic_conf_queues",
]

_MAX_INT32 = 2**31 - 1
_MAX_INT64 = 2**63 - 1


def int32_field(obj: Mapping[str, Any], key: str, default: int, **kw: Any) -> int:
    """An int32 JSON field (numbers given as strings accepted). Raises: BodyFormatError."""
    value: int = get_int(obj, key, default, min_value=-(2**31), max_value=_MAX_INT32, **kw)
    return value


def queue_nums_field(obj: Mapping[str, Any], key: str, default: int) -> int:
    """A queue count: 0 .. 2**31-1. Raises: BodyFormatError."""
    value: int = get_int(obj, key, default, min_value=0, max_value=_MAX_INT32)
    return value


@dataclass(slots=True)
class KVTable:
    table: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"table": dict(self.table)}

    def encode(self) -> bytes:
        return fastjson.dumpb(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> KVTable:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "kvTable")
        return cls({str(k): "" if v is None else str(v) for k, v in get_dict(obj, "table").items()})

    @classmethod
    def decode(cls, data: bytes | str) -> KVTable:
        """Raises: BodyFormatError."""
        return cls.from_json(decode_object(data, "kvTable"))


@dataclass(frozen=True, slots=True)
class DataVersion:
    """Version of a broker's topic table; equal only when both fields are equal."""

    timestamp: int = 0
    counter: int = 0

    def next_version(self, now_ms: int) -> DataVersion:
        return DataVersion(now_ms, self.counter + 1)

    def to_json(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    def encode(self) -> bytes:
        return fastjson.dumpb(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> DataVersion:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "dataVersion")
        return cls(
            timestamp=get_int(obj, "timestamp", 0, min_value=-_MAX_INT64 - 1, max_value=_MAX_INT64),
            counter=get_int(obj, "counter", 0, min_value=-_MAX_INT64 - 1, max_value=_MAX_INT64),
        )

    @classmethod
    def decode(cls, data: bytes | str) -> DataVersion:
        """Raises: BodyFormatError."""
        return cls.from_json(decode_object(data, "dataVersion"))


@dataclass(frozen=True, slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PermName.DEFAULT
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type.value,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: Any, topic_name: str | None = None) -> TopicConfig:
        """``topic_name`` (the map key) is used when the object lacks ``topicName``.

        Raises: BodyFormatError.
        """
        obj = as_object(obj, "topicConfig")
        return cls(
            topic_name=get_str(obj, "topicName", topic_name)
            if topic_name is not None
            else get_str(obj, "topicName"),
            read_queue_nums=queue_nums_field(obj, "readQueueNums", 16),
            write_queue_nums=queue_nums_field(obj, "writeQueueNums", 16),
            perm=int32_field(obj, "perm", PermName.DEFAULT),
            topic_filter_type=get_enum(obj, "topicFilterType", TopicFilterType, TopicFilterType.SINGLE_TAG),
            topic_sys_flag=int32_field(obj, "topicSysFlag", 0),
            order=get_bool(obj, "order", False),
        )

    def encode(self) -> str:
        """Java's space-separated text form (used by the compressed register body)."""
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
            f"{self.perm} {self.topic_filter_type.value}"
        )

    @classmethod
    def decode(cls, text: str) -> TopicConfig:
        """Parse :meth:`encode` text.

        Raises: BodyFormatError (not 5 fields, bad numbers or filter type).
        """
        parts = text.split(" ")
        if len(parts) != 5:
            raise BodyFormatError(f"expected 5 space-separated fields, got {text!r:.60}", field="topicConfig")
        name, r, w, perm, ftype = parts
        raw = {
            "topicName": name,
            "readQueueNums": r,
            "writeQueueNums": w,
            "perm": perm,
            "topicFilterType": ftype,
        }
        if not name:
            raise BodyFormatError("empty topic name", field="topicConfig")
        return cls.from_json(raw)


@dataclass(slots=True)
class TopicConfigSerializeWrapper:
    """topics.json and the core of the register body."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {name: tc.to_json() for name, tc in self.topic_config_table.items()},
        }

    def encode(self, *, pretty: bool = False) -> bytes:
        return fastjson.dumpb(self.to_json(), pretty=pretty)

    @classmethod
    def from_json(cls, obj: Any) -> TopicConfigSerializeWrapper:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "topicConfigSerializeWrapper")
        table = {
            str(name): TopicConfig.from_json(tc, str(name))
            for name, tc in get_dict(obj, "topicConfigTable").items()
        }
        raw_version = obj.get("dataVersion")
        version = DataVersion() if raw_version is None else DataVersion.from_json(raw_version)
        return cls(table, version)

    @classmethod
    def decode(cls, data: bytes | str) -> TopicConfigSerializeWrapper:
        """Raises: BodyFormatError."""
        return cls.from_json(decode_object(data, "topicConfigSerializeWrapper"))


_I32 = struct.Struct(">i")
#: Bounds for the compressed form: inflated size and topic count (defence against zip bombs).
MAX_INFLATED_REGISTER_BODY = 256 * 1024 * 1024
MAX_REGISTER_TOPICS = 1_000_000
#: A real topic table deflates 3-16x (measured: 100,000 topics, 227 KB -> 3.3 MB); a body may
#: inflate to this many times its compressed size (at least ``_MIN_INFLATE_BOUND``), so a
#: 250 KB bomb costs ~16 MB and milliseconds, not the 256 MiB cap (0.45 s, +450 MiB).
MAX_INFLATE_RATIO = 64
_MIN_INFLATE_BOUND = 1024 * 1024
#: inflated per step: the bound is checked as the output grows, never after
_INFLATE_STEP = 1024 * 1024


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def int32(self, what: str) -> int:
        if self.pos + 4 > len(self.buf):
            raise BodyFormatError("compressed body ends early", field=what)
        (value,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def chunk(self, what: str) -> bytes:
        n = self.int32(what)
        if n < 0 or self.pos + n > len(self.buf):
            raise BodyFormatError(f"bad length {n}", field=what)
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out


def _inflate(data: bytes, limit: int) -> bytes:
    """Inflate ``data`` step by step, refusing it once the output passes
    ``min(limit, max(1 MiB, MAX_INFLATE_RATIO x len(data)))``."""
    bound = min(limit, max(_MIN_INFLATE_BOUND, MAX_INFLATE_RATIO * len(data)))
    inflater = zlib.decompressobj()
    parts: list[bytes] = []
    size = 0
    pending = data
    try:
        while True:
            chunk = inflater.decompress(pending, min(_INFLATE_STEP, bound + 1 - size))
            size += len(chunk)
            parts.append(chunk)
            if size > bound:
                raise BodyFormatError(
                    f"inflates beyond {bound} bytes ({len(data)} compressed)", field="registerBrokerBody"
                )
            if inflater.eof:
                break
            pending = inflater.unconsumed_tail
            if not pending and not chunk:
                raise BodyFormatError("truncated zlib stream", field="registerBrokerBody")
    except zlib.error as exc:
        raise BodyFormatError(f"not a zlib stream ({exc})", field="registerBrokerBody") from None
    return b"".join(parts)


@dataclass(slots=True)
class RegisterBrokerBody:
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json(),
        }

    def encode(self, *, compress: bool = False) -> bytes:
        if not compress:
            return fastjson.dumpb(self.to_json())
        parts: list[bytes] = []

        def put(chunk: bytes) -> None:
            parts.append(_I32.pack(len(chunk)))
            parts.append(chunk)

        wrapper = self.topic_config_serialize_wrapper
        put(wrapper.data_version.encode())
        parts.append(_I32.pack(len(wrapper.topic_config_table)))
        for tc in wrapper.topic_config_table.values():
            put(tc.encode().encode("utf-8"))
        put(fastjson.dumpb(list(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def from_json(cls, obj: Any) -> RegisterBrokerBody:
        """The plain form; a bare TopicConfigSerializeWrapper (version < 37) is accepted too.

        Raises: BodyFormatError.
        """
        obj = as_object(obj, "registerBrokerBody")
        if "topicConfigSerializeWrapper" not in obj and ("topicConfigTable" in obj or "dataVersion" in obj):
            return cls(TopicConfigSerializeWrapper.from_json(obj), [])
        raw_wrapper = obj.get("topicConfigSerializeWrapper")
        wrapper = (
            TopicConfigSerializeWrapper()
            if raw_wrapper is None
            else TopicConfigSerializeWrapper.from_json(raw_wrapper)
        )
        return cls(wrapper, [str(s) for s in get_list(obj, "filterServerList")])

    @classmethod
    def decode(
        cls, data: bytes, *, compressed: bool = False, max_inflated: int = MAX_INFLATED_REGISTER_BODY
    ) -> RegisterBrokerBody:
        """Decode the plain JSON form or the zlib form (``compressedRegister``).

        Raises: BodyFormatError (bad zlib, truncated, oversized, malformed parts).
        """
        if not compressed:
            return cls.from_json(decode_object(data, "registerBrokerBody"))
        reader = _Reader(_inflate(bytes(data), max_inflated))
        version = DataVersion.decode(reader.chunk("dataVersion"))
        count = reader.int32("topicCount")
        if count < 0 or count > MAX_REGISTER_TOPICS:
            raise BodyFormatError(f"absurd topic count {count}", field="topicCount")
        table: dict[str, TopicConfig] = {}
        for _ in range(count):
            raw = reader.chunk("topicConfig")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise BodyFormatError("topic config is not UTF-8", field="topicConfig") from None
            tc = TopicConfig.decode(text)
            table[tc.topic_name] = tc
        servers_raw = fastjson.loads(reader.chunk("filterServerList")) if reader.pos < len(reader.buf) else []
        if not isinstance(servers_raw, list):
            raise BodyFormatError("expected an array", field="filterServerList")
        return cls(TopicConfigSerializeWrapper(table, version), [str(s) for s in servers_raw])


@dataclass(slots=True)
class RegisterBrokerResult:
    """What REGISTER_BROKER answers: header ``haServerAddr``/``masterAddr`` (slaves only), body KVTable."""

    ha_server_addr: str | None = None
    master_addr: str | None = None
    kv_table: KVTable | None = None


def order_topic_conf_queues(conf: str) -> list[tuple[str, int]]:
    """Parse ``"brokerA:4;brokerB:4"`` into ``[("brokerA", 4), ...]``, skipping malformed parts."""
    out: list[tuple[str, int]] = []
    for part in conf.split(";"):
        name, sep, nums = part.partition(":")
        if sep and name and nums.strip().isdigit():
            out.append((name, int(nums)))
    return out
