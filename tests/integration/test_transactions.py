"""Transactional messages end to end: the SDK against a real in-process name server and broker."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Message, Producer, TransactionState
from pocketmq.remoting.protocol.message import MessageConst
from pocketmq.remoting.protocol.route import (
    CID_SYS_RMQ_TRANS,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from pocketmq.testing import Cluster, cluster
from tests.integration.support import collecting_consumer, loop_clean_at_exit  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

COMMIT, ROLLBACK, UNKNOW = (
    TransactionState.COMMIT_MESSAGE,
    TransactionState.ROLLBACK_MESSAGE,
    TransactionState.UNKNOW,
)
#: fast checks for tests: a run every 100 ms, halves due after 300 ms
FAST = {"transactionCheckInterval": 100, "transactionTimeOut": 300}


def real_total(c: Cluster, topic: str) -> int:
    store = c.brokers[0].store
    return sum(store.get_max_offset_in_queue(topic, q) for q in range(4))


async def run_mix(
    c: Cluster, topic: str, n: int, plan: Any, check_answer: Any, checks: Counter[str]
) -> tuple[set[str], dict[str, TransactionState]]:
    """Send ``n`` transactional messages; ``plan(i)`` is the local outcome, ``check_answer(key)`` the check's."""

    async def checker(msg: Any) -> TransactionState:
        key = msg.get_property(MessageConst.KEYS)
        checks[key] += 1
        return check_answer(key)

    expected: set[str] = set()
    outcomes: dict[str, TransactionState] = {}
    async with Producer("TxPG", namesrv=c.namesrv_addr, transaction_checker=checker) as producer:

        async def local(msg: Message, result: Any) -> TransactionState:
            return plan(int(msg.keys))

        for i in range(n):
            _, state = await producer.send_in_transaction(Message(topic, str(i).encode(), keys=str(i)), local)
            outcomes[str(i)] = state
            if state is COMMIT or (state is UNKNOW and check_answer(str(i)) is COMMIT):
                expected.add(str(i))
        # every transaction resolved: the committed ones are all stored in the real topic
        await wait_until(lambda: real_total(c, topic) >= len(expected), timeout=30)
        counters = c.brokers[0].transactional_message_service.counters
        await wait_until(lambda: counters.committed + counters.rolled_back >= n, timeout=30)
    return expected, outcomes


async def test_commit_rollback_and_check_back(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c", broker_config=FAST) as c:
        await c.create_topic("TxT", queues=4)
        checks: Counter[str] = Counter()

        def plan(i: int) -> TransactionState:
            return (COMMIT, ROLLBACK, UNKNOW)[i % 3]

        def answer(key: str) -> TransactionState:
            return COMMIT if int(key) % 2 == 0 else ROLLBACK

        expected, _ = await run_mix(c, "TxT", 30, plan, answer, checks)
        got: list[Any] = []
        async with collecting_consumer(c, "TxCG", "TxT", got):
            await wait_until(lambda: len(got) >= len(expected))
        keys = [m.keys for m in got]
        assert sorted(keys) == sorted(expected) and len(keys) == len(set(keys))
        # only the UNKNOW ones were checked (once, unless a run came before the answer arrived)
        assert set(checks) == {str(i) for i in range(30) if i % 3 == 2}
        assert all(1 <= v <= 15 for v in checks.values())
        for m in got:
            # Apache's committed copy keeps the half's map (TRAN_MSG, REAL_TOPIC); the sysFlag says committed
            assert m.get_property(MessageConst.TRAN_MSG) == "true" and m.get_property("REAL_TOPIC") == m.topic
            assert m.sys_flag & 0xC == 0x8 and m.uniq_key
        broker = c.brokers[0]
        svc = broker.transactional_message_service
        half_max = broker.store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        await wait_until(
            lambda: svc.half_progress == broker.store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        )
        # 30 prepares + one copy per check
        assert half_max == 30 + svc.counters.checks + svc.counters.checks_no_producer
        info = svc.runtime_info()
        assert int(info["transactionCheckCount"]) >= 10 and info["transactionCommitCount"] == str(
            len(expected)
        )
        offsets = broker.consumer_offset_manager
        assert offsets.query_offset(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, 0) == svc.half_progress
        # one op record per transaction, plus one more for each resolved by its check (the copy too)
        assert broker.store.get_max_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0) == 30 + 10


async def test_unanswered_halves_are_discarded_after_check_max(tmp_path: Path) -> None:
    config = {**FAST, "transactionCheckMax": 3}
    async with cluster(tmp_path / "c", broker_config=config) as c:
        await c.create_topic("TxD", queues=4)
        checks: Counter[str] = Counter()

        async def checker(msg: Any) -> TransactionState:
            checks[msg.keys] += 1
            return UNKNOW

        async def local(msg: Message, result: Any) -> TransactionState:
            return UNKNOW

        async with Producer("TxPG", namesrv=c.namesrv_addr, transaction_checker=checker) as producer:
            for i in range(3):
                await producer.send_in_transaction(Message("TxD", b"x", keys=str(i)), local)
            store = c.brokers[0].store
            await wait_until(
                lambda: store.get_max_offset_in_queue(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0) == 3
            )
        assert checks == Counter({"0": 3, "1": 3, "2": 3})
        assert real_total(c, "TxD") == 0
        assert c.brokers[0].transactional_message_service.counters.discarded == 3
