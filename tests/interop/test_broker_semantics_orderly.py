"""Ordered consumption with the real C++ client (rocketmq 0.4.4 = librocketmq 1.x) against an
in-process name server + broker (issue 6); the broker runs in the test's event loop so its lock
table can be audited.

* The C++ orderly push consumer (LOCK_BATCH_MQ at start and every 20 s, UNLOCK_BATCH_MQ at
  shutdown) receives each queue's messages in send order, also across a consumer restart (the
  second consumer of the group resumes where the first stopped: nothing old again).
* Two orderly consumers of one group never hold the same queue at once: every lock the broker
  grants is audited (the queue was free, already the requester's, or its holder had not renewed
  for the 60 s expiry), and each consumer sees each queue's messages in order.

Messages go to a queue chosen by ``send_orderly`` (C++ selector ``key % queue count``).
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pocketmq.broker.rebalance_lock import RebalanceLockManager
from pocketmq.remoting.protocol.bodies import MessageQueue
from pocketmq.testing import Cluster, cluster
from tests.interop import drivers

pytestmark = pytest.mark.interop

QUEUES = 4
PER_QUEUE = 8


class AuditedLocks(RebalanceLockManager):
    """The broker's lock manager, checking every grant against the table it replaces."""

    def __init__(self) -> None:
        super().__init__()
        self.violations: list[str] = []
        self.granted: dict[str, set[MessageQueue]] = defaultdict(set)

    def try_lock_batch(self, group: str, mqs: Any, client_id: str, now_ms: int) -> list[MessageQueue]:
        mqs = list(mqs)
        before = dict(self.table.get(group, {}))
        granted = super().try_lock_batch(group, mqs, client_id, now_ms)
        for mq in granted:
            holder = before.get(mq)
            if holder is not None and holder[0] != client_id and now_ms - holder[1] <= self.lock_max_live_ms:
                self.violations.append(f"{mq} granted to {client_id} while {holder[0]} held it")
            self.granted[client_id].add(mq)
        return granted


@pytest.fixture
async def pmq(tmp_path) -> AsyncIterator[Cluster]:
    drivers.cpp_available()
    async with cluster(tmp_path / "pmq") as c:
        await c.create_topic("Ord", QUEUES, order=True)
        # the client-manage processor holds the lock manager it was built with: swap it there too
        broker = c.brokers[0]
        broker.rebalance_lock_manager = broker.client_manage_processor.locks = AuditedLocks()
        yield c


async def produce_per_queue(ns: str, batch: str) -> None:
    for q in range(QUEUES):
        sent = await drivers.run_cpp_produce_async(
            ns, "Ord", PER_QUEUE, orderly_key=str(q), keys_prefix=f"{batch}{q}-"
        )
        assert len(sent) == PER_QUEUE and {e["queue_id"] for e in sent} == {q}


async def until(pred: Any, timeout: float) -> None:
    """Poll ``pred`` (state of another process) every 50 ms for up to ``timeout`` seconds."""
    for _ in range(int(timeout / 0.05)):
        if pred():
            return
        await asyncio.sleep(0.05)


def sequence(msgs: list[dict[str, Any]]) -> dict[int, list[tuple[str, int]]]:
    """Per queue, the (batch, index) of each delivery, in delivery order."""
    out: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for m in msgs:
        match = re.fullmatch(r"([a-z]+)(\d+)-(\d+)", m["keys"])
        assert match is not None, m["keys"]
        assert int(match.group(2)) == m["queue_id"], m
        out[m["queue_id"]].append((match.group(1), int(match.group(3))))
    return out


async def test_each_queue_in_send_order_across_a_consumer_restart(pmq: Cluster) -> None:
    ns = pmq.namesrv_addr
    total = QUEUES * PER_QUEUE
    await produce_per_queue(ns, "a")
    opts: dict[str, Any] = {"group": "OrderlyG", "orderly": True, "timeout": 60}
    async with await drivers.start_cpp_consumer_async(ns, "Ord", expect=total, **opts) as c:
        first = await c.wait()
    assert first.ok, first.describe()
    await produce_per_queue(ns, "b")
    async with await drivers.start_cpp_consumer_async(ns, "Ord", expect=total, **opts) as c:
        second = await c.wait()
    assert second.ok, second.describe()
    for run, batch in ((first, "a"), (second, "b")):
        seq = sequence(run.messages)
        assert set(seq) == set(range(QUEUES))
        for q, items in seq.items():
            assert items == [(batch, i) for i in range(PER_QUEUE)], (q, items)
    locks: Any = pmq.brokers[0].rebalance_lock_manager
    assert not locks.violations
    assert len(locks.granted) == 2  # each run locked the queues under its own client id
    # both consumers unlocked everything at shutdown
    assert not locks.table.get("OrderlyG")


async def test_two_orderly_consumers_never_hold_the_same_queue(pmq: Cluster) -> None:
    ns = pmq.namesrv_addr
    total = QUEUES * PER_QUEUE
    opts: dict[str, Any] = {"group": "TwoG", "orderly": True, "timeout": 60}
    locks: Any = pmq.brokers[0].rebalance_lock_manager
    a = await drivers.start_cpp_consumer_async(ns, "Ord", expect=total, **opts)
    b: Any = None
    try:
        await a.wait_started()
        await until(lambda: len(locks.granted) >= 1, 20)
        # the second one joins while the first holds every queue: the first gives half up
        # (NOTIFY_CONSUMER_IDS_CHANGED -> rebalance -> UNLOCK_BATCH_MQ) before the second gets them
        b = await drivers.start_cpp_consumer_async(ns, "Ord", expect=total, **opts)
        await b.wait_started()
        await until(lambda: len(locks.granted) >= 2, 20)
        await produce_per_queue(ns, "m")
        await until(lambda: len({m["keys"] for m in a.messages + b.messages}) >= total, 60)
    finally:
        ra = await a.stop()
        rb = await b.stop() if b is not None else None
    assert rb is not None
    delivered = {m["keys"] for m in ra.messages + rb.messages}
    assert len(delivered) == total, (ra.describe(), rb.describe())
    assert not locks.violations, locks.violations
    seqs = [sequence(run.messages) for run in (ra, rb)]
    for seq in seqs:
        assert seq, "both consumers consumed"
        for q, items in seq.items():
            assert items == [("m", i) for i in range(PER_QUEUE)], (q, items)  # all of it, in order
    assert not set(seqs[0]) & set(seqs[1])  # no queue consumed by both
