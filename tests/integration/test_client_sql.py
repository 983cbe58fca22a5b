"""SQL92 subscriptions from the SDK against a real in-process name server + broker: push,
lite-pull and the blocking facade get exactly the matching messages; retries are filtered the
same way; a broker without enablePropertyFilter (or an invalid expression) fails the start."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from pocketmq.client import (
    CONSUME_SUCCESS,
    RECONSUME_LATER,
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageSelector,
    MessageValidationError,
    Producer,
    PushConsumer,
)
from pocketmq.client.sync import SyncPushConsumer
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.testing import Cluster, cluster
from tests.client.admin.cli_helpers import arun_cli
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
N = 300


@pytest_asyncio.fixture
async def sql(tmp_path: Path) -> AsyncIterator[Cluster]:
    """A cluster whose broker filters by SQL92 (and filters retries the same way)."""
    overrides = {"enablePropertyFilter": True, "filterSupportRetry": True}
    async with cluster(tmp_path / "c", broker_config=overrides,
                       store_config={"messageDelayLevel": "1s 5s 1s 1s"}) as c:  # fmt: skip
        yield c


def props_of(i: int) -> dict[str, str]:
    region = ("eu", "us", "ap", None)[i % 4]
    return {"a": str(i % 100)} | ({"region": region} if region else {})


async def produce(c: Cluster, topic: str, n: int = N) -> None:
    await c.create_topic(topic, queues=4)
    async with Producer("SQLP", namesrv=c.namesrv_addr) as producer:
        for i in range(n):
            await producer.send(Message(topic, str(i).encode(), properties=props_of(i)))


def expected(pred) -> set[int]:
    return {i for i in range(N) if pred(props_of(i))}


async def test_push_lite_pull_and_sync_get_exactly_the_matches(sql: Cluster) -> None:
    await produce(sql, "SqlT")
    want_between = expected(lambda p: 10 <= int(p["a"]) <= 19)
    want_region = expected(lambda p: p.get("region") in ("eu", "us") and int(p["a"]) > 50)

    got: list[int] = []

    async def listener(msgs, ctx):
        got.extend(int(m.body) for m in msgs)
        return CONSUME_SUCCESS

    push = PushConsumer("SqlPush", namesrv=sql.namesrv_addr, listener=listener, consume_from_where=FIRST)
    push.subscribe("SqlT", MessageSelector.by_sql("a BETWEEN 10 AND 19"))
    lite = LitePullConsumer("SqlLite", namesrv=sql.namesrv_addr, consume_from_where=FIRST)
    lite.subscribe("SqlT", MessageSelector.by_sql("region IN ('eu','us') AND a > 50"))
    polled: list[int] = []
    async with push, lite:
        while len(polled) < len(want_region):
            polled.extend(int(m.body) for m in await lite.poll(2.0))
        await wait_until(lambda: len(got) >= len(want_between))
        # mqadmin shows the expression type
        ns = ["-n", sql.namesrv_addr]
        conn = await arun_cli("consumerConnection", *ns, "-g", "SqlPush")
        assert "a BETWEEN 10 AND 19" in conn.out and "SQL92" in conn.out, conn.out
        status = (await arun_cli("consumerStatus", *ns, "-g", "SqlPush", "--json")).json()
        (client,) = status["clients"].values()
        subs = {s["topic"]: s["expressionType"] for s in client["subscriptionSet"]}
        assert subs["SqlT"] == "SQL92"
        await asyncio.sleep(0.3)  # nothing more arrives
        polled.extend(int(m.body) for m in await lite.poll(0.3))
    assert sorted(got) == sorted(want_between)
    assert sorted(polled) == sorted(want_region)

    # the blocking facade, on a thread of its own (its loop is not this one)
    want_null = expected(lambda p: "region" not in p)
    sync_got: list[int] = []

    def sync_listener(msgs, ctx):
        sync_got.extend(int(m.body) for m in msgs)
        return CONSUME_SUCCESS

    def run_sync() -> None:
        consumer = SyncPushConsumer(
            "SqlSync", sql.namesrv_addr, listener=sync_listener, consume_from_where=FIRST
        )
        consumer.subscribe("SqlT", "region IS NULL", "SQL92")
        consumer.start()
        try:
            deadline = time.monotonic() + 20
            while len(sync_got) < len(want_null) and time.monotonic() < deadline:
                time.sleep(0.05)  # polling a thread-side list: no event to await across loops
        finally:
            consumer.shutdown()

    await asyncio.to_thread(run_sync)
    assert sorted(sync_got) == sorted(want_null)


async def test_retries_are_filtered_like_the_topic(sql: Cluster) -> None:
    """Retried messages are evaluated against the group's current expression of their original
    topic (filterSupportRetry): after the expression narrows, retries outside it stay back."""
    await produce(sql, "SqlRetry", n=40)
    seen: dict[int, int] = {}

    async def listener(msgs, ctx):
        for m in msgs:
            seen[int(m.body)] = seen.get(int(m.body), 0) + 1
        ctx.delay_level_when_next_consume = 2  # 5 s (store config above)
        # every first delivery fails: the message comes back through %RETRY%SqlRetryG
        return RECONSUME_LATER if any(m.reconsume_times == 0 for m in msgs) else CONSUME_SUCCESS

    consumer = PushConsumer(
        "SqlRetryG", namesrv=sql.namesrv_addr, listener=listener, consume_from_where=FIRST
    )
    consumer.subscribe("SqlRetry", MessageSelector.by_sql("a >= 30"))
    async with consumer:
        await wait_until(lambda: set(seen) >= set(range(30, 40)))
        # narrow the expression before the retries are due, and tell the broker now
        consumer.subscribe("SqlRetry", MessageSelector.by_sql("a >= 35"))
        await consumer.instance.send_heartbeat_to_all_brokers()
        await wait_until(lambda: all(seen.get(i) == 2 for i in range(35, 40)), timeout=30)
        await asyncio.sleep(1.5)
    assert set(seen) == set(range(30, 40))  # nothing below 30, ever
    assert [seen[i] for i in range(30, 35)] == [1] * 5  # their retries were filtered out


async def test_start_fails_on_a_broker_without_property_filter(pmq: Cluster) -> None:
    await pmq.create_topic("NoSql", queues=1)
    push = PushConsumer("NoSqlG", namesrv=pmq.namesrv_addr, listener=lambda m, c: CONSUME_SUCCESS)
    push.subscribe("NoSql", MessageSelector.by_sql("a > 3"))
    with pytest.raises(RemoteSystemError, match="does not support consumer to filter message by SQL92"):
        await push.start()
    lite = LitePullConsumer("NoSqlL", namesrv=pmq.namesrv_addr)
    lite.subscribe("NoSql", "a > 3", "SQL92")
    with pytest.raises(RemoteSystemError, match="SQL92"):
        await lite.start()


def test_invalid_expressions_fail_at_subscribe() -> None:
    with pytest.raises(MessageValidationError, match="line 1, column 4"):
        MessageSelector.by_sql("a >")
    consumer = PushConsumer("BadSql", namesrv="127.0.0.1:1", listener=lambda m, c: CONSUME_SUCCESS)
    with pytest.raises(MessageValidationError, match="nested deeper"):
        consumer.subscribe("T", "(" * 10_000 + "a", "SQL92")
    assert MessageSelector.by_tag(None) == MessageSelector("TAG", "*")
