"""``AdminBase``: the admin client's connections, name-server lookups and target resolution.

The admin client is deliberately small: one :class:`RemotingClient` and the SDK's request layer
(:class:`~pocketmq.client.api.MQClientAPI`), no background services, no heartbeats. Every call
asks the name servers afresh (topic routes, cluster info), as Java's ``DefaultMQAdminExt`` does,
so the answers are never stale.

Commands that change brokers take a *target*: one broker address (``-b``) or a cluster name
(``-c``), which means every master of the cluster (and, when asked, its slaves). When both are
given the broker address wins, as in RocketMQ.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections.abc import Awaitable, Iterable, Sequence
from typing import Self, TypeVar

from pocketmq.client.acl import AclClientRPCHook
from pocketmq.client.api import MQClientAPI
from pocketmq.client.config import first_bad_addr
from pocketmq.client.errors import MQClientError, TopicRouteNotFoundError
from pocketmq.remoting.protocol.route import (
    MASTER_ID,
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicRouteData,
    retry_topic,
)
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig

T = TypeVar("T")

DEFAULT_NAMESRV = "127.0.0.1:9876"

__all__ = ["DEFAULT_NAMESRV", "AdminBase", "MQAdminError", "parse_namesrv_addrs"]


class MQAdminError(MQClientError):
    """An admin operation that cannot be done as asked (unknown cluster, no data...)."""


def parse_namesrv_addrs(value: str | Sequence[str] | None) -> list[str]:
    """``"a:9876;b:9876"`` (or a list) → addresses; ``None`` → ``$NAMESRV_ADDR`` or 127.0.0.1:9876.

    Raises:
        MQAdminError: an entry is not ``host:port``.
    """
    if value is None:
        value = os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV
    parts = value.split(";") if isinstance(value, str) else list(value)
    addrs = [p.strip() for p in parts if p and p.strip()]
    if not addrs:
        raise MQAdminError("no name server address (use -n host:port or set NAMESRV_ADDR)")
    bad = first_bad_addr(addrs)
    if bad is not None:
        raise MQAdminError(f"bad name server address {bad!r}: expected host:port")
    return addrs


class AdminBase:
    """Connections and lookups shared by every admin operation.

    Args:
        namesrv_addr: ``"host:port;host:port"`` or a list (default ``$NAMESRV_ADDR``, then
            127.0.0.1:9876).
        timeout_ms: per-request timeout.
        access_key / secret_key: ACL credentials (requests are signed when both are given).
        ssl_context: TLS for every connection (``transport.tls.client_ssl_context``); None: plaintext.
        remoting: an existing client to share (tests); it is not closed by :meth:`close`.
        namespace: RocketMQ namespace of the topics and groups named in calls, as the producer's
            and consumers' ``namespace`` (:mod:`pocketmq.client.admin.namespaced`).
    """

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        timeout_ms: int = 3000,
        access_key: str | None = None,
        secret_key: str | None = None,
        remoting: RemotingClient | None = None,
        ssl_context: ssl.SSLContext | None = None,
        namespace: str | None = None,
    ) -> None:
        self.namesrv_addrs = parse_namesrv_addrs(namesrv_addr)
        self.timeout = timeout_ms / 1000
        self._own_remoting = remoting is None
        if remoting is None:
            signers = (
                [AclClientRPCHook(access_key, secret_key).before_request] if access_key and secret_key else []
            )
            config = RemotingClientConfig(
                connect_timeout=min(3.0, self.timeout), request_timeout=self.timeout, ssl=ssl_context
            )
            remoting = RemotingClient(config, before_hooks=signers)
        self.remoting = remoting
        self.api = MQClientAPI(remoting, self.namesrv_addrs, timeout_ms)
        self.namespace = namespace or None
        if namespace:
            from pocketmq.client.admin.namespaced import install

            install(self, namespace, dir(type(self)))

    async def close(self) -> None:
        if self._own_remoting:
            await self.remoting.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @staticmethod
    def now_ms() -> int:
        return time.time_ns() // 1_000_000

    # ------------------------------------------------------------------------ name server
    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO from the name servers."""
        return ClusterInfo.from_json(await self.api.get_broker_cluster_info())

    async def topic_route(self, topic: str) -> TopicRouteData:
        """Raises: TopicRouteNotFoundError (the name servers know no such topic)."""
        r = await self.api.get_topic_route(topic)
        # The SDK keeps its own lean route type; admin output wants the protocol's (to_json).
        return TopicRouteData(
            [QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
             for q in r.queue_datas],
            [BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs)) for b in r.broker_datas],
            {k: list(v) for k, v in r.filter_server_table.items()},
            r.order_topic_conf,
        )  # fmt: skip

    async def topic_route_or_none(self, topic: str) -> TopicRouteData | None:
        try:
            return await self.topic_route(topic)
        except TopicRouteNotFoundError:
            return None

    # --------------------------------------------------------------------------- targets
    @staticmethod
    def route_masters(route: TopicRouteData) -> list[tuple[str, str]]:
        """``(brokerName, masterAddr)`` of every broker group of a route that has a master."""
        out = [
            (bd.broker_name, bd.broker_addrs[MASTER_ID])
            for bd in route.broker_datas
            if MASTER_ID in bd.broker_addrs
        ]
        return sorted(out)

    async def cluster_masters(
        self, cluster: str | None = None, *, with_slaves: bool = False
    ) -> list[tuple[str, str]]:
        """``(brokerName, addr)`` of the masters of ``cluster`` (every cluster when None).

        Raises:
            MQAdminError: the cluster is unknown (the message lists the known ones).
        """
        info = await self.cluster_info()
        if cluster is None:
            names: Iterable[str] = info.broker_addr_table
        elif cluster in info.cluster_addr_table:
            names = info.cluster_addr_table[cluster]
        else:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise MQAdminError(f"cluster {cluster!r} is not known to the name servers (known: {known})")
        out: list[tuple[str, str]] = []
        for name in names:
            bd = info.broker_addr_table.get(name)
            if bd is None:
                continue
            for bid, addr in sorted(bd.broker_addrs.items()):
                if bid == MASTER_ID or with_slaves:
                    out.append((name, addr))
        return sorted(out)

    async def targets(
        self, broker_addr: str | None, cluster: str | None, *, with_slaves: bool = False
    ) -> list[str]:
        """``[broker_addr]``, or every master (and slave) address of ``cluster``.

        Raises:
            MQAdminError: neither was given, the cluster is unknown or has no broker.
        """
        if broker_addr:
            return [broker_addr]
        if not cluster:
            raise MQAdminError("give a broker address (-b) or a cluster name (-c)")
        addrs = [addr for _, addr in await self.cluster_masters(cluster, with_slaves=with_slaves)]
        if not addrs:
            raise MQAdminError(f"cluster {cluster!r} has no live broker")
        return addrs

    async def group_brokers(self, group: str, topic: str | None = None) -> list[tuple[str, str]]:
        """Masters that may hold ``group``'s state: its ``%RETRY%`` topic's brokers (created when a
        consumer of the group connects), else the topic's, else every master."""
        route = await self.topic_route_or_none(retry_topic(group))
        if route is None and topic is not None:
            route = await self.topic_route_or_none(topic)
        if route is not None and route.broker_datas:
            return self.route_masters(route)
        return await self.cluster_masters(None)

    async def broker_name_of(self, addr: str) -> str | None:
        info = await self.cluster_info()
        for name, bd in info.broker_addr_table.items():
            if addr in bd.broker_addrs.values():
                return name
        return None

    # ---------------------------------------------------------------------------- helpers
    @staticmethod
    async def gather(calls: Iterable[Awaitable[T]]) -> list[T]:
        """Run calls concurrently; the first failure is raised after all have finished."""
        results = await asyncio.gather(*calls, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results  # type: ignore[return-value]
