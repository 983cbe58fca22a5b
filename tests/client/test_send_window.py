"""send_async / submit past ``max_in_flight``: wait for a slot (RocketMQ's async semaphore), never
raise; the wait counts in the send timeout (real MQClientAPI over a gated fake remoting layer)."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client import Message, SendStatus
from pocketmq.client.errors import RemotingTimeoutError
from pocketmq.client.producer.window import SendWindow
from pocketmq.remoting.protocol.command import RemotingCommand

from .test_producer_unit import make_producer, ok


class Gate:
    """Holds every request until :meth:`open` (or for ever); counts the requests written."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.written = 0
        self.changed = asyncio.Event()

    async def wait_written(self, n: int) -> None:
        while self.written < n:
            self.changed.clear()
            await self.changed.wait()

    def install(self, producer) -> None:
        remoting = producer._sender.instance.remoting
        plain = remoting.invoke

        async def invoke(
            addr: str, request: RemotingCommand, timeout: float | None = None
        ) -> RemotingCommand:
            self.written += 1
            self.changed.set()
            await self.opened.wait()
            return await plain(addr, request, timeout)

        remoting.invoke = invoke


async def _turns(n: int = 20) -> None:
    """Let the loop run ``n`` turns (to show that something did NOT happen)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def test_send_async_past_max_in_flight_waits_for_a_slot_instead_of_raising() -> None:
    producer, _ = make_producer(ok, max_in_flight=2)
    gate = Gate()
    gate.install(producer)
    futs = [producer.send_async(Message("T", b"%d" % i)) for i in range(5)]  # raised before
    await gate.wait_written(2)
    await _turns()
    assert gate.written == 2 and producer._window.busy == 2
    gate.opened.set()
    results = await asyncio.gather(*futs)
    assert [r.send_status for r in results] == [SendStatus.SEND_OK] * 5
    assert gate.written == 5 and producer._window.busy == 0 and not producer._inflight


async def test_a_send_that_gets_no_slot_within_its_timeout_fails_with_a_timeout() -> None:
    producer, _ = make_producer(ok, max_in_flight=1)
    gate = Gate()
    gate.install(producer)
    first = producer.send_async(Message("T", b"first"))
    got: list = []
    late = producer.send_async(Message("T", b"late"), lambda r, e: got.append((r, e)), timeout=0.2)
    with pytest.raises(RemotingTimeoutError, match="max_in_flight=1"):
        await late
    await _turns()
    assert gate.written == 1  # the late message never left
    assert got and got[0][0] is None and isinstance(got[0][1], RemotingTimeoutError)
    gate.opened.set()
    assert (await first).send_status is SendStatus.SEND_OK
    assert (
        producer._window.busy == 0
        and not producer._window.waiters
        or all(w.done() for w in producer._window.waiters)
    )


async def test_submit_waits_before_starting_the_send() -> None:
    producer, _ = make_producer(ok, max_in_flight=1)
    gate = Gate()
    gate.install(producer)
    first = await producer.submit(Message("T", b"1"))
    second = asyncio.ensure_future(producer.submit(Message("T", b"2")))
    await gate.wait_written(1)
    await _turns()
    assert not second.done() and gate.written == 1  # the caller is held back
    gate.opened.set()
    assert (await first).send_status is SendStatus.SEND_OK
    assert (await (await second)).send_status is SendStatus.SEND_OK
    assert gate.written == 2


async def test_submit_times_out_when_no_slot_frees() -> None:
    producer, _ = make_producer(ok, max_in_flight=1)
    gate = Gate()
    gate.install(producer)
    first = await producer.submit(Message("T", b"1"))
    with pytest.raises(RemotingTimeoutError):
        await producer.submit(Message("T", b"2"), timeout=0.1)
    gate.opened.set()
    await first
    assert gate.written == 1


async def test_window_wakes_waiters_in_order_and_passes_a_cancelled_wakeup_on() -> None:
    window = SendWindow(1)
    window.busy = 1
    order: list[int] = []

    async def waiter(i: int) -> None:
        await window.wait(5.0)
        order.append(i)

    tasks = [asyncio.ensure_future(waiter(i)) for i in range(3)]
    await _turns()
    assert len(window.waiters) == 3
    window.release()  # wakes waiter 0 ...
    tasks[0].cancel()  # ... which is cancelled before it runs: waiter 1 gets the slot
    await _turns()
    assert order == [1] and window.busy == 1
    window.release()
    await tasks[2]
    assert order == [1, 2]
    window.release()
    assert window.busy == 0
