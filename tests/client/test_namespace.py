"""RocketMQ namespaces: wrapping rules (pure) and isolation on a real cluster (issue 22)."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    Producer,
    PushConsumer,
)
from pocketmq.client.message import MessageQueue
from pocketmq.client.namespace import unwrap, wrap
from pocketmq.testing import cluster


def test_wrap_and_unwrap_follow_rocketmq() -> None:
    assert wrap("ns", "T") == "ns%T"
    assert wrap("ns", "ns%T") == "ns%T"  # already namespaced
    assert wrap("ns", "%RETRY%G") == "%RETRY%ns%G"
    assert wrap("ns", "%DLQ%G") == "%DLQ%ns%G"
    assert wrap("ns", "TBW102") == "TBW102" and wrap("ns", "SCHEDULE_TOPIC_XXXX") == "SCHEDULE_TOPIC_XXXX"
    assert wrap("ns", "CID_RMQ_SYS_TRANS") == "CID_RMQ_SYS_TRANS"
    assert wrap(None, "T") == "T" and wrap("", "T") == "T"
    assert unwrap("ns", "ns%T") == "T" and unwrap("ns", "%RETRY%ns%G") == "%RETRY%G"
    assert unwrap("ns", "other%T") == "other%T" and unwrap(None, "ns%T") == "ns%T"


@pytest.mark.integration
async def test_namespaced_clients_see_only_their_namespace(tmp_path) -> None:
    async with cluster(tmp_path / "pmq") as c:
        for ns in ("alpha", "beta"):
            await c.create_topic(f"{ns}%Orders", queues=2)
        await c.create_topic("Orders", queues=2)
        ns_opts = {"namesrv": c.namesrv_addr}
        async with (
            Producer("PG", namespace="alpha", **ns_opts) as a,
            Producer("PG", namespace="beta", instance_name="beta", **ns_opts) as b,
            Producer("PG", instance_name="plain", **ns_opts) as plain,
        ):
            result = await a.send(Message("Orders", b"a1"))
            assert result.message_queue.topic == "Orders"  # the user sees the plain topic
            await a.send_batch([Message("Orders", b"a2"), Message("Orders", b"a3")])
            await b.send(Message("Orders", b"b1"))
            await plain.send(Message("Orders", b"p1"))

        got: list = []
        done = asyncio.Event()

        async def listener(msgs, ctx):
            got.extend((m.topic, m.body) for m in msgs)
            if len(got) >= 3:
                done.set()
            return CONSUME_SUCCESS

        push = PushConsumer(
            "CG", namespace="alpha", listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **ns_opts,
        )  # fmt: skip
        push.subscribe("Orders")
        async with push:
            await asyncio.wait_for(done.wait(), 30)
        assert push.group == "alpha%CG"
        assert sorted(got) == [("Orders", b"a1"), ("Orders", b"a2"), ("Orders", b"a3")]

        async with LitePullConsumer(
            "LCG", namespace="beta", instance_name="beta-lite",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **ns_opts,
        ) as lite:  # fmt: skip
            queues = await lite.fetch_message_queues("Orders")
            assert {mq.topic for mq in queues} == {"Orders"}
            lite.assign(queues)
            assert lite.assignment() == queues
            bodies: list[bytes] = []
            while not bodies:
                msgs = await lite.poll(10)
                assert msgs, "beta's message did not arrive"
                assert all(m.topic == "Orders" for m in msgs)
                bodies += [m.body for m in msgs]
            assert bodies == [b"b1"]
            mq = next(iter(queues))
            assert isinstance(mq, MessageQueue) and await lite.max_offset(mq) >= 0


@pytest.mark.integration
async def test_admin_namespace_wraps_arguments_and_filters_results(tmp_path) -> None:
    from pocketmq.client import MQAdmin
    from pocketmq.client.admin.namespaced import mine
    from pocketmq.remoting.protocol.registration import TopicConfig

    assert mine("ns", "ns%T") and mine("ns", "%RETRY%ns%G") and not mine("ns", "T")
    async with cluster(tmp_path / "pmq") as c:
        await c.create_topic("Other", queues=1)
        async with MQAdmin(c.namesrv_addr, namespace="alpha") as admin:
            assert admin.namespace == "alpha"
            await admin.create_topic(TopicConfig("Orders", 2, 2), cluster="DefaultCluster")
            async with Producer("PG", namespace="alpha", namesrv=c.namesrv_addr) as producer:
                await producer.send(Message("Orders", b"a1"))  # the route is there once created
            assert "Orders" in await admin.topic_list()
            assert not {"Other", "alpha%Orders"} & set(await admin.topic_list())
            route = await admin.topic_route("Orders")
            assert sum(q.write_queue_nums for q in route.queue_datas) == 2
            status = await admin.topic_status("Orders")
            assert sum(q.max_offset for q in status.queues) == 1
            ranges = await admin.read_messages("Orders")
            msgs = [m for r in ranges for m in r.messages]
            assert [(m.topic, m.body) for m in msgs] == [("Orders", b"a1")]
        async with MQAdmin(c.namesrv_addr) as plain:  # no namespace: the wire names
            topics = await plain.topic_list()
            assert "alpha%Orders" in topics and "Orders" not in topics and "Other" in topics
