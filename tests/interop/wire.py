"""Minimal, self-contained RocketMQ frame codec for the interop capture tooling.

This is test tooling only: it never imports pocketmq (the code under test), so golden frames
captured with it do not depend on our own codec being right.

Frame, all big-endian:

| Offset | Size | Field                                                     |
|--------|------|-----------------------------------------------------------|
| 0      | 4    | length = 4 + headerLength + bodyLength                    |
| 4      | 4    | serializeType (top byte) << 24 | headerLength (24 bits)   |
| 8      | H    | header (JSON text for serialize type 0)                   |
| 8 + H  | B    | body                                                      |

Stored message record written into pull replies:

| Offset | Size | Field                 | Offset | Size | Field                        |
|--------|------|-----------------------|--------|------|------------------------------|
| 0      | 4    | TOTALSIZE             | 48     | 8    | BORNHOST (ip4 + int32 port)  |
| 4      | 4    | MAGICCODE 0xDAA320A7  | 56     | 8    | STORETIMESTAMP               |
| 8      | 4    | BODYCRC               | 64     | 8    | STOREHOST (ip4 + int32 port) |
| 12     | 4    | QUEUEID               | 72     | 4    | RECONSUMETIMES               |
| 16     | 4    | FLAG                  | 76     | 8    | PREPARED_TRANSACTION_OFFSET  |
| 20     | 8    | QUEUEOFFSET           | 84     | 4    | BODYLENGTH, then BODY        |
| 28     | 8    | PHYSICALOFFSET        |        | 1    | TOPICLENGTH, then TOPIC      |
| 36     | 4    | SYSFLAG               |        | 2    | PROPERTIESLENGTH, then PROPS |
| 40     | 8    | BORNTIMESTAMP         |        |      |                              |

Batch body inner record: TOTALSIZE(4) MAGIC(4) BODYCRC(4) FLAG(4) BODYLEN(4) BODY
PROPSLEN(2) PROPS.
"""

from __future__ import annotations

import json
import socket
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

FRAME_PREFIX = struct.Struct(">ii")
MAX_FRAME = 16 * 1024 * 1024
MESSAGE_MAGIC = -626843481  # 0xDAA320A7 as a signed int32
_MSG_FIXED = struct.Struct(">iiiiiqqiq4siq4siiqi")  # up to and including BODYLENGTH
_BATCH_FIXED = struct.Struct(">iiiii")
NAME_VALUE_SEP = "\x01"
PROPERTY_SEP = "\x02"

REQUEST_NAMES: dict[int, str] = {
    10: "SEND_MESSAGE",
    11: "PULL_MESSAGE",
    12: "QUERY_MESSAGE",
    14: "QUERY_CONSUMER_OFFSET",
    15: "UPDATE_CONSUMER_OFFSET",
    17: "UPDATE_AND_CREATE_TOPIC",
    29: "SEARCH_OFFSET_BY_TIMESTAMP",
    30: "GET_MAX_OFFSET",
    31: "GET_MIN_OFFSET",
    32: "GET_EARLIEST_MSG_STORETIME",
    33: "VIEW_MESSAGE_BY_ID",
    34: "HEART_BEAT",
    35: "UNREGISTER_CLIENT",
    36: "CONSUMER_SEND_MSG_BACK",
    37: "END_TRANSACTION",
    38: "GET_CONSUMER_LIST_BY_GROUP",
    41: "LOCK_BATCH_MQ",
    42: "UNLOCK_BATCH_MQ",
    101: "GET_KV_CONFIG",
    105: "GET_ROUTEINFO_BY_TOPIC",
    106: "GET_BROKER_CLUSTER_INFO",
    217: "GET_KV_CONFIG_BY_VALUE",
    310: "SEND_MESSAGE_V2",
    320: "SEND_BATCH_MESSAGE",
}


def request_name(code: int) -> str:
    return REQUEST_NAMES.get(code, f"CODE_{code}")


@dataclass(slots=True)
class Frame:
    """One decoded frame plus the exact bytes it came from (prefix included)."""

    raw: bytes
    serialize_type: int
    header: dict[str, Any]
    body: bytes

    @property
    def code(self) -> int:
        return int(self.header.get("code", -1))

    @property
    def opaque(self) -> int:
        return int(self.header.get("opaque", 0))

    @property
    def flag(self) -> int:
        return int(self.header.get("flag", 0))

    @property
    def ext(self) -> dict[str, Any]:
        ext = self.header.get("extFields") or {}
        return ext if isinstance(ext, dict) else {}

    def ext_str(self, key: str, default: str = "") -> str:
        """extFields value coerced like fastjson does (C++/ali-ons send numbers and bools)."""
        value = self.ext.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def ext_int(self, key: str, default: int = 0) -> int:
        text = self.ext_str(key)
        return int(text) if text not in ("", None) else default


def decode_frame(raw: bytes) -> Frame:
    """Decode one complete frame (4-byte length prefix included)."""
    length, type_and_len = FRAME_PREFIX.unpack_from(raw, 0)
    if length != len(raw) - 4:
        raise ValueError(f"length word {length} does not match frame size {len(raw) - 4}")
    serialize_type = (type_and_len >> 24) & 0xFF
    header_len = type_and_len & 0xFFFFFF
    header_bytes = raw[8 : 8 + header_len]
    if serialize_type != 0:
        raise ValueError(f"serialize type {serialize_type} is not JSON")
    header = json.loads(header_bytes.decode("utf-8"))
    return Frame(raw, serialize_type, header, raw[8 + header_len :])


def encode_response(
    code: int,
    opaque: int,
    ext: dict[str, Any] | None = None,
    body: bytes = b"",
    remark: str | None = None,
) -> bytes:
    """JSON (type 0) response; every extFields value is a JSON string (C++ reads only strings)."""
    header: dict[str, Any] = {
        "code": code,
        "extFields": {k: _java_str(v) for k, v in (ext or {}).items() if v is not None},
        "flag": 1,
        "language": "JAVA",
        "opaque": opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": 409,
    }
    if remark is not None:
        header["remark"] = remark
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return FRAME_PREFIX.pack(4 + len(header_bytes) + len(body), len(header_bytes)) + header_bytes + body


def _java_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in text.split(PROPERTY_SEP):
        key, sep, value = item.partition(NAME_VALUE_SEP)
        if sep and key:
            props[key] = value
    return props


def format_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}{NAME_VALUE_SEP}{v}{PROPERTY_SEP}" for k, v in props.items())


@dataclass(slots=True)
class BatchItem:
    flag: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)


def decode_batch(body: bytes) -> list[BatchItem]:
    items: list[BatchItem] = []
    pos = 0
    while pos < len(body):
        total, _magic, _crc, flag, body_len = _BATCH_FIXED.unpack_from(body, pos)
        start = pos + _BATCH_FIXED.size
        msg_body = body[start : start + body_len]
        (props_len,) = struct.unpack_from(">h", body, start + body_len)
        props_raw = body[start + body_len + 2 : start + body_len + 2 + props_len]
        items.append(BatchItem(flag, msg_body, parse_properties(props_raw.decode("utf-8"))))
        pos += total
    return items


def _host_bytes(host: str) -> bytes:
    try:
        return socket.inet_aton(host)
    except OSError:
        return socket.inet_aton("127.0.0.1")  # IPv6 peers: C++/ali-ons decoders are IPv4-only


def encode_stored_message(
    *,
    topic: str,
    queue_id: int,
    queue_offset: int,
    physical_offset: int,
    flag: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: tuple[str, int],
    store_timestamp: int,
    store_host: tuple[str, int],
    reconsume_times: int,
    body: bytes,
    properties: dict[str, str],
) -> bytes:
    topic_b = topic.encode("utf-8")
    props_b = format_properties(properties).encode("utf-8")
    total = _MSG_FIXED.size + len(body) + 1 + len(topic_b) + 2 + len(props_b)
    fixed = _MSG_FIXED.pack(
        total,
        MESSAGE_MAGIC,
        zlib.crc32(body) & 0x7FFFFFFF,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag & ~0x30,  # never claim IPv6 hosts
        born_timestamp,
        _host_bytes(born_host[0]),
        born_host[1],
        store_timestamp,
        _host_bytes(store_host[0]),
        store_host[1],
        reconsume_times,
        0,
        len(body),
    )
    return b"".join(
        (fixed, body, struct.pack(">b", len(topic_b)), topic_b, struct.pack(">h", len(props_b)), props_b)
    )


def offset_msg_id(store_host: tuple[str, int], physical_offset: int) -> str:
    return (_host_bytes(store_host[0]) + struct.pack(">iq", store_host[1], physical_offset)).hex().upper()
