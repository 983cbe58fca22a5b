"""``RouteInfoManager``: the name server's route tables. Pure: no I/O, no asyncio, no locks.

Tables (RocketMQ 4.9 names; all owned by the event-loop thread, mutated without ``await``):

=====================  ===================================================================
table                  content
=====================  ===================================================================
topic_queue_table      topic → brokerName → QueueData (built from masters' registrations)
broker_addr_table      brokerName → BrokerData(cluster, brokerId → address)
cluster_addr_table     cluster → brokerNames
broker_live_table      brokerAddr → BrokerLiveInfo(last update, DataVersion, channel, HA address)
filter_server_table    brokerAddr → filter server addresses
=====================  ===================================================================

Rules:

1. REGISTER_BROKER is validated completely before any table changes; a bad request raises
   :class:`RegistrationError` (with a remark) and leaves every table as it was.
2. An address re-registering under another id (slave promoted to master) first loses its old id.
3. QueueData is rebuilt from a **master's** registration when its DataVersion differs from the
   stored one or the address is new; slaves only add their address and liveness.
4. A slave's registration result carries the live master's address and HA address.
5. Removing an address (unregister, closed channel, expiry) cleans every table: when the last
   address of a broker name goes, so do the name, its QueueData in every topic, topics left
   without QueueData, and clusters left without broker names. A group whose master is gone keeps
   its slaves and its QueueData (consumers can still read from slaves).
6. Liveness uses the injected clock's monotonic milliseconds: a broker whose last
   REGISTER_BROKER/QUERY_DATA_VERSION is more than ``broker_channel_expired_time`` ago is
   dropped by :meth:`RouteInfoManager.scan_not_active_brokers` (at exactly the limit it stays).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.remoting.common.clock import SYSTEM_CLOCK, Clock
from pocketmq.remoting.protocol.route import (
    MASTER_ID,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    BrokerData,
    ClusterInfo,
    DataVersion,
    KVTable,
    PermName,
    QueueData,
    RegisterBrokerResult,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    TopicSysFlag,
)

__all__ = [
    "MAX_FILTER_SERVERS",
    "MAX_NAME_LENGTH",
    "MAX_QUEUE_NUMS",
    "MAX_TOPICS_PER_BROKER",
    "BrokerLiveInfo",
    "KvLookup",
    "RegistrationError",
    "RemovedBroker",
    "RouteInfoManager",
]

#: Bounds that no real broker comes near; anything beyond is refused as garbage.
MAX_NAME_LENGTH = 255
MAX_TOPIC_NAME_LENGTH = 1024
MAX_TOPICS_PER_BROKER = 1_000_000
MAX_QUEUE_NUMS = 65_536
MAX_FILTER_SERVERS = 1024
_MAX_BROKER_ID = 2**63 - 1


class RegistrationError(ValueError):
    """A REGISTER_BROKER (or UNREGISTER_BROKER) request the tables refuse; ``remark`` is for the reply."""

    def __init__(self, remark: str) -> None:
        super().__init__(remark)
        self.remark = remark


class KvLookup(Protocol):
    """What the route tables need from the KV config (``KVConfigManager`` implements it)."""

    def get_kv_config(self, namespace: str, key: str) -> str | None: ...

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str] | None: ...


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int  # the clock's monotonic milliseconds
    data_version: DataVersion
    channel: object | None
    ha_server_addr: str | None


@dataclass(frozen=True, slots=True)
class RemovedBroker:
    """An address dropped from the tables; ``channel`` is what the caller should close."""

    broker_addr: str
    channel: object | None
    broker_name: str | None
    broker_id: int | None
    #: The last address of ``broker_name`` went, so the name and its queue data are gone too.
    broker_name_removed: bool


def _check_name(field: str, value: object, *, required: bool = True) -> None:
    if value is None or value == "":
        if required:
            raise RegistrationError(f"{field} is missing")
        return
    if not isinstance(value, str):
        raise RegistrationError(f"{field} must be a string")
    if not value.strip() or len(value) > MAX_NAME_LENGTH:
        raise RegistrationError(
            f"{field} {value[:40]!r} is blank or longer than {MAX_NAME_LENGTH} characters"
        )


def _check_addr(field: str, addr: object) -> None:
    _check_name(field, addr)
    assert isinstance(addr, str)
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise RegistrationError(f"{field} {addr!r} is not host:port")


def _check_topic(tc: TopicConfig) -> None:
    name = tc.topic_name
    if not name or len(name) > MAX_TOPIC_NAME_LENGTH:
        raise RegistrationError(f"topic name {name[:40]!r} is empty or longer than {MAX_TOPIC_NAME_LENGTH}")
    for what, n in (("readQueueNums", tc.read_queue_nums), ("writeQueueNums", tc.write_queue_nums)):
        if not 0 <= n <= MAX_QUEUE_NUMS:
            raise RegistrationError(f"topic {name}: {what} {n} is outside [0, {MAX_QUEUE_NUMS}]")
    if tc.perm < 0 or tc.topic_sys_flag < 0:
        raise RegistrationError(f"topic {name}: negative perm or topicSysFlag")


def _check_identity(
    cluster_name: str, broker_addr: str, broker_name: str, broker_id: int, ha_server_addr: str | None
) -> None:
    """Who registers: names present and legal, a host:port address, a broker id in range."""
    _check_name("clusterName", cluster_name)
    _check_name("brokerName", broker_name)
    _check_addr("brokerAddr", broker_addr)
    _check_name("haServerAddr", ha_server_addr, required=False)
    if not isinstance(broker_id, int) or isinstance(broker_id, bool):
        raise RegistrationError("brokerId must be an integer")
    if broker_id < 0 or broker_id > _MAX_BROKER_ID:
        raise RegistrationError(f"brokerId {broker_id} is negative or too large")


def _check_payload(wrapper: TopicConfigSerializeWrapper | None, filter_server_list: list[str] | None) -> None:
    """What it registers: bounded filter-server and topic counts, each topic config legal."""
    if filter_server_list is not None and len(filter_server_list) > MAX_FILTER_SERVERS:
        raise RegistrationError(f"{len(filter_server_list)} filter servers (limit {MAX_FILTER_SERVERS})")
    if wrapper is not None:
        if len(wrapper.topic_config_table) > MAX_TOPICS_PER_BROKER:
            raise RegistrationError(
                f"{len(wrapper.topic_config_table)} topics in one registration (limit {MAX_TOPICS_PER_BROKER})"
            )
        for tc in wrapper.topic_config_table.values():
            _check_topic(tc)


class RouteInfoManager:
    """The five route tables and every operation of the name server's route requests.

    Args:
        config: ``order_message_enable``, ``return_order_topic_config_to_broker``,
            ``broker_channel_expired_time`` and ``delete_topic_with_broker_registration`` are used.
        clock: liveness time source (monotonic milliseconds).
        kv: KV lookups for ``orderTopicConf`` and the registration reply's KV table.
    """

    def __init__(
        self, config: NamesrvConfig | None = None, *, clock: Clock = SYSTEM_CLOCK, kv: KvLookup | None = None
    ) -> None:
        self.config = config or NamesrvConfig()
        self.clock = clock
        self.kv = kv
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    @property
    def broker_channel_expired_ms(self) -> int:
        return self.config.broker_channel_expired_time

    # -- registration ------------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str | None,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_server_list: list[str] | None = None,
        channel: object | None = None,
    ) -> RegisterBrokerResult:
        """Record a broker's registration (REGISTER_BROKER).

        Raises:
            RegistrationError: missing/blank names, a bad address, a negative broker id or absurd
                sizes; no table is changed.
        """
        _check_identity(cluster_name, broker_addr, broker_name, broker_id, ha_server_addr)
        _check_payload(topic_config_wrapper, filter_server_list)
        self._move_cluster(broker_name, cluster_name)
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)

        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.broker_addrs
        # The same address must hold only one id: a promoted slave drops its old id first.
        for old_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[old_id]
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None

        data_version = (
            topic_config_wrapper.data_version if topic_config_wrapper is not None else DataVersion()
        )
        changed = register_first or self.is_broker_topic_config_changed(broker_addr, data_version)
        if topic_config_wrapper is not None and broker_id == MASTER_ID and changed:
            self._update_queue_datas(broker_name, topic_config_wrapper.topic_config_table.values())

        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self.clock.monotonic_ms(), data_version, channel, ha_server_addr or None
        )
        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[broker_addr] = list(filter_server_list)
            else:
                self.filter_server_table.pop(broker_addr, None)

        result = RegisterBrokerResult()
        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            master_live = self.broker_live_table.get(master_addr) if master_addr else None
            if master_addr is not None and master_live is not None:
                result.master_addr = master_addr
                result.ha_server_addr = master_live.ha_server_addr
        if self.kv is not None and self.config.return_order_topic_config_to_broker:
            table = self.kv.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
            if table is not None:
                result.kv_table = KVTable(table)
        return result

    def _move_cluster(self, broker_name: str, cluster_name: str) -> None:
        """A broker name re-registering under another cluster leaves the old one."""
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None or broker_data.cluster == cluster_name:
            return
        self._remove_from_cluster(broker_name, broker_data.cluster)
        broker_data.cluster = cluster_name

    def _update_queue_datas(self, broker_name: str, topic_configs: Iterable[TopicConfig]) -> None:
        registered: set[str] = set()
        for tc in topic_configs:
            registered.add(tc.topic_name)
            qd = QueueData(broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)
            self.topic_queue_table.setdefault(tc.topic_name, {})[broker_name] = qd
        if self.config.delete_topic_with_broker_registration:
            for topic in [
                t for t, qds in self.topic_queue_table.items() if broker_name in qds and t not in registered
            ]:
                self._remove_queue_data(topic, broker_name)

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        prev = self.query_broker_topic_config(broker_addr)
        return prev is None or prev != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return None if live is None else live.data_version

    def update_broker_info_update_timestamp(self, broker_addr: str) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = self.clock.monotonic_ms()

    def query_data_version(
        self, broker_addr: str, data_version: DataVersion
    ) -> tuple[bool, DataVersion | None]:
        """QUERY_DATA_VERSION: ``(changed, stored version)``; an unchanged broker counts as alive."""
        changed = self.is_broker_topic_config_changed(broker_addr, data_version)
        if not changed:
            self.update_broker_info_update_timestamp(broker_addr)
        return changed, self.query_broker_topic_config(broker_addr)

    # -- removal -----------------------------------------------------------------------------

    def unregister_broker(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> RemovedBroker | None:
        """UNREGISTER_BROKER; ``None`` when the broker was not registered under that id and address."""
        live = self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        broker_data = self.broker_addr_table.get(broker_name)
        # Only the registration of *this* address goes (Java removes by id alone, which lets a
        # late unregister of a replaced master remove its successor).
        if broker_data is None or broker_data.broker_addrs.get(broker_id) != broker_addr:
            if live is None:
                return None
            return RemovedBroker(broker_addr, live.channel, None, None, False)
        del broker_data.broker_addrs[broker_id]
        name_removed = self._drop_broker_name_if_empty(broker_data, cluster_name)
        return RemovedBroker(
            broker_addr, live.channel if live else None, broker_name, broker_id, name_removed
        )

    def on_channel_destroy(
        self, remote_addr: str | None, channel: object | None = None
    ) -> RemovedBroker | None:
        """A connection closed: drop the broker registered over ``channel`` (else at ``remote_addr``)."""
        broker_addr = None
        if channel is not None:
            broker_addr = next(
                (a for a, info in self.broker_live_table.items() if info.channel is channel), None
            )
        if broker_addr is None:
            broker_addr = remote_addr
        if not broker_addr:
            return None
        return self._remove_addr(broker_addr)

    def scan_not_active_brokers(self, now_ms: int | None = None) -> list[RemovedBroker]:
        """Drop every broker silent for more than ``broker_channel_expired_time`` ms.

        ``now_ms`` is the clock's monotonic milliseconds (default: now). Returns what was removed;
        the caller closes the channels.
        """
        now = self.clock.monotonic_ms() if now_ms is None else now_ms
        limit = self.broker_channel_expired_ms
        expired = [addr for addr, info in self.broker_live_table.items() if info.last_update_ms + limit < now]
        removed = []
        for addr in expired:
            result = self._remove_addr(addr)
            if result is not None:
                removed.append(result)
        return removed

    def _remove_addr(self, broker_addr: str) -> RemovedBroker | None:
        live = self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for broker_data in self.broker_addr_table.values():
            broker_id = next((i for i, a in broker_data.broker_addrs.items() if a == broker_addr), None)
            if broker_id is None:
                continue
            del broker_data.broker_addrs[broker_id]
            name_removed = self._drop_broker_name_if_empty(broker_data, broker_data.cluster)
            return RemovedBroker(
                broker_addr, live.channel if live else None, broker_data.broker_name, broker_id, name_removed
            )
        if live is None:
            return None
        return RemovedBroker(broker_addr, live.channel, None, None, False)

    def _drop_broker_name_if_empty(self, broker_data: BrokerData, cluster_name: str) -> bool:
        if broker_data.broker_addrs:
            return False
        name = broker_data.broker_name
        del self.broker_addr_table[name]
        for cluster in {cluster_name, broker_data.cluster}:
            self._remove_from_cluster(name, cluster)
        for topic in [t for t, qds in self.topic_queue_table.items() if name in qds]:
            self._remove_queue_data(topic, name)
        return True

    def _remove_from_cluster(self, broker_name: str, cluster_name: str) -> None:
        names = self.cluster_addr_table.get(cluster_name)
        if names is None:
            return
        names.discard(broker_name)
        if not names:
            del self.cluster_addr_table[cluster_name]

    def _remove_queue_data(self, topic: str, broker_name: str) -> None:
        qds = self.topic_queue_table.get(topic)
        if qds is None:
            return
        qds.pop(broker_name, None)
        if not qds:
            del self.topic_queue_table[topic]

    # -- topics ------------------------------------------------------------------------------

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> bool:
        """DELETE_TOPIC_IN_NAMESRV: everywhere, or only on the brokers of ``cluster_name``."""
        if topic not in self.topic_queue_table:
            return False
        if not cluster_name:
            del self.topic_queue_table[topic]
            return True
        names = self.cluster_addr_table.get(cluster_name, set())
        qds = self.topic_queue_table[topic]
        hit = [n for n in names if n in qds]
        for name in hit:
            self._remove_queue_data(topic, name)
        return bool(hit)

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Clear PERM_WRITE on every QueueData of ``broker_name``; the number of topics touched."""
        return self._set_perm(broker_name, lambda perm: perm & ~PermName.PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """Set perm to READ|WRITE on every QueueData of ``broker_name`` (as Java does)."""
        return self._set_perm(broker_name, lambda perm: PermName.PERM_READ | PermName.PERM_WRITE)

    def _set_perm(self, broker_name: str, change: Callable[[int], int]) -> int:
        count = 0
        for qds in self.topic_queue_table.values():
            qd = qds.get(broker_name)
            if qd is not None:
                qds[broker_name] = replace(qd, perm=change(qd.perm))
                count += 1
        return count

    # -- queries -----------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC; ``None`` (→ TOPIC_NOT_EXIST) without queue or broker data."""
        qds = self.topic_queue_table.get(topic)
        if not qds:
            return None
        broker_datas = [self.broker_addr_table[n].copy() for n in sorted(qds) if n in self.broker_addr_table]
        if not broker_datas:
            return None
        filter_servers: dict[str, list[str]] = {}
        if self.filter_server_table:
            for bd in broker_datas:
                for addr in bd.broker_addrs.values():
                    servers = self.filter_server_table.get(addr)
                    if servers is not None:
                        filter_servers[addr] = list(servers)
        route = TopicRouteData([qds[n] for n in sorted(qds)], broker_datas, filter_servers)
        if self.config.order_message_enable and self.kv is not None:
            route.order_topic_conf = self.kv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        return route

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {name: bd.copy() for name, bd in sorted(self.broker_addr_table.items())},
            {cluster: sorted(names) for cluster, names in sorted(self.cluster_addr_table.items())},
        )

    def get_all_topic_list(self) -> TopicList:
        return TopicList(sorted(self.topic_queue_table))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        names = self.cluster_addr_table.get(cluster, set())
        return TopicList(sorted(t for t, qds in self.topic_queue_table.items() if not names.isdisjoint(qds)))

    def get_system_topic_list(self) -> TopicList:
        """Cluster names and broker names (each is a topic on its brokers), plus one broker address."""
        topics: list[str] = []
        for cluster, names in sorted(self.cluster_addr_table.items()):
            topics.append(cluster)
            topics.extend(sorted(names))
        broker_addr = next(
            (bd.first_addr() for _, bd in sorted(self.broker_addr_table.items()) if bd.broker_addrs),
            None,
        )
        return TopicList(topics, broker_addr)

    def _topics_where(self, predicate: Callable[[QueueData], bool]) -> TopicList:
        # Java looks at one (the first) QueueData of each topic.
        return TopicList(
            sorted(t for t, qds in self.topic_queue_table.items() if predicate(next(iter(qds.values()))))
        )

    def get_unit_topics(self) -> TopicList:
        return self._topics_where(lambda qd: TopicSysFlag.has_unit_flag(qd.topic_sys_flag))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_where(lambda qd: TopicSysFlag.has_unit_sub_flag(qd.topic_sys_flag))

    def get_has_unit_sub_un_unit_topic_list(self) -> TopicList:
        return self._topics_where(
            lambda qd: (
                not TopicSysFlag.has_unit_flag(qd.topic_sys_flag)
                and TopicSysFlag.has_unit_sub_flag(qd.topic_sys_flag)
            )
        )

    def live_broker_addrs(self) -> list[str]:
        return sorted(self.broker_live_table)
