"""``ConsumeMessageConcurrentlyService``: a plain listener is called in the pull's read
(``submit``) while a worker waits idle; what must await (an awaitable it returned, a send-back)
goes to that worker's task, unstepped. An ``async def`` listener is never called outside a task.
The RocketMQ rules still hold: ``consume_thread_max`` calls at most, FIFO, ``consume_timeout``,
offsets after the listener, graceful stop."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from pocketmq.client.config import PushConsumerConfig
from pocketmq.client.consumer.consume_service import ConsumeMessageConcurrentlyService
from pocketmq.client.consumer.listener import ConsumeConcurrentlyStatus
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.stats import ConsumeStats
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.message import MessageExt

MQ = MessageQueue("T", "b", 0)
OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def msg(offset: int) -> MessageExt:
    return MessageExt(
        0, 0, 0, 0, 0, offset, offset, 0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 2), 0, 0,
        b"m%d" % offset, "T", "", f"id{offset}",
    )  # fmt: skip


class Offsets:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if not increase_only or offset > self.table.get(mq, -1):
            self.table[mq] = offset


class Host:
    """The consume service's view of its push consumer (``ConsumeHost``)."""

    group = "G"
    retry_topic = "%RETRY%G"

    def __init__(self, **options: Any) -> None:
        self.config = PushConsumerConfig(consumer_group="G", **options)
        self.stats = ConsumeStats()
        self.offset_store = Offsets()
        self.sent_back: list[int] = []

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool:
        self.sent_back.append(msg.queue_offset)
        return True


def service(host: Host, listener: Any) -> ConsumeMessageConcurrentlyService:
    svc = ConsumeMessageConcurrentlyService(host, listener)  # type: ignore[arg-type]
    svc.start()
    return svc


def put(pq: ProcessQueue, offsets: range) -> list[MessageExt]:
    msgs = [msg(o) for o in offsets]
    pq.put_messages(msgs)
    return msgs


async def test_a_plain_listener_runs_in_submit_and_commits() -> None:
    host = Host()
    seen: list[int] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        seen.extend(m.queue_offset for m in msgs)
        return OK

    svc = service(host, listener)
    await asyncio.sleep(0)  # the workers wait
    pq = ProcessQueue()
    assert svc.submit(put(pq, range(3)), pq, MQ, True) is True
    assert seen == [0, 1, 2]  # in submit itself: no worker turn
    assert host.offset_store.table[MQ] == 3 and pq.msg_count == 0
    assert svc.backlog == 0 and svc._running == 0
    await svc.stop()


async def test_an_async_listener_is_called_by_a_worker_task_never_in_submit() -> None:
    host = Host()
    var: contextvars.ContextVar[int] = contextvars.ContextVar("v", default=-1)
    seen: list[tuple[int, bool, int]] = []

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        var.set(msgs[0].queue_offset)
        async with asyncio.timeout(5):  # RuntimeError outside a task
            await asyncio.sleep(0)
        seen.append((msgs[0].queue_offset, asyncio.current_task() is not None, var.get()))
        return OK

    svc = service(host, listener)
    await asyncio.sleep(0)
    pq = ProcessQueue()
    assert svc.submit(put(pq, range(1)), pq, MQ, True) is False
    assert seen == [] and svc.backlog == 1  # queued for a worker
    for _ in range(5):
        await asyncio.sleep(0)
    assert seen == [(0, True, 0)] and var.get() == -1
    assert host.offset_store.table[MQ] == 1 and pq.msg_count == 0 and svc._running == 0
    await svc.stop()


async def test_the_awaitable_a_plain_listener_returns_is_awaited_unstepped_in_a_worker() -> None:
    host = Host()
    steps: list[tuple[str, bool]] = []

    async def rest() -> ConsumeConcurrentlyStatus:
        steps.append(("awaited", asyncio.current_task() is not None))
        async with asyncio.timeout(5):
            await asyncio.sleep(0)
        return OK

    def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        steps.append(("called", asyncio.current_task() is not None))
        return rest()

    svc = service(host, listener)
    await asyncio.sleep(0)
    pq = ProcessQueue()
    assert svc.submit(put(pq, range(1)), pq, MQ, True) is False
    assert steps == [("called", True)] and svc._running == 1  # (this test's task calls submit)
    for _ in range(5):
        await asyncio.sleep(0)
    assert steps == [("called", True), ("awaited", True)]
    assert host.offset_store.table[MQ] == 1 and pq.msg_count == 0 and svc._running == 0
    await svc.stop()


async def test_failed_messages_of_a_call_in_submit_are_sent_back_by_a_worker() -> None:
    host = Host()
    svc = service(host, lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    await asyncio.sleep(0)
    pq = ProcessQueue()
    assert svc.submit(put(pq, range(2)), pq, MQ, True) is False
    assert host.sent_back == [] and MQ not in host.offset_store.table
    for _ in range(5):
        await asyncio.sleep(0)
    assert host.sent_back == [0, 1] and host.offset_store.table[MQ] == 2 and svc._running == 0
    await svc.stop()


@pytest.mark.parametrize("kind", ["async def", "returns an awaitable"])
async def test_calls_that_await_are_bounded_by_consume_thread_max_in_fifo_order(kind: str) -> None:
    host = Host(consume_thread_max=2)
    started: list[int] = []
    running = [0, 0]  # now, most
    release = asyncio.Event()

    async def call(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        started.append(msgs[0].queue_offset)
        running[0] += 1
        running[1] = max(running)
        await release.wait()
        running[0] -= 1
        return OK

    async def async_listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        return await call(msgs)

    svc = service(host, async_listener if kind == "async def" else (lambda msgs, ctx: call(msgs)))
    await asyncio.sleep(0)
    pq = ProcessQueue()
    svc.submit(put(pq, range(5)), pq, MQ, True)
    for _ in range(5):
        await asyncio.sleep(0)
    assert started == [0, 1] and running[1] == 2 and svc.backlog == 3
    release.set()
    for _ in range(30):
        await asyncio.sleep(0)
    assert started == [0, 1, 2, 3, 4] and running[1] == 2
    assert host.offset_store.table[MQ] == 5 and pq.msg_count == 0 and svc._running == 0
    await svc.stop()


async def test_an_awaitable_from_a_call_in_submit_past_consume_timeout_is_reconsumed_later() -> None:
    host = Host(consume_timeout=0.0005)  # 30 ms
    calls: list[int] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> Any:
        calls.append(msgs[0].queue_offset)
        if msgs[0].queue_offset == 0:
            return asyncio.Event().wait()  # never ends: the sweeper cancels it
        return OK

    svc = service(host, listener)
    await asyncio.sleep(0)
    pq = ProcessQueue()
    svc.submit(put(pq, range(1)), pq, MQ, True)
    await asyncio.sleep(0.2)
    assert host.sent_back == [0]  # RECONSUME_LATER: sent back, then acknowledged
    assert host.offset_store.table[MQ] == 1 and svc._running == 0
    assert all(not s.deadline and not s.timed_out for s in svc._slots)
    assert svc.submit(put(pq, range(1, 3)), pq, MQ, True) is True  # the worker that timed it out is still there
    assert calls == [0, 1, 2] and host.offset_store.table[MQ] == 3
    await svc.stop()


async def test_graceful_stop_waits_for_an_awaitable_from_a_call_in_submit() -> None:
    host = Host()
    done: list[int] = []

    async def rest(offset: int) -> ConsumeConcurrentlyStatus:
        await asyncio.sleep(0.05)
        done.append(offset)
        return OK

    svc = service(host, lambda msgs, ctx: rest(msgs[0].queue_offset))
    await asyncio.sleep(0)
    pq = ProcessQueue()
    svc.submit(put(pq, range(1)), pq, MQ, True)
    await svc.stop(grace=1.0)
    assert done == [0] and host.offset_store.table[MQ] == 1
