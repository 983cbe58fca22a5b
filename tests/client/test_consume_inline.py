"""``ConsumeMessageConcurrentlyService``: a consume request runs its listener call in the pull's
read (``submit``) while a worker waits idle; a call that awaits goes on in that worker. The
RocketMQ rules still hold: ``consume_thread_max`` calls at most, FIFO, ``consume_timeout``,
offsets after the listener, graceful stop."""

from __future__ import annotations

import asyncio
from typing import Any

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


async def test_a_listener_that_does_not_await_runs_in_submit_and_commits() -> None:
    host = Host()
    seen: list[int] = []

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        seen.extend(m.queue_offset for m in msgs)
        return OK

    svc = service(host, listener)
    await asyncio.sleep(0)  # the workers wait
    pq = ProcessQueue()
    svc.submit(put(pq, range(3)), pq, MQ, True)
    assert seen == [0, 1, 2]  # in submit itself: no worker turn
    assert host.offset_store.table[MQ] == 3 and pq.msg_count == 0
    assert svc.backlog == 0 and svc._running == 0
    await svc.stop()


async def test_calls_that_await_are_bounded_by_consume_thread_max_in_fifo_order() -> None:
    host = Host(consume_thread_max=2)
    started: list[int] = []
    running = [0, 0]  # now, most
    release = asyncio.Event()

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        started.append(msgs[0].queue_offset)
        running[0] += 1
        running[1] = max(running)
        await release.wait()
        running[0] -= 1
        return OK

    svc = service(host, listener)
    await asyncio.sleep(0)
    pq = ProcessQueue()
    svc.submit(put(pq, range(5)), pq, MQ, True)
    assert started == [0]  # the first began in submit; the rest wait (the one idle worker took it)
    for _ in range(5):
        await asyncio.sleep(0)
    assert started == [0, 1] and running[1] == 2 and svc.backlog == 3
    release.set()
    for _ in range(30):
        await asyncio.sleep(0)
    assert started == [0, 1, 2, 3, 4] and running[1] == 2
    assert host.offset_store.table[MQ] == 5 and pq.msg_count == 0 and svc._running == 0
    await svc.stop()


async def test_a_call_begun_in_submit_that_awaits_past_consume_timeout_is_reconsumed_later() -> None:
    host = Host(consume_timeout=0.0005)  # 30 ms
    calls: list[int] = []

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        calls.append(msgs[0].queue_offset)
        if msgs[0].queue_offset == 0:
            await asyncio.Event().wait()  # never ends: the sweeper cancels it
        return OK

    svc = service(host, listener)
    await asyncio.sleep(0)
    pq = ProcessQueue()
    svc.submit(put(pq, range(1)), pq, MQ, True)
    await asyncio.sleep(0.2)
    assert host.sent_back == [0]  # RECONSUME_LATER: sent back, then acknowledged
    assert host.offset_store.table[MQ] == 1 and svc._running == 0
    assert all(not s.deadline and not s.timed_out for s in svc._slots)
    svc.submit(put(pq, range(1, 3)), pq, MQ, True)  # the worker that timed it out is still there
    assert calls == [0, 1, 2] and host.offset_store.table[MQ] == 3
    await svc.stop()


async def test_graceful_stop_waits_for_a_call_begun_in_submit() -> None:
    host = Host()
    done: list[int] = []

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        await asyncio.sleep(0.05)
        done.append(msgs[0].queue_offset)
        return OK

    svc = service(host, listener)
    await asyncio.sleep(0)
    pq = ProcessQueue()
    svc.submit(put(pq, range(1)), pq, MQ, True)
    await svc.stop(grace=1.0)
    assert done == [0] and host.offset_store.table[MQ] == 1
