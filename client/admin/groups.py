"""Consumer-group, connection, offset and stats operations of :class:`~pocketmq.client.admin.MQAdmin`.

Where a group lives: its ``%RETRY%<group>`` topic is created on every broker a consumer of the
group heartbeats to, so that topic's route names the brokers holding the group's offsets
(:meth:`AdminBase.group_brokers`); a group that never had a live consumer falls back to the
topic's brokers, then to every master.

Offset resets follow RocketMQ: INVOKE_BROKER_TO_RESET_OFFSET makes each broker compute the
offsets for the time and push them to the group's live consumers, which re-consume from there;
a broker answering CONSUMER_NOT_ONLINE gets the offsets written directly (the group is offline,
nobody holds them in memory). ``dry_run`` only computes and reports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pocketmq.client.admin.base import AdminBase, MQAdminError
from pocketmq.client.admin.model import (
    BrokerConsumeRow,
    ConnectionRow,
    ConsumerConnectionInfo,
    GroupProgress,
    GroupSummary,
    ProgressRow,
    ResetResult,
    ResetRow,
    version_desc,
)
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.bodies import SubscriptionGroupConfig
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.errors import (
    ConsumerNotOnlineError,
    RequestCodeNotSupportedError,
    ResponseError,
)
from pocketmq.remoting.protocol.route import (
    RETRY_GROUP_TOPIC_PREFIX,
    TopicRouteData,
    dlq_topic,
    is_sys_consumer_group,
    retry_topic,
)

__all__ = ["GroupAdmin"]

#: consumeType as consumerProgress prints it.
_TYPES = {"CONSUME_ACTIVELY": "PULL", "CONSUME_PASSIVELY": "PUSH"}
_TYPE_ORDINALS = {"0": "CONSUME_ACTIVELY", "1": "CONSUME_PASSIVELY"}
_MODEL_ORDINALS = {"0": "BROADCASTING", "1": "CLUSTERING"}
_FROM_WHERE_ORDINALS = {
    "0": "CONSUME_FROM_LAST_OFFSET",
    "1": "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "2": "CONSUME_FROM_MIN_OFFSET",
    "3": "CONSUME_FROM_MAX_OFFSET",
    "4": "CONSUME_FROM_FIRST_OFFSET",
    "5": "CONSUME_FROM_TIMESTAMP",
}


def _enum_name(value: Any, ordinals: Mapping[str, str] | None = None) -> str | None:
    """Enum names arrive as names (Java) or ordinals (C++ clients)."""
    if value is None:
        return None
    text = str(value)
    return ordinals.get(text, text) if ordinals else text


def _offset_rows(table: Mapping[Any, Any], default_broker: str) -> list[tuple[MessageQueue, int, int, int]]:
    """``(mq, brokerOffset, consumerOffset, lastTimestamp)`` from a ConsumeStats offsetTable."""
    rows = []
    for key, value in fastjson.get_dict(table, "offsetTable").items():
        mq = fastjson.as_object(key, "offsetTable key")
        w = fastjson.as_object(value, "offsetTable value")
        rows.append(
            (
                MessageQueue(
                    fastjson.get_str(mq, "topic"), fastjson.get_str(mq, "brokerName", default_broker),
                    fastjson.get_int(mq, "queueId"),
                ),
                fastjson.get_int(w, "brokerOffset", 0),
                fastjson.get_int(w, "consumerOffset", 0),
                fastjson.get_int(w, "lastTimestamp", 0),
            )
        )  # fmt: skip
    return rows


class GroupAdmin(AdminBase):
    # ------------------------------------------------------------------- subscription groups
    async def create_subscription_group(
        self, config: SubscriptionGroupConfig, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> list[str]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on the target brokers; returns their addresses."""
        addrs = await self.targets(broker_addr, cluster)
        for addr in addrs:
            await self.api.create_subscription_group(addr, config.to_json())
        return addrs

    async def delete_subscription_group(
        self, group: str, *, broker_addr: str | None = None, cluster: str | None = None,
        remove_offset: bool = False,
    ) -> list[str]:  # fmt: skip
        """DELETE_SUBSCRIPTIONGROUP on the target brokers; with a cluster, the group's
        ``%RETRY%`` and ``%DLQ%`` topics are deleted there and in the name servers too."""
        addrs = await self.targets(broker_addr, cluster)
        for addr in addrs:
            await self.api.delete_subscription_group(addr, group, remove_offset)
        if cluster:
            for topic in (retry_topic(group), dlq_topic(group)):
                for addr in addrs:
                    await self._quietly(self.api.delete_topic_in_broker(addr, topic))
                for ns in self.namesrv_addrs:
                    await self._quietly(self.api.delete_topic_in_namesrv(ns, topic, cluster))
        return addrs

    @staticmethod
    async def _quietly(call: Any) -> None:
        try:
            await call
        except ResponseError:
            pass

    async def topic_groups(self, topic: str) -> list[str]:
        """Groups that consume ``topic`` (QUERY_TOPIC_CONSUME_BY_WHO on each master, merged).

        Raises: TopicRouteNotFoundError.
        """
        route = await self.topic_route(topic)
        groups: set[str] = set()
        for _, addr in self.route_masters(route):
            try:
                groups.update(await self.api.query_topic_consume_by_who(addr, topic))
            except ResponseError:
                continue
        return sorted(groups)

    async def subscription_groups(self, addr: str) -> dict[str, SubscriptionGroupConfig]:
        raw = await self.api.get_all_subscription_group(addr)
        return {
            str(g): SubscriptionGroupConfig.from_json(c, str(g))
            for g, c in fastjson.get_dict(raw, "subscriptionGroupTable").items()
        }

    # ---------------------------------------------------------------------------- progress
    async def consume_stats(self, group: str, topic: str | None = None) -> GroupProgress:
        """GET_CONSUME_STATS from every broker holding the group, merged and sorted by queue.

        Raises:
            MQAdminError: no broker has offsets of the group (it never consumed ``topic``).
        """
        brokers = await self.group_brokers(group, topic)
        tables = await self.gather(self.api.get_consume_stats(addr, group, topic) for _, addr in brokers)
        progress = GroupProgress(group)
        for (name, _addr), table in zip(brokers, tables, strict=True):
            progress.consume_tps += float(fastjson.get_float(table, "consumeTps", 0.0))
            for mq, broker_off, consumer_off, last in _offset_rows(table, name):
                progress.rows.append(
                    ProgressRow(mq.topic, mq.broker_name, mq.queue_id, broker_off, consumer_off, last)
                )
        if not progress.rows:
            what = f"topic {topic!r}" if topic else "any topic"
            raise MQAdminError(f"consumer group {group!r} has no consume offsets for {what} on any broker")
        progress.rows.sort(key=lambda r: (r.topic, r.broker_name, r.queue_id))
        return progress

    async def consumer_progress(
        self, group: str, topic: str | None = None, *, show_client_ip: bool = False
    ) -> GroupProgress:
        """:meth:`consume_stats`, with the client each queue is assigned to when asked."""
        progress = await self.consume_stats(group, topic)
        if show_client_ip:
            owners: dict[tuple[str, str, int], str] = {}
            try:
                conn = await self.consumer_connection(group)
            except (ResponseError, MQAdminError):
                conn = None
            for c in conn.connections if conn else []:
                try:
                    info = await self.consumer_running_info(group, c.client_id)
                except Exception:  # an unreachable client leaves its queues "N/A"
                    continue
                for q in info.get("mqTable", []):
                    owners[(q["topic"], q["brokerName"], q["queueId"])] = c.client_addr.rpartition(":")[0]
            for row in progress.rows:
                row.client_ip = owners.get((row.topic, row.broker_name, row.queue_id))
        return progress

    async def all_groups_progress(self) -> list[GroupSummary]:
        """One summary per group that has a ``%RETRY%`` topic (consumerProgress without -g)."""
        groups = sorted(
            t[len(RETRY_GROUP_TOPIC_PREFIX) :]
            for t in await self.api.get_all_topic_list()
            if t.startswith(RETRY_GROUP_TOPIC_PREFIX)
        )
        return list(await asyncio.gather(*(self._group_summary(g) for g in groups)))

    async def _group_summary(self, group: str) -> GroupSummary:
        summary = GroupSummary(group)
        try:
            stats = await self.consume_stats(group)
            summary.consume_tps, summary.diff_total = stats.consume_tps, stats.diff_total
        except (ResponseError, MQAdminError):
            pass
        try:
            conn = await self.consumer_connection(group)
        except (ResponseError, MQAdminError):
            return summary
        summary.count = len(conn.connections)
        if conn.connections:
            summary.version = version_desc(min(c.version for c in conn.connections))
        summary.consume_type = _TYPES.get(conn.consume_type or "", conn.consume_type or "")
        summary.message_model = conn.message_model or ""
        return summary

    # -------------------------------------------------------------------------- connections
    async def consumer_connection(self, group: str, broker_addr: str | None = None) -> ConsumerConnectionInfo:
        """GET_CONSUMER_CONNECTION_LIST from the first broker of the group that knows its clients.

        Raises:
            ConsumerNotOnlineError: no consumer of the group is connected.
        """
        addrs = [broker_addr] if broker_addr else [a for _, a in await self.group_brokers(group)]
        last: Exception | None = None
        for addr in addrs:
            try:
                raw = await self.api.get_consumer_connection_list(addr, group)
            except ResponseError as exc:
                last = exc
                continue
            info = ConsumerConnectionInfo(
                group,
                consume_type=_enum_name(raw.get("consumeType"), _TYPE_ORDINALS),
                message_model=_enum_name(raw.get("messageModel"), _MODEL_ORDINALS),
                consume_from_where=_enum_name(raw.get("consumeFromWhere"), _FROM_WHERE_ORDINALS),
            )
            for c in fastjson.get_list(raw, "connectionSet"):
                c = fastjson.as_object(c, "connectionSet[]")
                info.connections.append(
                    ConnectionRow(
                        fastjson.get_str(c, "clientId", ""), fastjson.get_str(c, "clientAddr", ""),
                        str(c.get("language", "JAVA")), fastjson.get_int(c, "version", 0),
                    )
                )  # fmt: skip
            for topic, sub in sorted(fastjson.get_dict(raw, "subscriptionTable").items()):
                sub = fastjson.as_object(sub, "subscriptionTable value")
                info.subscriptions.append((str(topic), fastjson.get_str(sub, "subString", "*")))
                info.expression_types[str(topic)] = fastjson.get_str(sub, "expressionType", "TAG") or "TAG"
            info.connections.sort(key=lambda c: c.client_id)
            if info.connections:
                return info
        raise ConsumerNotOnlineError(
            f"consumer group {group!r} is not online (no connected consumer): {last or 'no broker'}"
        )

    async def producer_connection(self, group: str, topic: str) -> list[ConnectionRow]:
        """GET_PRODUCER_CONNECTION_LIST from every master of the topic, merged by client id.

        Raises:
            MQAdminError: no producer of the group is connected to the topic's brokers.
        """
        route = await self.topic_route(topic)
        found: dict[str, ConnectionRow] = {}
        for _, addr in self.route_masters(route):
            raw = await self.api.get_producer_connection_list(addr, group)
            for c in fastjson.get_list(raw, "connectionSet"):
                c = fastjson.as_object(c, "connectionSet[]")
                row = ConnectionRow(
                    fastjson.get_str(c, "clientId", ""), fastjson.get_str(c, "clientAddr", ""),
                    str(c.get("language", "JAVA")), fastjson.get_int(c, "version", 0),
                )  # fmt: skip
                found.setdefault(row.client_id, row)
        if not found:
            raise MQAdminError(
                f"producer group {group!r} has no connection to the brokers of topic {topic!r}"
            )
        return sorted(found.values(), key=lambda c: c.client_id)

    async def consumer_running_info(self, group: str, client_id: str, jstack: bool = False) -> dict[str, Any]:
        """A live client's ConsumerRunningInfo, relayed by a broker (GET_CONSUMER_RUNNING_INFO).

        The result is plain JSON: ``properties``, ``subscriptionSet``, ``statusTable`` and
        ``mqTable`` as a list of ``{topic, brokerName, queueId, <ProcessQueueInfo fields>}``.
        """
        last: Exception | None = None
        for _, addr in await self.group_brokers(group):
            try:
                raw = await self.api.get_consumer_running_info(addr, group, client_id, jstack)
            except ResponseError as exc:
                last = exc
                continue
            queues = []
            for key, value in fastjson.get_dict(raw, "mqTable").items():
                mq = MessageQueue.from_json(key)
                queues.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                               **dict(fastjson.as_object(value, "mqTable value"))})  # fmt: skip
            return {
                "properties": {str(k): str(v) for k, v in fastjson.get_dict(raw, "properties").items()},
                "subscriptionSet": [
                    dict(fastjson.as_object(s, "subscriptionSet[]"))
                    for s in fastjson.get_list(raw, "subscriptionSet")
                ],
                "statusTable": {
                    str(k): dict(fastjson.as_object(v, "statusTable value"))
                    for k, v in fastjson.get_dict(raw, "statusTable").items()
                },
                "mqTable": queues,
                "jstack": raw.get("jstack") or None,
            }
        raise MQAdminError(f"cannot get the running info of {client_id} in group {group!r}: {last}")

    async def consumer_status(
        self, group: str, client_id: str | None = None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        """Running info of every online client of the group (or one): ``(infos, errors)``."""
        conn = await self.consumer_connection(group)
        ids = [c.client_id for c in conn.connections if client_id is None or c.client_id == client_id]
        if client_id is not None and not ids:
            raise MQAdminError(f"client {client_id!r} is not connected in consumer group {group!r}")
        infos: dict[str, dict[str, Any]] = {}
        errors: dict[str, str] = {}
        for cid in ids:
            try:
                infos[cid] = await self.consumer_running_info(group, cid)
            except (ResponseError, MQAdminError) as exc:
                errors[cid] = str(exc)
        return infos, errors

    # ---------------------------------------------------------------------------- offsets
    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp: int, *, force: bool = True, dry_run: bool = False
    ) -> ResetResult:
        """Move ``group``'s offsets on ``topic`` to the first message stored at/after ``timestamp``
        (ms; -1 = the end of each queue). Without ``force`` offsets only move backwards.

        Raises: TopicRouteNotFoundError; ResponseError from a broker.
        """
        route = await self.topic_route(topic)
        result = ResetResult(group, topic, timestamp, force, dry_run)
        for name, addr in self.route_masters(route):
            if dry_run:
                result.rows += await self._planned_offsets(route, name, addr, group, topic, timestamp, force)
                continue
            try:
                raw = await self.api.invoke_broker_to_reset_offset(addr, topic, group, timestamp, force)
            except ConsumerNotOnlineError:
                rows = await self._planned_offsets(route, name, addr, group, topic, timestamp, force)
                for r in rows:
                    await self.api.update_consumer_offset(
                        addr, group, MessageQueue(topic, name, r.queue_id), r.offset
                    )
                result.rows += rows
                continue
            for key, value in fastjson.get_dict(raw, "offsetTable").items():
                mq = MessageQueue.from_json(key)
                result.rows.append(ResetRow(mq.broker_name, mq.queue_id, -1, int(value)))
        result.rows.sort(key=lambda r: (r.broker_name, r.queue_id))
        return result

    async def _planned_offsets(
        self, route: TopicRouteData, name: str, addr: str, group: str, topic: str, timestamp: int, force: bool
    ) -> list[ResetRow]:
        """What the broker would compute (Java ``Broker2Client.resetOffset``), per write queue."""
        qd = next((q for q in route.queue_datas if q.broker_name == name), None)
        if qd is None:
            return []
        rows = []
        for qid in range(max(qd.write_queue_nums, qd.read_queue_nums)):
            mq = MessageQueue(topic, name, qid)
            current = await self.api.query_consumer_offset(addr, group, mq)
            if timestamp == -1:
                target = await self.api.get_max_offset(addr, mq)
            else:
                target = max(0, await self.api.search_offset(addr, mq, timestamp))
            new = target if force or current < 0 or target < current else current
            rows.append(ResetRow(name, qid, current, new))
        return rows

    async def clone_group_offset(self, src: str, dest: str, topic: str, offline: bool = False) -> list[str]:
        route = await self.topic_route(topic)
        addrs = [a for _, a in self.route_masters(route)]
        for addr in addrs:
            await self.api.clone_group_offset(addr, src, dest, topic, offline)
        return addrs

    # ------------------------------------------------------------------------- broker stats
    async def broker_consume_stats(
        self, addr: str, *, is_order: bool = False, diff_level: int = 0
    ) -> list[BrokerConsumeRow]:
        """Lag of every group on one broker (GET_BROKER_CONSUME_STATS; per-group GET_CONSUME_STATS
        when the broker does not implement it). Rows with a diff below ``diff_level`` are left out."""
        rows: list[BrokerConsumeRow] = []
        try:
            reply = await self.api.invoke_checked(
                addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": str(is_order).lower()}, timeout=30.0
            )
            raw = fastjson.decode_object(reply.body or b"{}", "ConsumeStatsList")
            for entry in fastjson.get_list(raw, "consumeStatsList"):
                for group, stats_list in fastjson.as_object(entry, "consumeStatsList[]").items():
                    for stats in stats_list or []:
                        rows += self._broker_rows(str(group), fastjson.as_object(stats, "consumeStats"))
        except RequestCodeNotSupportedError:
            for group in sorted(await self.subscription_groups(addr)):
                if is_sys_consumer_group(group):
                    continue
                stats = await self.api.get_consume_stats(addr, group)
                rows += self._broker_rows(group, stats)
        rows = [r for r in rows if r.diff >= diff_level]
        rows.sort(key=lambda r: (r.topic, r.group, r.broker_name, r.queue_id))
        return rows

    @staticmethod
    def _broker_rows(group: str, stats: Mapping[Any, Any]) -> list[BrokerConsumeRow]:
        return [
            BrokerConsumeRow(mq.topic, group, mq.broker_name, mq.queue_id, bo, co, last)
            for mq, bo, co, last in _offset_rows(stats, "")
        ]
