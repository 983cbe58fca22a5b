"""The transaction services' pure decisions, as tables (no store, no sockets)."""

from __future__ import annotations

import random

import pytest

from pocketmq.broker.transaction.bookkeeping import (
    HalfAction,
    OpenTransactions,
    OpNames,
    advance_op_progress,
    check_times,
    half_action,
    immunity_ms,
    is_over,
    is_resolved,
    keeps_resolved,
    op_bodies,
    parse_op_body,
    transaction_offset,
)

A = HalfAction


@pytest.mark.parametrize(
    ("half", "tx", "bodies"),
    [
        (7, 7, [b"7"]),  # the first half: its own offset
        (12, 7, [b"12", b"7"]),  # a check copy: its offset and its transaction's, one record each
        (0, 0, [b"0"]),
    ],
)
def test_op_bodies_round_trip(half: int, tx: int, bodies: list[bytes]) -> None:
    assert op_bodies(half, tx) == bodies
    assert [n for b in bodies for n in parse_op_body(b)] == sorted({half, tx}, key=[half, tx].index)


@pytest.mark.parametrize(
    ("body", "parsed"),
    [
        (b"", []),
        (b"abc", []),
        (b"-3", []),
        (b"1,,2", [1, 2]),  # RocketMQ 5.x batched op records
        (b"3,4,", [3, 4]),
        (b" 4 , 5", [4, 5]),  # written by hand or by another tool
        (b"\xff\xfe", []),
        (b"1,x,3", [1, 3]),
    ],
)
def test_parse_op_body_skips_garbage(body: bytes, parsed: list[int]) -> None:
    assert parse_op_body(body) == parsed


@pytest.mark.parametrize(
    ("offset", "prop", "tx"),
    [(5, None, 5), (9, "5", 5), (9, "", 9), (9, "x", 9), (9, "-1", 9)],
)
def test_transaction_offset(offset: int, prop: str | None, tx: int) -> None:
    assert transaction_offset(offset, prop) == tx


@pytest.mark.parametrize(
    ("offset", "tx", "done", "resolved"),
    [
        (5, 5, set(), False),
        (5, 5, {5}, True),
        (9, 5, {5}, True),  # the first copy was committed: every copy is resolved
        (9, 5, {9}, True),  # this copy was committed
        (9, 5, {12}, False),  # another transaction's copy
    ],
)
def test_is_resolved(offset: int, tx: int, done: set[int], resolved: bool) -> None:
    assert is_resolved(offset, tx, done) is resolved


@pytest.mark.parametrize(("raw", "n"), [(None, 0), ("", 0), ("3", 3), ("x", 0), ("-1", 0)])
def test_check_times(raw: str | None, n: int) -> None:
    assert check_times(raw) == n


@pytest.mark.parametrize(
    ("raw", "ms"), [(None, 6000), ("", 6000), ("20", 20_000), ("abc", 6000), (" 2 ", 2000)]
)
def test_immunity(raw: str | None, ms: int) -> None:
    assert immunity_ms(raw, 6000) == ms


RUN = 1_000_000  # the run began at this wall time
BASE = {
    "resolved": False, "times": 0, "check_max": 15, "now_ms": RUN, "run_start_ms": RUN, "timeout_ms": 6000,
    "immunity_raw": None, "file_reserved_ms": 72 * 3_600_000,
}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "action"),
    [
        ({"born_ms": RUN - 7000, "store_ms": RUN - 7000}, A.CHECK),  # due
        ({"born_ms": RUN - 7000, "store_ms": RUN - 7000, "resolved": True}, A.RESOLVED),
        ({"born_ms": RUN - 7000, "store_ms": RUN - 7000, "times": 15}, A.DISCARD),  # checked 15 times
        ({"born_ms": RUN - 7000, "store_ms": RUN - 7000, "times": 14}, A.CHECK),  # the 15th check
        ({"born_ms": RUN - 7000, "store_ms": RUN - 7000, "times": 15, "resolved": True}, A.RESOLVED),
        ({"born_ms": RUN - 1000, "store_ms": RUN - 1000}, A.WAIT),  # younger than transactionTimeOut
        ({"born_ms": RUN - 7000, "store_ms": RUN}, A.NEW),  # a copy this run made
        ({"born_ms": RUN - 7000, "store_ms": RUN + 5}, A.NEW),
        ({"born_ms": RUN + 5000, "store_ms": RUN - 10}, A.CHECK),  # producer clock ahead
        ({"born_ms": RUN - 73 * 3_600_000, "store_ms": RUN - 10}, A.EXPIRED),  # beyond retention
        # its own immunity: 20 s, not reached -> copied to the tail; reached -> checked
        ({"born_ms": RUN - 7000, "store_ms": RUN - 7000, "immunity_raw": "20"}, A.DEFER),
        ({"born_ms": RUN - 21_000, "store_ms": RUN - 7000, "immunity_raw": "20"}, A.CHECK),
        # a shorter immunity than transactionTimeOut applies too (and never defers)
        ({"born_ms": RUN - 3000, "store_ms": RUN - 3000, "immunity_raw": "2"}, A.CHECK),
        ({"born_ms": RUN - 1000, "store_ms": RUN - 1000, "immunity_raw": "2"}, A.WAIT),
    ],
)
def test_half_action(change: dict[str, object], action: HalfAction) -> None:
    assert half_action(**{**BASE, **change}) is action  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("progress", "ops", "half_progress", "open_txs", "new"),
    [
        (0, {}, 10, set(), 0),  # nothing read
        (0, {0: (3,), 1: (4,)}, 10, set(), 2),  # both name halves already passed
        (0, {0: (3,), 1: (12,), 2: (4,)}, 10, set(), 1),  # op 1 names a half not passed yet: wait there
        (5, {5: (), 6: (2,)}, 3, set(), 7),  # a record naming nothing is passed
        (5, {5: (3,)}, 3, set(), 5),  # names the half at the progress itself: still needed
        # a transaction resolved while open (a copy of 2 past the progress): its records stay
        (0, {0: (1,), 1: (12,), 2: (2,)}, 20, {2}, 2),
        (0, {0: (1,), 1: (2,), 2: (3,)}, 20, {2}, 1),
        (0, {0: (1, 2), 1: (3,)}, 20, {2}, 0),  # a batched record naming it (5.x)
        (0, {0: (1, 2), 1: (3,)}, 20, {7}, 2),  # open, but not named
    ],
)
def test_advance_op_progress(
    progress: int, ops: dict[int, tuple[int, ...]], half_progress: int, open_txs: set[int], new: int
) -> None:
    assert advance_op_progress(progress, ops, half_progress, open_txs) == new
    # (the service keeps a record naming one offset as the int itself)
    ints: dict[int, int | tuple[int, ...]] = {k: v[0] if len(v) == 1 else v for k, v in ops.items()}
    assert advance_op_progress(progress, ints, half_progress, open_txs) == new


@pytest.mark.parametrize(
    ("queue_offset", "tx_offset", "half_progress", "open_txs", "over", "keep"),
    [
        (3, 3, 10, set(), True, False),  # a first half passed, no copy ahead: over
        (3, 3, 10, {3}, False, True),  # ... with a copy ahead: open (kept when resolved)
        (7, 3, 10, {3}, False, False),  # an older copy of an open transaction: open
        (7, 3, 10, set(), True, False),  # ... of one that is not: over
        (10, 10, 10, set(), False, True),  # at the progress: the scan still meets it
        (12, 3, 10, {3}, False, True),  # a copy past the progress
        (0, 0, 0, set(), False, True),  # nothing passed yet
    ],
)
def test_is_over_and_keeps_resolved(
    queue_offset: int, tx_offset: int, half_progress: int, open_txs: set[int], over: bool, keep: bool
) -> None:
    assert is_over(queue_offset, tx_offset, half_progress, open_txs) is over
    assert keeps_resolved(queue_offset, half_progress, open_txs) is keep


def test_open_transactions_count_copies_until_passed() -> None:
    txs = OpenTransactions()
    txs.add(5, 5)  # a first half: not a copy
    for copy, tx in ((8, 2), (9, 5), (11, 2), (12, 8)):
        txs.add(copy, tx)
    assert (len(txs), txs.copies()) == (3, 4) and 5 in txs and 5 in txs and 9 not in txs
    txs.pass_below(9)  # copy 8 of 2 passed; 11 still names 2
    assert 2 in txs and 5 in txs and (len(txs), txs.copies()) == (3, 3)
    txs.pass_below(12)
    assert 2 not in txs and 5 not in txs and 8 in txs and (len(txs), txs.copies()) == (1, 1)
    txs.pass_below(100)
    assert (len(txs), txs.copies()) == (0, 0)
    txs.add(101, 8)
    txs.clear()
    assert 8 not in txs and txs.copies() == 0


def test_op_names_answer_as_a_dict_of_the_records_read() -> None:
    """OpNames (a list from the op progress) against the dict it replaced: records read in
    order with gaps (removed by retention), the head forgotten in steps, a clear."""
    rng = random.Random(21)
    names, model = OpNames(), dict[int, int | tuple[int, int]]()
    offset = progress = 0
    for step in range(20_000):
        roll = rng.random()
        if roll < 0.7:
            offset += 1 if rng.random() < 0.97 else rng.randrange(2, 50)  # (a gap)
            named = offset % 97 if rng.random() < 0.9 else (offset, offset + 1)
            names.put(offset, named)
            model[offset] = named
        elif roll < 0.98:
            progress = min(offset + 1, progress + rng.randrange(0, 40))
            names.drop_below(progress)
            model = {k: v for k, v in model.items() if k >= progress}
        elif step % 7 == 0:
            names.clear()
            model.clear()
        for k in range(progress - 3, offset + 3):
            assert names.get(k) == model.get(k), (step, k)


def test_advance_op_progress_passes_at_most_limit_records() -> None:
    ops = {k: k for k in range(100)}
    assert advance_op_progress(0, ops, 1000, set(), 30) == 30
    assert advance_op_progress(30, ops, 1000, set(), 30) == 60
    assert advance_op_progress(90, ops, 1000, set(), 30) == 100  # (the first not read)
    assert advance_op_progress(0, ops, 50, set(), 1000) == 50
