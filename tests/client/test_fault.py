from __future__ import annotations

from pocketmq.client.message import MessageQueue
from pocketmq.client.producer.fault import LatencyFaultTolerance, MQFaultStrategy, not_available_duration
from pocketmq.client.route import TopicPublishInfo
from pocketmq.remoting.common.clock import FakeClock
from pocketmq.remoting.protocol.route import QueueData, TopicRouteData


def test_latency_table() -> None:
    assert not_available_duration(0) == 0
    assert not_available_duration(99) == 0
    assert not_available_duration(550) == 30_000
    assert not_available_duration(1000) == 60_000
    assert not_available_duration(3000) == 180_000
    assert not_available_duration(30_000) == 600_000


def test_fault_item_expires_with_the_clock() -> None:
    clock = FakeClock()
    lft = LatencyFaultTolerance(clock)
    lft.update("a", 600, 30_000)
    assert not lft.is_available("a")
    assert lft.is_available("b")
    clock.advance_ms(29_999)
    assert not lft.is_available("a")
    clock.advance_ms(1)
    assert lft.is_available("a")


def test_pick_one_at_least_prefers_better_half() -> None:
    clock = FakeClock()
    lft = LatencyFaultTolerance(clock)
    assert lft.pick_one_at_least() is None
    lft.update("fast", 10, 1000)
    lft.update("slow", 5000, 600_000)
    lft.update("mid", 100, 60_000)
    lft.update("worst", 9000, 600_000)
    picks = {lft.pick_one_at_least() for _ in range(10)}
    assert picks <= {"fast", "mid"}


def _info() -> TopicPublishInfo:
    mqs = [MessageQueue("T", b, i) for b in ("a", "b") for i in range(2)]
    route = TopicRouteData([QueueData("a", 2, 2, 6), QueueData("b", 2, 2, 6)], [])
    return TopicPublishInfo(mqs, route=route, have_route=True)


def test_strategy_skips_isolated_broker() -> None:
    clock = FakeClock()
    strategy = MQFaultStrategy(True, clock)
    info = _info()
    strategy.update_fault_item("a", 100, isolation=True)
    for _ in range(10):
        assert strategy.select_one_message_queue(info, None).broker_name == "b"
    clock.advance_ms(600_001)
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(10)} == {"a", "b"}


def test_strategy_all_isolated_still_returns_a_queue() -> None:
    strategy = MQFaultStrategy(True, FakeClock())
    info = _info()
    strategy.update_fault_item("a", 100, isolation=True)
    strategy.update_fault_item("b", 20_000, isolation=False)
    mq = strategy.select_one_message_queue(info, None)
    assert mq.broker_name in {"a", "b"} and 0 <= mq.queue_id < 2


def test_disabled_strategy_is_plain_round_robin() -> None:
    strategy = MQFaultStrategy(False, FakeClock())
    info = _info()
    strategy.update_fault_item("a", 100, isolation=True)
    assert not strategy.tolerance.items
    assert strategy.select_one_message_queue(info, "a").broker_name == "b"
