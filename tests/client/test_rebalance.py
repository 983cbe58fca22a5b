from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.client.consumer.rebalance import (
    STRATEGIES,
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_consistent_hash,
    config_strategy,
    mq_java_str,
    strategy_name,
)
from pocketmq.client.message import MessageQueue


def mqs(n: int, brokers: int = 2) -> list[MessageQueue]:
    return sorted(
        MessageQueue("T", f"broker-{b}", i)
        for b in range(brokers)
        for i in range(n // brokers + (b < n % brokers))
    )


def cids(n: int) -> list[str]:
    return sorted(f"10.0.0.{i}@{i}" for i in range(n))


def test_averagely_8_queues_3_consumers() -> None:
    q = mqs(8)
    c = cids(3)
    parts = [allocate_averagely("G", cid, q, c) for cid in c]
    assert [len(p) for p in parts] == [3, 3, 2]
    assert parts[0] == q[:3] and parts[1] == q[3:6] and parts[2] == q[6:]


def test_more_consumers_than_queues() -> None:
    q = mqs(2)
    c = cids(4)
    parts = [allocate_averagely("G", cid, q, c) for cid in c]
    assert [len(p) for p in parts] == [1, 1, 0, 0]


def test_by_circle() -> None:
    q = mqs(8)
    c = cids(3)
    assert allocate_averagely_by_circle("G", c[1], q, c) == [q[1], q[4], q[7]]


def test_unknown_consumer_gets_nothing_and_empty_inputs_raise() -> None:
    q = mqs(4)
    for strategy in STRATEGIES.values():
        assert strategy("G", "stranger", q, cids(2)) == []
        with pytest.raises(ValueError):
            strategy("G", "a", [], ["a"])
        with pytest.raises(ValueError):
            strategy("G", "a", q, [])
        with pytest.raises(ValueError):
            strategy("G", "", q, ["a"])


@given(st.integers(1, 40), st.integers(1, 12), st.sampled_from(sorted(STRATEGIES)))
def test_every_strategy_partitions_the_queues(n_mq: int, n_cid: int, name: str) -> None:
    q = mqs(n_mq, brokers=3)
    c = cids(n_cid)
    strategy = STRATEGIES[name]
    parts = [strategy("G", cid, q, c) for cid in c]
    flat = [m for p in parts for m in p]
    assert sorted(flat) == q  # every queue exactly once
    if name != "CONSISTENT_HASH":
        sizes = [len(p) for p in parts]
        assert max(sizes) - min(sizes) <= 1


def test_consistent_hash_moves_little_when_a_consumer_joins() -> None:
    q = mqs(64, brokers=4)
    before = cids(4)
    after = sorted([*before, "10.0.0.99@99"])
    own_before = {cid: set(allocate_consistent_hash("G", cid, q, before)) for cid in before}
    own_after = {cid: set(allocate_consistent_hash("G", cid, q, after)) for cid in after}
    for cid in before:
        # existing members only lose queues (to the newcomer), never gain
        assert own_after[cid] <= own_before[cid]


def test_consistent_hash_matches_java_key_format() -> None:
    mq = MessageQueue("TopicTest", "broker-a", 3)
    assert mq_java_str(mq) == "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"


def test_config_strategy_and_names() -> None:
    fixed = [MessageQueue("T", "b", 1)]
    strategy = config_strategy(fixed)
    assert strategy("G", "x", mqs(4), ["x", "y"]) == fixed
    assert strategy_name(allocate_averagely) == "AVG"
    assert strategy_name(strategy) == "allocate_by_config"
