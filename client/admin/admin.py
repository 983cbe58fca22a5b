"""``MQAdmin``: the asyncio admin API behind ``mqadmin`` (Java ``DefaultMQAdminExt``).

    from pocketmq.client.admin import MQAdmin
    from pocketmq.remoting.protocol.route import TopicConfig

    async with MQAdmin("127.0.0.1:9876") as admin:
        await admin.create_topic(TopicConfig("Orders", 8, 8), cluster="DefaultCluster")
        status = await admin.topic_status("Orders")
        lag = (await admin.consume_stats("OrderConsumers", "Orders")).diff_total
        await admin.reset_offset_by_time("OrderConsumers", "Orders", timestamp_ms)

Operations are grouped by subject in the mixins this class combines:

* :class:`~.topics.TopicAdmin`: topics, routes, clusters, broker runtime/config, name-server KV
  and write permission;
* :class:`~.groups.GroupAdmin`: subscription groups, consumer progress and connections, client
  running info, offset resets, per-broker consume stats;
* :class:`~.messages.MessageAdmin`: message lookup by id/key/unique key, consumption tracks,
  reading ranges, sending;
* :class:`~.acl.AclOps`: ACL accounts, global white list and versions (codes 50-54);
* here: :meth:`MQAdmin.stats_all`, which needs all of them.

Results are the dataclasses of :mod:`.model` (``to_json()`` gives mqadmin's ``--json``).
Failures raise the SDK's exceptions: ``ResponseError`` subclasses for broker/name-server
refusals (code and remark), ``TopicRouteNotFoundError``, ``RemotingConnectError`` /
``RemotingTimeoutError`` for unreachable servers, :class:`MQAdminError` for requests that cannot
be satisfied as asked.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pocketmq.client.admin.acl import AclOps
from pocketmq.client.admin.base import MQAdminError
from pocketmq.client.admin.messages import MessageAdmin
from pocketmq.client.admin.model import StatsRow
from pocketmq.client.admin.topics import TopicAdmin
from pocketmq.remoting.protocol.errors import ResponseError
from pocketmq.remoting.protocol.route import is_dlq_topic, is_retry_topic

__all__ = ["MQAdmin", "MQAdminError"]


def _sum_24h(stats: dict[str, Any] | None) -> int:
    """Java ``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's, else the minute's."""
    if not stats:
        return 0
    for key in ("statsDay", "statsHour", "statsMinute"):
        part = stats.get(key) or {}
        total = int(part.get("sum", 0) or 0)
        if total:
            return total
    return 0


def _tps(stats: dict[str, Any] | None) -> float:
    if not stats:
        return 0.0
    return float((stats.get("statsMinute") or {}).get("tps", 0.0) or 0.0)


class MQAdmin(TopicAdmin, MessageAdmin, AclOps):
    """Asyncio admin client; see the module docstring. Use as an async context manager."""

    async def stats_all(self, topic: str | None = None, *, active_only: bool = False) -> list[StatsRow]:
        """Per topic and consumer group: backlog, in/out TPS, messages in/out over 24 h (statsAll).

        TPS and 24-hour counts come from the brokers' VIEW_BROKER_STATS_DATA (0 when a broker
        keeps no such stats). Retry and DLQ topics are left out, as in RocketMQ.
        """
        topics = (
            [topic]
            if topic
            else [t for t in await self.topic_list() if not (is_retry_topic(t) or is_dlq_topic(t))]
        )
        per_topic = await asyncio.gather(*(self._topic_stats(t, active_only) for t in topics))
        return [row for rows in per_topic for row in rows]

    async def _topic_stats(self, topic: str, active_only: bool) -> list[StatsRow]:
        route = await self.topic_route_or_none(topic)
        if route is None:
            return []
        masters = [addr for _, addr in self.route_masters(route)]
        put = await asyncio.gather(*(self.broker_stats(a, "TOPIC_PUT_NUMS", topic) for a in masters))
        in_tps = sum(_tps(s) for s in put)
        in_24h = sum(_sum_24h(s) for s in put)
        groups = await self.topic_groups(topic)
        if not groups:
            if active_only and in_24h <= 0:
                return []
            return [StatsRow(topic, None, 0, in_tps, 0.0, in_24h, 0)]
        rows = []
        for group in groups:
            try:
                accumulation = (await self.consume_stats(group, topic)).diff_total
            except (ResponseError, MQAdminError):
                accumulation = 0
            got = await asyncio.gather(
                *(self.broker_stats(a, "GROUP_GET_NUMS", f"{topic}@{group}") for a in masters)
            )
            out_24h = sum(_sum_24h(s) for s in got)
            if active_only and in_24h <= 0 and out_24h <= 0:
                continue
            rows.append(
                StatsRow(topic, group, accumulation, in_tps, sum(_tps(s) for s in got), in_24h, out_24h)
            )
        return rows
