"""Latency fault tolerance and queue selection for producers (pure; time injected).

Rules (Java ``MQFaultStrategy`` / ``LatencyFaultToleranceImpl``, opt-in through
``send_latency_fault_enable``):

* after each send the broker's latency ``L`` (or 30 s for a failure, "isolation") maps to a
  "not available" duration through two tables: the largest ``LATENCY_MAX[i] <= L`` gives
  ``NOT_AVAILABLE_DURATION[i]`` ms (50 ms → 0, 550 ms → 30 s, 3 s → 3 min, 15 s → 10 min);
* selection walks the round robin and takes the first queue whose broker is available; when
  none is, it takes the "least bad" broker: items sorted by (available, latency, since), one
  of the better half, round robin;
* with the strategy off, selection is plain round robin that skips the broker of the previous
  failed attempt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pocketmq.client.message import MessageQueue
from pocketmq.client.route import TopicPublishInfo
from pocketmq.remoting.common.clock import SYSTEM_CLOCK, Clock

LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY = 30_000


@dataclass(slots=True)
class FaultItem:
    name: str
    current_latency: int
    start_timestamp: int  # ms (monotonic) from which the broker is usable again

    def is_available(self, now_ms: int) -> bool:
        return now_ms >= self.start_timestamp


class LatencyFaultTolerance:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self.items: dict[str, FaultItem] = {}
        self._which_worst = random.randrange(1 << 16)

    def update(self, name: str, current_latency: int, not_available_duration: int) -> None:
        start = self._clock.monotonic_ms() + not_available_duration
        item = self.items.get(name)
        if item is None:
            self.items[name] = FaultItem(name, current_latency, start)
        else:
            item.current_latency = current_latency
            item.start_timestamp = start

    def is_available(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.is_available(self._clock.monotonic_ms())

    def remove(self, name: str) -> None:
        self.items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """A broker from the better half of the known ones (or the only one); None if none."""
        if not self.items:
            return None
        now = self._clock.monotonic_ms()
        items = list(self.items.values())
        random.shuffle(items)
        items.sort(key=lambda it: (not it.is_available(now), it.current_latency, it.start_timestamp))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        self._which_worst += 1
        return items[self._which_worst % half].name


def not_available_duration(current_latency: int) -> int:
    for i in range(len(LATENCY_MAX) - 1, -1, -1):
        if current_latency >= LATENCY_MAX[i]:
            return NOT_AVAILABLE_DURATION[i]
    return 0


class MQFaultStrategy:
    def __init__(self, enabled: bool = False, clock: Clock = SYSTEM_CLOCK) -> None:
        self.enabled = enabled
        self.tolerance = LatencyFaultTolerance(clock)

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        if not self.enabled:
            return info.select_one(last_broker_name)
        mqs = info.message_queues
        n = len(mqs)
        for _ in range(n):
            info.index += 1
            mq = mqs[info.index % n]
            if self.tolerance.is_available(mq.broker_name):
                return mq
        not_best = self.tolerance.pick_one_at_least()
        if not_best is not None:
            count = info.queue_id_count(not_best)
            if count > 0:
                info.index += 1
                return MessageQueue(mqs[0].topic, not_best, info.index % count)
            self.tolerance.remove(not_best)
        return info.select_one()

    def update_fault_item(self, broker_name: str, current_latency: int, isolation: bool) -> None:
        if self.enabled:
            latency = ISOLATION_LATENCY if isolation else current_latency
            self.tolerance.update(broker_name, current_latency, not_available_duration(latency))
