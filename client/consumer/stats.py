"""Consumption counters for ConsumerRunningInfo and the benchmark (pure, cheap per call)."""

from __future__ import annotations

import time


class ConsumeStats:
    __slots__ = ("_mark_failed", "_mark_ok", "_mark_time", "failed", "ok", "pulled", "pulls")

    def __init__(self) -> None:
        self.ok = 0
        self.failed = 0
        self.pulled = 0
        self.pulls = 0
        self._mark_time = time.monotonic()
        self._mark_ok = 0
        self._mark_failed = 0

    def record(self, count: int, success: bool) -> None:
        if success:
            self.ok += count
        else:
            self.failed += count

    def record_pull(self, count: int) -> None:
        self.pulls += 1
        self.pulled += count

    def snapshot(self) -> dict[str, float]:
        """Java ``ConsumeStatus`` fields; TPS since the previous snapshot."""
        now = time.monotonic()
        span = max(now - self._mark_time, 1e-6)
        ok_tps = (self.ok - self._mark_ok) / span
        failed_tps = (self.failed - self._mark_failed) / span
        self._mark_time, self._mark_ok, self._mark_failed = now, self.ok, self.failed
        return {
            "consumeFailedMsgs": self.failed,
            "consumeFailedTPS": failed_tps,
            "consumeOKTPS": ok_tps,
            "consumeRT": 0.0,
            "pullRT": 0.0,
            "pullTPS": 0.0,
        }
