"""Store statistics in RocketMQ's runtime-info vocabulary (``StoreStatsService``).

Counters are bumped on the hot paths; ``sample(now_ms)`` (once a second, from a service)
snapshots them so rates over 10 s / 60 s / 600 s can be reported as Java does
(``"putTps" -> "12.00 11.50 10.02"``).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    ts: int
    put: int
    found: int
    miss: int
    total: int
    transferred: int


class StoreStats:
    def __init__(self, boot_ms: int) -> None:
        self.boot_ms = boot_ms
        self.get_found_times = 0
        self.get_miss_times = 0
        self.get_total_times = 0
        self.get_transferred_msg_count = 0
        self.put_message_failed_times = 0
        self._samples: deque[_Sample] = deque(maxlen=602)

    def sample(self, now_ms: int, put_times_total: int) -> None:
        self._samples.append(
            _Sample(
                now_ms, put_times_total, self.get_found_times, self.get_miss_times,
                self.get_total_times, self.get_transferred_msg_count,
            )
        )  # fmt: skip

    def _rate(self, attr: str, seconds: int) -> float:
        if len(self._samples) < 2:
            return 0.0
        last = self._samples[-1]
        first = self._samples[0]
        for s in self._samples:
            if last.ts - s.ts <= seconds * 1000:
                first = s
                break
        span = last.ts - first.ts
        if span <= 0:
            return 0.0
        return float(getattr(last, attr) - getattr(first, attr)) * 1000.0 / span

    def tps_triple(self, attr: str) -> str:
        return " ".join(f"{self._rate(attr, s):.2f}" for s in (10, 60, 600))

    def runtime_info(self, put_times_total: int, put_size_total: int) -> dict[str, str]:
        now = int(time.time() * 1000)
        up = max(0, now - self.boot_ms) // 1000
        avg = put_size_total / put_times_total if put_times_total else 0.0
        return {
            "bootTimestamp": str(self.boot_ms),
            "runtime": f"[ {up // 86400} days, {up % 86400 // 3600} hours, {up % 3600 // 60} minutes, {up % 60} seconds ]",
            "putMessageTimesTotal": str(put_times_total),
            "putMessageSizeTotal": str(put_size_total),
            "putMessageAverageSize": f"{avg:.2f}",
            "putMessageFailedTimes": str(self.put_message_failed_times),
            "putTps": self.tps_triple("put"),
            "getFoundTps": self.tps_triple("found"),
            "getMissTps": self.tps_triple("miss"),
            "getTotalTps": self.tps_triple("total"),
            "getTransferedTps": self.tps_triple("transferred"),
        }
