"""MQAdmin decision logic against a scripted request layer (no sockets): target resolution,
merging per-broker answers, and the fallbacks RocketMQ's admin has."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pocketmq.client.admin import MQAdmin, MQAdminError
from pocketmq.remoting.protocol.bodies import ConsumeStats, MessageQueue, OffsetWrapper, ResetOffsetBody
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import ConsumerNotOnlineError
from pocketmq.remoting.protocol.route import BrokerData, ClusterInfo, QueueData, TopicRouteData
from tests.client.fakes import FakeRemoting, as_any, reply

NS = "127.0.0.1:9876"
A, B = "10.0.0.1:10911", "10.0.0.2:10911"
CLUSTER = ClusterInfo(
    {
        "broker-a": BrokerData("C1", "broker-a", {0: A, 1: "10.0.0.9:10911"}),
        "broker-b": BrokerData("C1", "broker-b", {0: B}),
    },
    {"C1": ["broker-a", "broker-b"]},
)


def route(topic: str) -> TopicRouteData:
    return TopicRouteData(
        [QueueData("broker-a", 2, 2, 6), QueueData("broker-b", 2, 2, 6)],
        [CLUSTER.broker_addr_table["broker-a"], CLUSTER.broker_addr_table["broker-b"]],
    )


Handler = Callable[[str, RemotingCommand], RemotingCommand | None]


def admin_with(handler: Handler) -> tuple[MQAdmin, FakeRemoting]:
    def dispatch(addr: str, req: RemotingCommand) -> RemotingCommand | Exception:
        got = handler(addr, req)
        if got is not None:
            return got
        if req.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return reply(body=CLUSTER.encode())
        if req.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            topic = (req.ext_fields or {})["topic"]
            if topic.startswith("%RETRY%"):
                return reply(ResponseCode.TOPIC_NOT_EXIST, remark="no route")
            return reply(body=route(topic).encode())
        return reply(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f"code {req.code} not scripted")

    fake = FakeRemoting(dispatch)
    return MQAdmin(NS, remoting=as_any(fake)), fake


async def test_targets_broker_addr_wins_and_cluster_means_masters() -> None:
    admin, _ = admin_with(lambda a, r: None)
    assert await admin.targets(B, "C1") == [B]
    assert await admin.targets(None, "C1") == [A, B]
    assert await admin.targets(None, "C1", with_slaves=True) == [A, "10.0.0.9:10911", B]
    with pytest.raises(MQAdminError, match=r"cluster 'Nope' is not known .*known: C1"):
        await admin.targets(None, "Nope")
    with pytest.raises(MQAdminError, match=r"\(-b\).*\(-c\)"):
        await admin.targets(None, None)


async def test_consume_stats_merges_brokers_and_sorts_queues() -> None:
    def handler(addr: str, req: RemotingCommand) -> RemotingCommand | None:
        if req.code != RequestCode.GET_CONSUME_STATS:
            return None
        name = "broker-a" if addr == A else "broker-b"
        table = {MessageQueue("T", name, q): OffsetWrapper(10 + q, 4, 0) for q in (1, 0)}
        return reply(body=ConsumeStats(table, consume_tps=1.5).encode())

    admin, fake = admin_with(handler)
    progress = await admin.consume_stats("CG", "T")
    assert [(r.broker_name, r.queue_id, r.diff) for r in progress.rows] == [
        ("broker-a", 0, 6), ("broker-a", 1, 7), ("broker-b", 0, 6), ("broker-b", 1, 7)
    ]  # fmt: skip
    assert progress.diff_total == 26 and progress.consume_tps == 3.0
    # no %RETRY% route: the topic's masters were asked (not the slave)
    asked = {addr for addr, req in fake.requests if req.code == RequestCode.GET_CONSUME_STATS}
    assert asked == {A, B}


async def test_consume_stats_with_no_offsets_anywhere_is_a_clear_error() -> None:
    def handler(addr: str, req: RemotingCommand) -> RemotingCommand | None:
        if req.code == RequestCode.GET_CONSUME_STATS:
            return reply(body=ConsumeStats().encode())
        return None

    admin, _ = admin_with(handler)
    with pytest.raises(MQAdminError, match="'CG' has no consume offsets for topic 'T'"):
        await admin.consume_stats("CG", "T")


async def test_reset_offset_uses_broker_reset_and_falls_back_for_offline_groups() -> None:
    updates: list[tuple[str, dict[str, str]]] = []

    def handler(addr: str, req: RemotingCommand) -> RemotingCommand | None:
        ext = req.ext_fields or {}
        if req.code == RequestCode.INVOKE_BROKER_TO_RESET_OFFSET:
            assert ext["isForce"] == "true" and ext["timestamp"] == "1000"
            if addr == A:
                body = ResetOffsetBody(
                    {MessageQueue("T", "broker-a", 0): 3, MessageQueue("T", "broker-a", 1): 5}
                )
                return reply(body=body.encode())
            return reply(ResponseCode.CONSUMER_NOT_ONLINE, remark="Consumer not online")
        if req.code == RequestCode.QUERY_CONSUMER_OFFSET:
            return reply(ext={"offset": "9"})
        if req.code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            return reply(ext={"offset": "2"})
        if req.code == RequestCode.UPDATE_CONSUMER_OFFSET:
            updates.append((addr, dict(ext)))
            return reply()
        return None

    admin, _ = admin_with(handler)
    result = await admin.reset_offset_by_time("CG", "T", 1000)
    assert [(r.broker_name, r.queue_id, r.offset) for r in result.rows] == [
        ("broker-a", 0, 3), ("broker-a", 1, 5), ("broker-b", 0, 2), ("broker-b", 1, 2)
    ]  # fmt: skip
    # the offline broker's offsets were written directly, one per queue
    assert sorted((a, u["queueId"], u["commitOffset"]) for a, u in updates) == [(B, "0", "2"), (B, "1", "2")]


async def test_reset_dry_run_changes_nothing_and_respects_force() -> None:
    def handler(addr: str, req: RemotingCommand) -> RemotingCommand | None:
        if req.code in (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET):
            raise AssertionError("a dry run must not change anything")
        if req.code == RequestCode.QUERY_CONSUMER_OFFSET:
            return reply(ext={"offset": "4"})
        if req.code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            return reply(ext={"offset": "7"})
        if req.code == RequestCode.GET_MAX_OFFSET:
            return reply(ext={"offset": "11"})
        return None

    admin, _ = admin_with(handler)
    forced = await admin.reset_offset_by_time("CG", "T", 1000, dry_run=True)
    assert {(r.consumer_offset, r.offset) for r in forced.rows} == {(4, 7)} and len(forced.rows) == 4
    # not forced: offsets only move backwards, so 4 stays 4
    gentle = await admin.reset_offset_by_time("CG", "T", 1000, force=False, dry_run=True)
    assert {(r.consumer_offset, r.offset) for r in gentle.rows} == {(4, 4)}
    skip = await admin.reset_offset_by_time("CG", "T", -1, dry_run=True)
    assert {r.offset for r in skip.rows} == {11}


async def test_broker_consume_stats_falls_back_to_per_group_stats() -> None:
    from pocketmq.remoting.protocol.bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper

    def handler(addr: str, req: RemotingCommand) -> RemotingCommand | None:
        if req.code == RequestCode.GET_BROKER_CONSUME_STATS:
            return reply(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark="not supported")
        if req.code == RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
            table = {g: SubscriptionGroupConfig(g) for g in ("CG1", "CG2")}
            return reply(body=SubscriptionGroupWrapper(table).encode())
        if req.code == RequestCode.GET_CONSUME_STATS:
            group = (req.ext_fields or {})["consumerGroup"]
            lag = 5 if group == "CG1" else 0
            return reply(
                body=ConsumeStats({MessageQueue("T", "broker-a", 0): OffsetWrapper(10, 10 - lag, 0)}).encode()
            )
        return None

    admin, _ = admin_with(handler)
    rows = await admin.broker_consume_stats(A)
    assert [(r.group, r.diff) for r in rows] == [("CG1", 5), ("CG2", 0)]
    assert [r.group for r in await admin.broker_consume_stats(A, diff_level=1)] == ["CG1"]


async def test_consumer_connection_not_online() -> None:
    def handler(addr: str, req: RemotingCommand) -> RemotingCommand | None:
        if req.code == RequestCode.GET_CONSUMER_CONNECTION_LIST:
            return reply(ResponseCode.CONSUMER_NOT_ONLINE, remark="the consumer group not online")
        return None

    admin, _ = admin_with(handler)
    with pytest.raises(ConsumerNotOnlineError, match="'CG' is not online"):
        await admin.consumer_connection("CG")


async def test_view_message_rejects_ids_that_are_not_offset_ids() -> None:
    admin, fake = admin_with(lambda a, r: None)
    with pytest.raises(MQAdminError, match="not an offset message id"):
        await admin.view_message("hello")
    assert fake.requests == []
