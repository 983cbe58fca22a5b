"""Queue allocation strategies (pure functions, Java ``AllocateMessageQueueStrategy``).

Every consumer of a group computes its own share from the same sorted inputs, so all members
must use the same strategy. Signature::

    strategy(consumer_group, current_cid, mq_all, cid_all) -> list[MessageQueue]

``mq_all`` and ``cid_all`` must be sorted (the rebalancer sorts them). Each function raises
``ValueError`` for empty inputs and returns ``[]`` when ``current_cid`` is not in ``cid_all``
(the broker has not seen our heartbeat yet).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence

from pocketmq.client.message import MessageQueue

AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


#: A strategy's own rule: (index of current_cid in cid_all, mq_all, cid_all) -> its share.
_Share = Callable[[int, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def _member_strategy(share: _Share) -> AllocateStrategy:
    """The strategy that checks its inputs (ValueError when one is empty), returns [] when
    ``current_cid`` is not in ``cid_all``, and otherwise gives ``share``'s answer."""

    def strategy(
        consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not current_cid:
            raise ValueError("current_cid is empty")
        if not mq_all:
            raise ValueError("mq_all is empty")
        if not cid_all:
            raise ValueError("cid_all is empty")
        try:
            index = list(cid_all).index(current_cid)
        except ValueError:
            return []
        return share(index, mq_all, cid_all)

    strategy.__name__ = strategy.__qualname__ = share.__name__
    strategy.__doc__ = share.__doc__
    return strategy


@_member_strategy
def allocate_averagely(
    index: int, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Contiguous blocks: with 8 queues and 3 consumers → 3, 3, 2 (Java ``...Averagely``)."""
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n_mq - start)
    return [mq_all[(start + i) % n_mq] for i in range(max(count, 0))]


@_member_strategy
def allocate_averagely_by_circle(
    index: int, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Round robin: consumer ``i`` gets queues ``i, i+n, i+2n ...`` (Java ``...ByCircle``)."""
    n = len(cid_all)
    return [mq for i, mq in enumerate(mq_all) if i % n == index]


def mq_java_str(mq: MessageQueue) -> str:
    """Java ``MessageQueue.toString()``: the key consistent hashing places on the ring."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def _md5_hash(key: str) -> int:
    digest = hashlib.md5(key.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big")


def consistent_hash_strategy(virtual_node_cnt: int = 10) -> AllocateStrategy:
    """Java ``AllocateMessageQueueConsistentHash``: MD5 ring with ``cid-i`` virtual nodes.

    Queues move only between the consumers that join or leave.
    """
    if virtual_node_cnt < 1:
        raise ValueError("virtual_node_cnt must be >= 1")

    @_member_strategy
    def allocate_consistent_hash(
        index: int, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        current_cid = cid_all[index]
        ring: dict[int, str] = {}
        for cid in cid_all:
            for i in range(virtual_node_cnt):
                ring[_md5_hash(f"{cid}-{i}")] = cid
        keys = sorted(ring)
        out = []
        for mq in mq_all:
            pos = bisect.bisect_left(keys, _md5_hash(mq_java_str(mq)))
            owner = ring[keys[pos] if pos < len(keys) else keys[0]]
            if owner == current_cid:
                out.append(mq)
        return out

    return allocate_consistent_hash


allocate_consistent_hash = consistent_hash_strategy()


def config_strategy(queues: Sequence[MessageQueue]) -> AllocateStrategy:
    """Java ``AllocateMessageQueueByConfig``: always the given queues."""
    fixed = list(queues)

    def allocate_by_config(
        consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(fixed)

    return allocate_by_config


#: Names used in ConsumerRunningInfo and accepted by the benchmark/CLI.
STRATEGIES: dict[str, AllocateStrategy] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "CONSISTENT_HASH": allocate_consistent_hash,
}


def strategy_name(strategy: AllocateStrategy) -> str:
    for name, fn in STRATEGIES.items():
        if fn is strategy:
            return name
    return getattr(strategy, "__name__", "CUSTOM")
