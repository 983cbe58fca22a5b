"""Rate limiting, range splitting and data-loss decisions (pure; ports of the Kafka vectors)."""

from __future__ import annotations

import logging

import pytest

from pocketmq.remoting.protocol.heartbeat import MessageQueue
from pocketmq.spark.errors import DataLossError
from pocketmq.spark.planning import (
    DataLoss,
    DataLossPolicy,
    LossKind,
    OffsetRange,
    QueueState,
    Snapshot,
    TriggerGate,
    backlog,
    interleave,
    plan_ranges,
    rate_limit,
    reconcile,
    split_ranges,
)

A0, A1, B0, B1 = (
    MessageQueue("T", "broker-a", 0),
    MessageQueue("T", "broker-a", 1),
    MessageQueue("T", "broker-b", 0),
    MessageQueue("T", "broker-b", 1),
)
INT64_MAX = 2**63 - 1


# --------------------------------------------------------------------------- rate_limit


def test_rate_limit_even_split() -> None:
    assert rate_limit(10, {A0: 0, B0: 0}, {A0: 100, B0: 100}) == {A0: 5, B0: 5}


def test_rate_limit_is_proportional_to_backlog() -> None:
    assert rate_limit(100, {A0: 0, A1: 50, B0: 0}, {A0: 300, A1: 150, B0: 600}) == {A0: 30, A1: 60, B0: 60}


def test_rate_limit_never_starves_a_small_queue() -> None:
    # 10 * 1/1001 < 1 rounds up to 1; the big share rounds down (9.99 -> 9)
    assert rate_limit(10, {A0: 0, B0: 0}, {A0: 1000, B0: 1}) == {A0: 9, B0: 1}


def test_rate_limit_never_passes_latest_and_keeps_idle_queues() -> None:
    out = rate_limit(1000, {A0: 5, A1: 7, B0: 3}, {A0: 10, A1: 7, B0: 2})
    assert out == {A0: 10, A1: 7, B0: 2}  # A0 capped at latest; A1 idle; B0 behind start kept


def test_rate_limit_with_nothing_to_read_returns_latest() -> None:
    assert rate_limit(5, {A0: 10}, {A0: 10, B0: 0}) == {A0: 10, B0: 0}


def test_rate_limit_overflow_is_capped() -> None:
    # SPARK-26718: begin + share must not overflow a long
    begin = INT64_MAX - 10
    assert rate_limit(INT64_MAX, {A0: begin}, {A0: INT64_MAX - 1}) == {A0: INT64_MAX - 1}


def test_rate_limit_total_is_close_to_the_limit() -> None:
    start = {MessageQueue("T", "b", q): 0 for q in range(16)}
    latest = {k: 1000 + 37 * k.queue_id for k in start}
    end = rate_limit(5000, start, latest)
    total = sum(end[k] - start[k] for k in start)
    assert 5000 - 16 <= total <= 5000
    assert all(end[k] > 0 for k in start)


# ------------------------------------------------------------------------- split_ranges


def r(key: MessageQueue, a: int, b: int) -> OffsetRange:
    return OffsetRange(key, a, b)


def pieces(key: MessageQueue, *bounds: int) -> list[OffsetRange]:
    """Contiguous ranges of ``key`` between consecutive ``bounds``."""
    return [r(key, a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize(
    ("ranges", "options", "expected"),
    [
        pytest.param(
            [r(A0, 1, 2), r(A1, 1, 3)], {}, [r(A0, 1, 2), r(A1, 1, 3)], id="no_min_partitions_one_to_one"
        ),
        pytest.param(
            [r(A0, 1, 2), r(A1, 1, 3), r(B0, 5, 9)],
            {"min_partitions": 3},
            [r(A0, 1, 2), r(A1, 1, 3), r(B0, 5, 9)],
            id="min_partitions_not_above_count_one_to_one",
        ),
        pytest.param(
            [r(A0, 1, 17)], {"min_partitions": 4}, pieces(A0, 1, 5, 9, 13, 17), id="one_queue_into_four"
        ),
        pytest.param(
            [r(A0, 1, 17)],
            {"min_partitions": 3},
            pieces(A0, 1, 6, 11, 17),
            id="into_three_rounding_to_the_last",
        ),
        pytest.param(
            [r(A0, 1, 11)],
            {"min_partitions": 3},
            pieces(A0, 1, 4, 7, 11),
            id="into_three_rounding_to_the_last_2",
        ),
        pytest.param(
            [r(A0, 1, 5), r(A1, 1, 21)],
            {"min_partitions": 4},
            [r(A0, 1, 5), *pieces(A1, 1, 7, 14, 21)],
            id="skewed_queues_proportionally",
        ),
        pytest.param(
            [r(A0, 1, 5), r(B0, 1, 1), r(A1, 1, 21)],
            {"min_partitions": 4},
            [r(A0, 1, 5), *pieces(A1, 1, 7, 14, 21)],
            id="skewed_queues_ignores_empty",
        ),
        pytest.param([r(A0, 0, 100)], {"max_records": 30}, pieces(A0, 0, 25, 50, 75, 100), id="max_records"),
    ],
)
def test_split_ranges(
    ranges: list[OffsetRange], options: dict[str, int], expected: list[OffsetRange]
) -> None:
    assert split_ranges(ranges, **options) == expected


def test_split_rounds_half_up_like_scala() -> None:
    ranges = [r(MessageQueue("T", "b", q), 0, 10) for q in range(8)]
    # 10/80 * 20 = 2.5 -> 3 pieces each (Python's round() would say 2 -> 16 partitions)
    assert len(split_ranges(ranges, min_partitions=20)) == 24


def test_split_max_records_then_min_partitions() -> None:
    out = split_ranges([r(A0, 0, 100), r(B0, 0, 10)], max_records=60, min_partitions=8)
    assert sum(x.size for x in out) == 110 and all(x.size <= 60 for x in out)
    assert len(out) >= 8
    # pieces are contiguous and cover each range exactly
    a = [x for x in out if x.key == A0]
    assert (
        a[0].start == 0
        and a[-1].until == 100
        and all(p.until == q.start for p, q in zip(a, a[1:], strict=False))
    )


def test_interleave_alternates_brokers_deterministically() -> None:
    ranges = [r(A0, 0, 5), r(A1, 0, 5), r(B0, 0, 5), r(B1, 0, 5), r(A0, 5, 9)]
    out = interleave(reversed(ranges))
    assert [x.key.broker_name for x in out] == ["broker-a", "broker-b", "broker-a", "broker-b", "broker-a"]
    assert out == interleave(ranges)


# --------------------------------------------------------------------------- data loss


def snap(**queues: tuple[int, int]) -> Snapshot:
    keys = {"a0": A0, "a1": A1, "b0": B0, "b1": B1}
    s = Snapshot()
    for name, (lo, hi) in queues.items():
        s.queues[keys[name]] = QueueState(lo, hi)
        s.topic_brokers.add(("T", keys[name].broker_name))
    return s


def test_reconcile_normal_progress() -> None:
    rec = reconcile({A0: 3, B0: 0}, snap(a0=(0, 10), b0=(0, 4)))
    assert rec.latest == {A0: 10, B0: 4} and rec.effective_start == {A0: 3, B0: 0}
    assert not rec.losses and not rec.new_queues and not rec.unavailable


def test_reconcile_retention_moves_effective_start() -> None:
    rec = reconcile({A0: 3}, snap(a0=(8, 10)))
    assert rec.losses == [DataLoss(LossKind.RETENTION, A0, 3, 8)]
    assert rec.effective_start == {A0: 8} and rec.latest == {A0: 10}
    assert rec.losses[0].skipped == 5


def test_reconcile_new_queue_enters_at_min_with_an_empty_range() -> None:
    rec = reconcile({A0: 3}, snap(a0=(0, 10), a1=(0, 7)))
    assert rec.new_queues == [A1] and rec.latest[A1] == 0 and not rec.losses
    rec = reconcile({A0: 3}, snap(a0=(0, 10), a1=(4, 7)))
    assert rec.latest[A1] == 4 and rec.losses == [DataLoss(LossKind.NEW_QUEUE, A1, 0, 4)]


def test_reconcile_gone_versus_unavailable_queue() -> None:
    s = snap(a0=(0, 10))  # broker-a still serves T: queue a1 is gone; broker-b is not listed at all
    rec = reconcile({A0: 1, A1: 5, B0: 6}, s)
    assert [loss.kind for loss in rec.losses] == [LossKind.QUEUE_GONE]
    assert rec.losses[0].key == A1
    assert rec.unavailable == [B0]
    assert rec.latest == {A0: 10, A1: 5, B0: 6}  # both carried forward unchanged


def test_reconcile_reset_queue_passes_through_to_planning() -> None:
    rec = reconcile({A0: 50}, snap(a0=(0, 20)))
    assert rec.latest == {A0: 20} and not rec.losses


def test_policy_fail_raises_with_hint() -> None:
    with pytest.raises(DataLossError, match=r"T/broker-a/0.*\[3, 8\).*failOnDataLoss=false"):
        DataLossPolicy(True).handle(DataLoss(LossKind.RETENTION, A0, 3, 8))


def test_policy_skip_logs_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    policy = DataLossPolicy(False)
    with caplog.at_level(logging.WARNING, logger="pocketmq.spark"):
        policy.handle(DataLoss(LossKind.RETENTION, A0, 3, 8))
        policy.handle(DataLoss(LossKind.GAP, B0, 10, 12))
    assert policy.skipped_total == 7
    assert "retention" in caplog.text and "5 messages" in caplog.text and "skipping" in caplog.text


def test_plan_ranges_reset_queue_is_data_loss() -> None:
    with pytest.raises(DataLossError, match="went backwards"):
        plan_ranges({A0: 50, B0: 0}, {A0: 20, B0: 5}, DataLossPolicy(True))
    ranges = plan_ranges({A0: 50, B0: 0}, {A0: 20, B0: 5}, DataLossPolicy(False))
    assert ranges == [r(B0, 0, 5)]


def test_plan_ranges_skips_empty_and_unknown_start() -> None:
    ranges = plan_ranges({A0: 5, B0: 0}, {A0: 5, B0: 3, A1: 9}, DataLossPolicy(True), min_partitions=3)
    assert ranges == [r(B0, 0, 1), r(B0, 1, 2), r(B0, 2, 3)]


# ------------------------------------------------------------------------- admission


def test_trigger_gate_waits_for_min_rows_or_delay() -> None:
    gate = TriggerGate(min_rows=100, delay_ms=1000, now_ms=0)
    assert not gate.admit(50, now_ms=10)
    assert gate.admit(100, now_ms=20)  # enough rows
    assert not gate.admit(10, now_ms=500)
    assert gate.admit(10, now_ms=1020)  # delay expired since the last batch
    assert not gate.admit(0, now_ms=99_999)  # never an empty batch


def test_backlog_counts_only_forward_progress() -> None:
    assert backlog({A0: 5, B0: 10}, {A0: 9, B0: 4, A1: 3}) == 4
