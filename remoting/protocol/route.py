"""Route data and broker registration bodies: the JSON shapes of RocketMQ's Java classes.

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

Key forms: ``brokerAddrs`` keys are written quoted (``{"0":..}``) unless
``standard_json=False`` asks for fastjson's bare-integer form, which pre-4.9.4 namesrvs send to
clients whose request version is < 401 (:func:`wants_standard_json`). Decoders accept both, and
also ``topicSynFlag`` (the 4.x-before-4.9 spelling of ``topicSysFlag``), numbers given as
strings and missing optional fields.

Compressed RegisterBrokerBody (``compressed=true``), a zlib stream of big-endian int32s::

    len | DataVersion JSON | topicCount | (len | "name r w perm TYPE") * topicCount | len | filterServerList JSON

(the text form drops topicSysFlag and order, as Java's does).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.fastjson import (
    BodyFormatError,
    as_object,
    decode_object,
    get_dict,
    get_list,
    get_str,
)

# topic configs and registration bodies live in registration.py; re-exported here
from pocketmq.remoting.protocol.registration import *  # noqa: F403
from pocketmq.remoting.protocol.registration import int32_field, queue_nums_field

# the topic/group constants and validators live in topics.py; re-exported here
from pocketmq.remoting.protocol.topics import *  # noqa: F403
from pocketmq.remoting.protocol.topics import (
    MASTER_ID,
    PermName,
)

# --------------------------------------------------------------------------------------------
# route data


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
            read_queue_nums=queue_nums_field(obj, "readQueueNums", 0),
            write_queue_nums=queue_nums_field(obj, "writeQueueNums", 0),
            perm=int32_field(obj, "perm", PermName.DEFAULT),
            topic_sys_flag=int32_field(obj, "topicSysFlag", 0, aliases=("topicSynFlag",)),
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
        """The address to talk to when any broker of the group will do: the one slave-selection rule.

        RocketMQ's ``BrokerData.selectBrokerAddr``: the master (id 0) when it is registered,
        otherwise one of the other (slave) addresses picked at random, so clients spread their
        reads over the slaves while the master is down. ``None`` when the group has no address.
        Callers that need the same answer every time use :meth:`first_addr` instead.
        """
        addrs = self.broker_addrs
        addr = addrs.get(MASTER_ID)
        if addr is None and addrs:
            return random.choice(list(addrs.values()))
        return addr

    def first_addr(self) -> str | None:
        """The lowest-id address (the master when present): a deterministic pick."""
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

    def route_key(self) -> tuple[Any, ...]:
        """A comparable snapshot that ignores list order: routes with equal keys need no table update."""
        return (
            sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in self.queue_datas),
            sorted((b.broker_name, sorted(b.broker_addrs.items())) for b in self.broker_datas),
            self.order_topic_conf,
        )


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
