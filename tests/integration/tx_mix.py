"""A transactional workload shared by the acceptance and crash tests (not a test module).

Message ``i`` runs a local transaction whose outcome the :class:`Ledger` plans: 80 % commit,
10 % roll back, 10 % UNKNOW first (the check answers commit for every other one of them, rollback for the rest).
The ledger is the producer's "local database": the checker answers from it, so a half whose
local transaction never ran (the send failed on the client side but was stored) is rolled back.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pocketmq.client import (
    CONSUME_SUCCESS,
    ConsumeFromWhere,
    Message,
    Producer,
    PushConsumer,
    TransactionState,
)
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import decode_messages
from pocketmq.remoting.protocol.registration import KVTable
from pocketmq.testing.wire import Wire

COMMIT, ROLLBACK, UNKNOW = (
    TransactionState.COMMIT_MESSAGE,
    TransactionState.ROLLBACK_MESSAGE,
    TransactionState.UNKNOW,
)


def plan(i: int) -> TransactionState:
    """80 % commit, 10 % rollback, 10 % UNKNOW."""
    r = i % 10
    return ROLLBACK if r == 8 else UNKNOW if r == 9 else COMMIT


def check_answer(i: int) -> TransactionState:
    """What the local database says when the broker asks (for the UNKNOW ones: half commit)."""
    return COMMIT if (i // 10) % 2 == 0 else ROLLBACK


@dataclass
class Ledger:
    #: key → the final state of its local transaction (absent: it never ran)
    local: dict[str, TransactionState] = field(default_factory=dict)
    checks: Counter[str] = field(default_factory=Counter)
    #: key → monotonic times its checks arrived
    check_times: dict[str, list[float]] = field(default_factory=dict)
    send_failures: int = 0
    #: set to end :func:`produce_with` after the transactions in progress
    stop: bool = False

    async def execute_local(self, msg: Message, result: Any) -> TransactionState:
        i = int(msg.keys or "0")
        state = plan(i)
        self.local[str(i)] = check_answer(i) if state is UNKNOW else state
        return state

    async def checker(self, msg: Any) -> TransactionState:
        key = msg.keys or ""
        self.checks[key] += 1
        self.check_times.setdefault(key, []).append(time.monotonic())
        return self.local.get(key, ROLLBACK)

    def expected(self) -> set[str]:
        return {k for k, s in self.local.items() if s is COMMIT}


async def produce(
    namesrv: str, topic: str, keys: range, ledger: Ledger, *, concurrency: int = 32, group: str = "TxPG"
) -> None:
    """Send every key in a transaction (``concurrency`` at a time); failed sends are counted."""
    async with Producer(group, namesrv=namesrv, transaction_checker=ledger.checker) as producer:
        await produce_with(producer, topic, keys, ledger, concurrency=concurrency)


async def produce_with(
    producer: Producer,
    topic: str,
    keys: range,
    ledger: Ledger,
    *,
    concurrency: int,
    pause_on_failure: float = 0.0,
) -> None:
    """Each key once (a failed send is not retried: its half may be stored, and is rolled back)."""
    it = iter(keys)

    async def worker() -> None:
        for i in it:
            if ledger.stop:
                return
            try:
                await producer.send_in_transaction(
                    Message(topic, str(i).encode(), keys=str(i)), ledger.execute_local
                )
            except Exception:
                ledger.send_failures += 1
                if pause_on_failure:
                    await asyncio.sleep(pause_on_failure)  # pacing while the broker is down

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def consumer(namesrv: str, topic: str, got: list[Any], group: str = "TxCG") -> PushConsumer:
    async def listener(msgs: list[Any], ctx: Any) -> Any:
        got.extend(msgs)
        return CONSUME_SUCCESS

    pc = PushConsumer(
        group,
        namesrv=namesrv,
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    pc.subscribe(topic, "*")
    return pc


async def runtime_info(broker_addr: str) -> dict[str, str]:
    w = Wire(broker_addr)
    try:
        r = await w.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        return KVTable.decode(r.body or b"").table
    finally:
        await w.close()


async def all_resolved(broker_addr: str) -> bool:
    """The check service's progress reached the half queue's end: nothing is pending."""
    try:
        info = await runtime_info(broker_addr)
    except Exception:
        return False
    progress, end = info["transactionHalfOffset"].split(",")
    return progress == end


async def topic_total(broker_addr: str, topic: str = "TxAccept", queues: int = 4) -> int:
    """Messages stored in ``topic`` (the sum of its queues' max offsets)."""
    w = Wire(broker_addr)
    try:
        total = 0
        for q in range(queues):
            r = await w.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})
            total += int(r.ext("offset") or 0)
        return total
    finally:
        await w.close()


async def stored_keys(broker_addr: str, topic: str = "TxAccept", queues: int = 4) -> Counter[str]:
    """Every message stored in ``topic`` by key, read with plain pulls from offset 0."""
    w = Wire(broker_addr)
    keys: Counter[str] = Counter()
    try:
        for q in range(queues):
            offset = 0
            while True:
                r = await w.pull(topic, q, offset, group="TxAudit", sys_flag=0x4, suspend_ms=0)
                if r.code != ResponseCode.SUCCESS:
                    break
                keys.update(m.keys or "" for m in decode_messages(r.body or b""))
                offset = int(r.ext_fields["nextBeginOffset"])
    finally:
        await w.close()
    return keys
