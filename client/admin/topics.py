"""Topic, cluster, broker and name-server operations of :class:`~pocketmq.client.admin.MQAdmin`."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

from pocketmq.client.admin.base import AdminBase, MQAdminError
from pocketmq.client.admin.model import BrokerRuntime, QueueStatus, TopicStatus
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.errors import ResponseError
from pocketmq.remoting.protocol.route import (
    MASTER_ID,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    TopicConfig,
    TopicConfigSerializeWrapper,
)

__all__ = ["TopicAdmin"]


class TopicAdmin(AdminBase):
    # ------------------------------------------------------------------------------ topics
    async def topic_list(self) -> list[str]:
        """Every topic the name servers know, sorted."""
        return sorted(await self.api.get_all_topic_list())

    async def topics_by_cluster(self, cluster: str) -> list[str]:
        return sorted(await self.api.get_topics_by_cluster(cluster))

    async def topic_clusters(self, topic: str) -> list[str]:
        """Clusters hosting ``topic``. Raises: TopicRouteNotFoundError."""
        route = await self.topic_route(topic)
        return sorted({bd.cluster for bd in route.broker_datas})

    async def create_topic(
        self, config: TopicConfig, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on one broker or every master of a cluster; returns the addresses.

        For an ordered topic (``config.order``) the name servers' ORDER_TOPIC_CONFIG entry is set to
        ``brokerName:writeQueueNums`` of every broker written, as ``mqadmin updateTopic -o true`` does.

        Raises:
            MQAdminError: no target; ResponseError: a broker refused (bad name, system topic...).
        """
        addrs = await self.targets(broker_addr, cluster)
        for addr in addrs:
            await self.api.create_topic(
                addr,
                config.topic_name,
                read_queue_nums=config.read_queue_nums,
                write_queue_nums=config.write_queue_nums,
                perm=config.perm,
                order=config.order,
                topic_filter_type=config.topic_filter_type.value,
                topic_sys_flag=config.topic_sys_flag,
            )
        if config.order:
            names = []
            for addr in addrs:
                name = await self.broker_name_of(addr)
                if name is not None:
                    names.append(f"{name}:{config.write_queue_nums}")
            if names:
                await self.put_kv_config(
                    NAMESPACE_ORDER_TOPIC_CONFIG, config.topic_name, ";".join(sorted(names))
                )
        return addrs

    async def delete_topic(self, topic: str, cluster: str | None = None) -> tuple[list[str], list[str]]:
        """Delete ``topic`` from every master of its clusters (or of ``cluster``), then from every
        name server. Returns ``(broker addresses, clusters)``.

        Raises:
            TopicRouteNotFoundError: no cluster given and the name servers do not know the topic.
        """
        clusters = [cluster] if cluster else await self.topic_clusters(topic)
        addrs: list[str] = []
        for c in clusters:
            addrs += [a for a in await self.targets(None, c) if a not in addrs]
        await self.gather(self.api.delete_topic_in_broker(a, topic) for a in addrs)
        await self.gather(self.api.delete_topic_in_namesrv(ns, topic, cluster) for ns in self.namesrv_addrs)
        for ns in self.namesrv_addrs:
            # An ordered topic's KV entry goes too; most topics have none (QUERY_NOT_FOUND is fine).
            with contextlib.suppress(ResponseError):
                await self.api.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic, ns)
        return addrs, clusters

    async def topic_status(self, topic: str) -> TopicStatus:
        """Min/max offset and last update time of every queue, from each broker's master.

        Raises: TopicRouteNotFoundError; ResponseError (TOPIC_NOT_EXIST from a broker).
        """
        route = await self.topic_route(topic)
        masters = self.route_masters(route)
        tables = await self.gather(self.api.get_topic_stats_info(addr, topic) for _, addr in masters)
        status = TopicStatus(topic)
        for (name, _addr), table in zip(masters, tables, strict=True):
            for key, value in fastjson.get_dict(table, "offsetTable").items():
                mq = fastjson.as_object(key, "offsetTable key")
                off = fastjson.as_object(value, "offsetTable value")
                status.queues.append(
                    QueueStatus(
                        fastjson.get_str(mq, "brokerName", name),
                        fastjson.get_int(mq, "queueId"),
                        fastjson.get_int(off, "minOffset", 0),
                        fastjson.get_int(off, "maxOffset", 0),
                        fastjson.get_int(off, "lastUpdateTimestamp", 0),
                    )
                )
        status.queues.sort(key=lambda q: (q.broker_name, q.queue_id))
        return status

    async def topic_config(self, addr: str, topic: str) -> TopicConfig | None:
        """The broker's own config of ``topic`` (GET_ALL_TOPIC_CONFIG), None if it has none."""
        wrapper = TopicConfigSerializeWrapper.from_json(await self.api.get_all_topic_config(addr))
        return wrapper.topic_config_table.get(topic)

    async def update_topic_perm(
        self, topic: str, perm: int, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> list[tuple[str, int, int]]:
        """Set ``topic``'s permission (2 W, 4 R, 6 RW) on the target brokers, keeping the rest of
        each broker's topic config. Returns ``(addr, old perm, new perm)`` per broker.

        Raises:
            MQAdminError: no target, or a target broker does not have the topic.
        """
        addrs = await self.targets(broker_addr, cluster)
        done: list[tuple[str, int, int]] = []
        for addr in addrs:
            old = await self.topic_config(addr, topic)
            if old is None:
                raise MQAdminError(f"broker {addr} has no topic {topic!r}")
            await self.create_topic(replace(old, perm=perm), broker_addr=addr)
            done.append((addr, old.perm, perm))
        return done

    # ---------------------------------------------------------------------- name server KV
    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG on every name server."""
        await self.gather(self.api.put_kv_config(namespace, key, value, ns) for ns in self.namesrv_addrs)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        await self.gather(self.api.delete_kv_config(namespace, key, ns) for ns in self.namesrv_addrs)

    async def namesrv_configs(self) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG of every name server, by address."""
        results = await self.gather(self.api.get_namesrv_config(ns) for ns in self.namesrv_addrs)
        return dict(zip(self.namesrv_addrs, results, strict=True))

    async def wipe_write_perm(self, broker_name: str) -> list[tuple[str, int]]:
        """Clear the write permission of ``broker_name`` in every name server: producers stop
        routing to it. Returns ``(name server, topics changed)``."""
        counts = await self.gather(
            self.api.wipe_write_perm_of_broker(ns, broker_name) for ns in self.namesrv_addrs
        )
        return list(zip(self.namesrv_addrs, counts, strict=True))

    async def add_write_perm(self, broker_name: str) -> list[tuple[str, int]]:
        counts = await self.gather(
            self.api.add_write_perm_of_broker(ns, broker_name) for ns in self.namesrv_addrs
        )
        return list(zip(self.namesrv_addrs, counts, strict=True))

    # ------------------------------------------------------------------------ brokers
    async def broker_runtime(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the KV table clusterList, the dashboard and exporters read."""
        return await self.api.get_broker_runtime_info(addr)

    async def cluster_list(self, cluster: str | None = None) -> list[BrokerRuntime]:
        """Every broker (masters and slaves) of ``cluster`` (all clusters when None) with its
        runtime stats; a broker that does not answer has ``error`` set instead.

        Raises: MQAdminError (unknown cluster).
        """
        info = await self.cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise MQAdminError(f"cluster {cluster!r} is not known to the name servers (known: {known})")
        rows: list[BrokerRuntime] = []
        for cname, names in sorted(info.cluster_addr_table.items()):
            if cluster is not None and cname != cluster:
                continue
            for name in sorted(names):
                bd = info.broker_addr_table.get(name)
                for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                    rows.append(BrokerRuntime(cname, name, bid, addr))
        await asyncio.gather(*(self._fill_runtime(r) for r in rows))
        return rows

    async def _fill_runtime(self, row: BrokerRuntime) -> None:
        try:
            row.stats = await self.broker_runtime(row.addr)
        except Exception as exc:  # one dead broker must not hide the others
            row.error = str(exc) or type(exc).__name__

    async def brokers_runtime(self, addrs: list[str]) -> list[BrokerRuntime]:
        """Runtime stats of the given brokers (brokerStatus), named from the cluster info."""
        info = await self.cluster_info()
        where: dict[str, tuple[str, str, int]] = {}
        for cname, names in info.cluster_addr_table.items():
            for name in names:
                bd = info.broker_addr_table.get(name)
                for bid, addr in (bd.broker_addrs if bd else {}).items():
                    where[addr] = (cname, name, bid)
        rows = [BrokerRuntime(*where.get(a, ("", "", MASTER_ID)), a) for a in addrs]
        await asyncio.gather(*(self._fill_runtime(r) for r in rows))
        return rows

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: every live config key of the broker."""
        return await self.api.get_broker_config(addr)

    async def update_broker_config(self, addrs: list[str], key: str, value: str) -> None:
        """UPDATE_BROKER_CONFIG ``key=value`` on each broker (hot update, persisted by the broker).

        Raises: ResponseError (the broker rejected the key or the value).
        """
        for addr in addrs:
            await self.api.update_broker_config(addr, {key: value})
