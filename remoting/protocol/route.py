"""Route data and broker registration bodies: the JSON shapes of reference §3.1-3.4.

========================  ======================================================================
body                      JSON (fastjson: keys alphabetical, nulls omitted)
========================  ======================================================================
QueueData                 ``{"brokerName","perm","readQueueNums","topicSysFlag","writeQueueNums"}``
BrokerData                ``{"brokerAddrs":{0:"ip:port",1:...},"brokerName","cluster"}``
TopicRouteData (105)      ``{"brokerDatas":[..],"filterServerTable":{addr:[..]},"orderTopicConf"?,
                          "queueDatas":[..]}``
ClusterInfo (106)         ``{"brokerAddrTable":{name:BrokerData},"clusterAddrTable":{cluster:[names]}}``
TopicList                 ``{"brokerAddr"?,"topicList":[..]}``;  KVTable ``{"table":{k:v}}``
TopicConfig               ``{"order","perm","readQueueNums","topicFilterType","topicName",
                          "topicSysFlag","writeQueueNums"}``; text form ``"name r w perm TYPE"``
DataVersion               ``{"counter":n,"timestamp":ms}``
TopicConfigSerializeWr.   ``{"dataVersion":{..},"topicConfigTable":{topic:TopicConfig}}``
RegisterBrokerBody (103)  ``{"filterServerList":[..],"topicConfigSerializeWrapper":{..}}``
========================  ======================================================================

Key forms (§3.0): ``brokerAddrs`` keys are written quoted (``{"0":..}``) unless
``standard_json=False`` asks for fastjson's bare-integer form, which pre-4.9.4 namesrvs send to
clients whose request version is < 401 (:func:`wants_standard_json`). Decoders accept both, and
also ``topicSynFlag`` (the 4.x-before-4.9 spelling of ``topicSysFlag``), numbers given as
strings and missing optional fields.

Compressed RegisterBrokerBody (``compressed=true``), a zlib stream of big-endian int32s::

    len | DataVersion JSON | topicCount | (len | "name r w perm TYPE") * topicCount | len | filterServerList JSON

(the text form drops topicSysFlag and order, as Java's does).
"""

from __future__ import annotations

import enum
import re
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

# --------------------------------------------------------------------------------------------
# constants (PermName, TopicSysFlag, TopicFilterType, MixAll, TopicValidator)


class PermName:
    """Topic/queue permission bits (``PermName.java``)."""

    PERM_PRIORITY = 0x8
    PERM_READ = 0x4
    PERM_WRITE = 0x2
    PERM_INHERIT = 0x1
    DEFAULT = PERM_READ | PERM_WRITE

    @staticmethod
    def is_readable(perm: int) -> bool:
        return bool(perm & PermName.PERM_READ)

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return bool(perm & PermName.PERM_WRITE)

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return bool(perm & PermName.PERM_INHERIT)

    @staticmethod
    def is_priority(perm: int) -> bool:
        return bool(perm & PermName.PERM_PRIORITY)

    @staticmethod
    def perm_to_string(perm: int) -> str:
        """``"RWX"``-style text (``X`` = inherit), as mqadmin prints it."""
        return (
            ("R" if perm & PermName.PERM_READ else "-")
            + ("W" if perm & PermName.PERM_WRITE else "-")
            + ("X" if perm & PermName.PERM_INHERIT else "-")
        )


class TopicSysFlag:
    """``topicSysFlag`` bits (``TopicSysFlag.java``)."""

    FLAG_UNIT = 0x1
    FLAG_UNIT_SUB = 0x2

    @staticmethod
    def build(unit: bool, has_unit_sub: bool) -> int:
        return (TopicSysFlag.FLAG_UNIT if unit else 0) | (TopicSysFlag.FLAG_UNIT_SUB if has_unit_sub else 0)

    @staticmethod
    def has_unit_flag(sys_flag: int) -> bool:
        return bool(sys_flag & TopicSysFlag.FLAG_UNIT)

    @staticmethod
    def has_unit_sub_flag(sys_flag: int) -> bool:
        return bool(sys_flag & TopicSysFlag.FLAG_UNIT_SUB)


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


MASTER_ID = 0
DEFAULT_CLUSTER = "DefaultCluster"
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
DEFAULT_TOPIC = AUTO_CREATE_TOPIC_KEY_TOPIC
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
LMQ_PREFIX = "%LMQ%"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RMQ_SYS_SCHEDULE_TOPIC = SCHEDULE_TOPIC_XXXX = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_SCHEDULE_TOPIC_V2 = "SCHEDULE_TOPIC_XXXX_V2"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
SCHEDULE_CONSUMER_GROUP = "SCHEDULE_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
MONITOR_CONSUMER_GROUP = "__MONITOR_CONSUMER"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"
#: KV namespace holding ``topic → "brokerA:4;brokerB:4"`` (``NamesrvUtil``).
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC_V2,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC_V2,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def reply_topic(cluster: str) -> str:
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    return topic in NOT_ALLOWED_SEND_TOPICS


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


def is_topic_or_group_illegal(name: str) -> bool:
    """Any character outside ``[%|a-zA-Z0-9_-]`` (``TopicValidator.isTopicOrGroupIllegal``)."""
    return _VALID_NAME.fullmatch(name) is None


def topic_error(topic: str | None) -> str | None:
    """The Java broker's remark for an invalid topic name, or ``None`` when it is valid."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def group_error(group: str | None) -> str | None:
    """The Java remark for an invalid consumer/producer group name, or ``None``."""
    if group is None or not group.strip():
        return "the specified group is blank"
    if len(group) > GROUP_MAX_LENGTH:
        return "the specified group is longer than group max length 255."
    if is_topic_or_group_illegal(group):
        return f"the specified group[{group}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


def wants_standard_json(request_version: int, accept_standard_json_only: bool | None = None) -> bool:
    """Whether GET_ROUTEINFO_BY_TOPIC must answer with quoted keys (version >= V4_9_4 = 401)."""
    return request_version >= 401 or bool(accept_standard_json_only)


# --------------------------------------------------------------------------------------------
# route data

_MAX_INT32 = 2**31 - 1
_MAX_INT64 = 2**63 - 1


def _int32(obj: Mapping[str, Any], key: str, default: int, **kw: Any) -> int:
    value: int = get_int(obj, key, default, min_value=-(2**31), max_value=_MAX_INT32, **kw)
    return value


def _queue_nums(obj: Mapping[str, Any], key: str, default: int) -> int:
    value: int = get_int(obj, key, default, min_value=0, max_value=_MAX_INT32)
    return value


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PermName.DEFAULT
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, obj: Any) -> QueueData:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "queueData")
        return cls(
            broker_name=get_str(obj, "brokerName"),
            read_queue_nums=_queue_nums(obj, "readQueueNums", 0),
            write_queue_nums=_queue_nums(obj, "writeQueueNums", 0),
            perm=_int32(obj, "perm", PermName.DEFAULT),
            topic_sys_flag=_int32(obj, "topicSysFlag", 0, aliases=("topicSynFlag",)),
        )


def _broker_addrs(raw: Mapping[Any, Any]) -> dict[int, str]:
    addrs: dict[int, str] = {}
    for key, addr in raw.items():
        try:
            broker_id = int(key)
        except (TypeError, ValueError):
            raise BodyFormatError(f"broker id {key!r:.20} is not an integer", field="brokerAddrs") from None
        if not isinstance(addr, str):
            raise BodyFormatError(f"address of broker {broker_id} is not a string", field="brokerAddrs")
        addrs[broker_id] = addr
    return addrs


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_broker_addr(self) -> str | None:
        """The master's address, else the lowest-id slave's (deterministic, unlike Java's random)."""
        if MASTER_ID in self.broker_addrs:
            return self.broker_addrs[MASTER_ID]
        return self.broker_addrs[min(self.broker_addrs)] if self.broker_addrs else None

    def copy(self) -> BrokerData:
        return BrokerData(self.cluster, self.broker_name, dict(self.broker_addrs))

    def to_json(self) -> dict[str, Any]:
        """Integer ``brokerAddrs`` keys; the writer quotes them or not (``quote_int_keys``)."""
        return {
            "brokerAddrs": dict(self.broker_addrs),
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json(cls, obj: Any) -> BrokerData:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "brokerData")
        return cls(
            cluster=get_str(obj, "cluster", ""),
            broker_name=get_str(obj, "brokerName"),
            broker_addrs=_broker_addrs(get_dict(obj, "brokerAddrs")),
        )


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "brokerDatas": [b.to_json() for b in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
        }
        if self.order_topic_conf is not None:
            out["orderTopicConf"] = self.order_topic_conf
        out["queueDatas"] = [q.to_json() for q in self.queue_datas]
        return out

    def encode(self, *, standard_json: bool = True) -> bytes:
        return fastjson.dumpb(self.to_json(), quote_int_keys=standard_json)

    @classmethod
    def from_json(cls, obj: Any) -> TopicRouteData:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "topicRouteData")
        fst: dict[str, list[str]] = {}
        for addr, servers in get_dict(obj, "filterServerTable").items():
            fst[str(addr)] = [str(s) for s in (servers or [])]
        return cls(
            queue_datas=[QueueData.from_json(q) for q in get_list(obj, "queueDatas")],
            broker_datas=[BrokerData.from_json(b) for b in get_list(obj, "brokerDatas")],
            filter_server_table=fst,
            order_topic_conf=get_str(obj, "orderTopicConf", None),
        )

    @classmethod
    def decode(cls, data: bytes | str) -> TopicRouteData:
        """Raises: BodyFormatError."""
        return cls.from_json(decode_object(data, "topicRouteData"))


@dataclass(slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {name: bd.to_json() for name, bd in self.broker_addr_table.items()},
            "clusterAddrTable": {c: sorted(names) for c, names in self.cluster_addr_table.items()},
        }

    def encode(self, *, standard_json: bool = True) -> bytes:
        return fastjson.dumpb(self.to_json(), quote_int_keys=standard_json)

    @classmethod
    def from_json(cls, obj: Any) -> ClusterInfo:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "clusterInfo")
        brokers = {str(k): BrokerData.from_json(v) for k, v in get_dict(obj, "brokerAddrTable").items()}
        clusters: dict[str, list[str]] = {}
        for cluster, names in get_dict(obj, "clusterAddrTable").items():
            if not isinstance(names, list):
                raise BodyFormatError("broker names must be an array", field="clusterAddrTable")
            clusters[str(cluster)] = [str(n) for n in names]
        return cls(brokers, clusters)

    @classmethod
    def decode(cls, data: bytes | str) -> ClusterInfo:
        """Raises: BodyFormatError."""
        return cls.from_json(decode_object(data, "clusterInfo"))


@dataclass(slots=True)
class TopicList:
    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.broker_addr is not None:
            out["brokerAddr"] = self.broker_addr
        out["topicList"] = list(dict.fromkeys(self.topic_list))
        return out

    def encode(self) -> bytes:
        return fastjson.dumpb(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> TopicList:
        """Raises: BodyFormatError."""
        obj = as_object(obj, "topicList")
        return cls([str(t) for t in get_list(obj, "topicList")], get_str(obj, "brokerAddr", None))

    @classmethod
    def decode(cls, data: bytes | str) -> TopicList:
        """Raises: BodyFormatError."""
        return cls.from_json(decode_object(data, "topicList"))


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


# --------------------------------------------------------------------------------------------
# topic configs and registration


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
            read_queue_nums=_queue_nums(obj, "readQueueNums", 16),
            write_queue_nums=_queue_nums(obj, "writeQueueNums", 16),
            perm=_int32(obj, "perm", PermName.DEFAULT),
            topic_filter_type=get_enum(obj, "topicFilterType", TopicFilterType, TopicFilterType.SINGLE_TAG),
            topic_sys_flag=_int32(obj, "topicSysFlag", 0),
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
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise BodyFormatError(f"not a zlib stream ({exc})", field="registerBrokerBody") from None
    if len(out) > limit:
        raise BodyFormatError(f"inflates beyond {limit} bytes", field="registerBrokerBody")
    if not inflater.eof:
        raise BodyFormatError("truncated zlib stream", field="registerBrokerBody")
    return out


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
        """Decode the plain JSON form or the zlib form of reference §3.4.

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
