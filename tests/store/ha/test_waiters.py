"""GroupTransfer: the SYNC_MASTER decisions and the one FIFO of waiting puts (no sockets)."""

from __future__ import annotations

import asyncio

from pocketmq.store import PutMessageStatus
from pocketmq.store.ha.waiters import GroupTransfer

OK = PutMessageStatus.PUT_OK
TIMEOUT = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
NOT_AVAILABLE = PutMessageStatus.SLAVE_NOT_AVAILABLE


def _gt(slaves: int = 1, timeout_ms: int = 200, fallbehind: int = 1000) -> tuple[GroupTransfer, list[int]]:
    wakes: list[int] = []
    gt = GroupTransfer(
        slave_count=lambda: slaves,
        wakeup=lambda: wakes.append(1),
        timeout_ms=timeout_ms,
        fallbehind_max=fallbehind,
    )
    return gt, wakes


async def test_decided_at_once():
    gt, _ = _gt(slaves=0)
    assert gt.add(100, print, None) is NOT_AVAILABLE  # no slave
    gt, _ = _gt(fallbehind=1000)
    assert gt.add(1000, print, None) is NOT_AVAILABLE  # the slave is 1000 behind: not in sync
    gt.on_ack(500)
    assert gt.add(500, print, None) is OK  # already acknowledged
    assert gt.waiting == 0


async def test_acks_resolve_a_prefix_in_order_and_wake_the_transfer():
    gt, wakes = _gt()
    done: list[tuple[str, PutMessageStatus]] = []
    for end, name in ((100, "a"), (200, "b"), (300, "c")):
        assert gt.add(end, lambda arg, st: done.append((arg, st)), name) is None
    assert len(wakes) == 3 and gt.waiting == 3
    gt.on_ack(250)
    assert done == [("a", OK), ("b", OK)]
    gt.on_ack(200)  # a stale report changes nothing
    assert gt.acked == 250 and gt.waiting == 1
    gt.on_ack(300)
    assert done[-1] == ("c", OK) and gt.waiting == 0


async def test_timeout_and_the_future_form():
    gt, _ = _gt(timeout_ms=100)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    first = asyncio.ensure_future(gt.wait_replicated(100))
    await asyncio.sleep(0.05)
    second = asyncio.ensure_future(gt.wait_replicated(200))
    assert await first is TIMEOUT
    assert 0.09 <= loop.time() - t0 < 0.2 and not second.done()
    assert await second is TIMEOUT  # its own deadline, 50 ms later
    gt.on_ack(150)
    assert await gt.wait_replicated(150) is OK


async def test_close_answers_every_waiter():
    gt, _ = _gt(timeout_ms=10_000)
    done: list[PutMessageStatus] = []
    gt.add(10, lambda _a, st: done.append(st), None)
    gt.close()
    assert done == [TIMEOUT] and gt.waiting == 0
