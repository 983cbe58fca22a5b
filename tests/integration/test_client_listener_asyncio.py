"""A push consumer's listener is ordinary asyncio code (issue 21, lsn25): an ``async def``
listener (or the awaitable a plain listener returns) runs inside a task, so
``asyncio.current_task()``, ``asyncio.timeout`` and context variables behave as in any task;
a plain listener is still called in the pull's read. Against a real in-process name server +
broker."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    Producer,
    PushConsumer,
)
from pocketmq.testing import Cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("lsn25", default="unset")


async def _in_task(body: bytes, seen: list[tuple[bytes, bool, str]]) -> ConsumeConcurrentlyStatus:
    VAR.set(body.decode())
    async with asyncio.timeout(5):  # RuntimeError outside a task
        await asyncio.sleep(0)
    seen.append((body, asyncio.current_task() is not None, VAR.get()))
    return CONSUME_SUCCESS


async def _consume(pmq: Cluster, topic: str, listener: Any) -> None:
    await pmq.create_topic(topic, queues=2)
    consumer = PushConsumer(f"CG{topic}", namesrv=pmq.namesrv_addr, listener=listener, consume_from_where=LAST)
    consumer.subscribe(topic)
    async with consumer, Producer(f"PG{topic}", namesrv=pmq.namesrv_addr) as producer:
        await consumer.wait_assigned(30.0)
        for i in range(10):
            await producer.send(Message(topic, b"m%d" % i))
        await wait_until(lambda: consumer.stats.ok >= 10)
        assert consumer.stats.failed == 0  # no RuntimeError taken as RECONSUME_LATER


async def test_an_async_listener_runs_in_a_task_with_timeout_and_context_variables(pmq: Cluster) -> None:
    seen: list[tuple[bytes, bool, str]] = []

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            assert await _in_task(m.body, seen) is CONSUME_SUCCESS
        return CONSUME_SUCCESS

    await _consume(pmq, "AsyncListener", listener)
    assert sorted(seen) == [(b"m%d" % i, True, f"m{i}") for i in range(10)]
    assert VAR.get() == "unset"  # nothing leaked into the connection's (or this) context


async def test_the_awaitable_a_plain_listener_returns_runs_in_a_task(pmq: Cluster) -> None:
    seen: list[tuple[bytes, bool, str]] = []
    plain: list[bool] = []

    def listener(msgs: list[Any], ctx: Any) -> Any:
        plain.append(asyncio.current_task() is None)  # called in the pull's read
        return _in_task(b"".join(m.body for m in msgs), seen)

    await _consume(pmq, "AwaitableListener", listener)
    assert all(task for _, task, _ in seen) and all(body.decode() == var for body, _, var in seen)
    assert sum(len(body) // 2 for body, _, _ in seen) == 10
    assert any(plain)
    assert VAR.get() == "unset"
