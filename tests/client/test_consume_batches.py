"""``consume_service.Batches``: the consume workers' FIFO hand-off (asyncio.Queue's semantics)."""

from __future__ import annotations

import asyncio

from pocketmq.client.consumer.consume_service import Batches
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.message import MessageQueue

MQ = MessageQueue("T", "b", 0)


def batch(n: int) -> tuple[list, ProcessQueue, MessageQueue]:
    return ([n], ProcessQueue(), MQ)  # type: ignore[list-item]


async def test_fifo_and_waiting_getters_woken_in_order() -> None:
    q = Batches()
    got: list[int] = []

    async def worker(tag: int) -> None:
        item = await q.get()
        got.append(tag * 100 + item[0][0])  # type: ignore[operator]

    workers = [asyncio.create_task(worker(t)) for t in (1, 2)]
    await asyncio.sleep(0)  # both wait
    q.put_nowait(batch(7))
    q.put_nowait(batch(8))
    await asyncio.gather(*workers)
    assert got == [107, 208]
    q.put_nowait(batch(1))
    q.put_nowait(batch(2))
    assert q.qsize() == 2
    assert [(await q.get())[0], (await q.get())[0]] == [[1], [2]]
    assert q.qsize() == 0


async def test_a_getter_cancelled_after_its_wake_up_passes_it_on() -> None:
    q = Batches()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.put_nowait(batch(5))  # wakes ``first``...
    first.cancel()  # ...which is cancelled before it runs: ``second`` gets the batch
    assert (await second)[0] == [5]
    assert first.cancelled()
    assert q.qsize() == 0
