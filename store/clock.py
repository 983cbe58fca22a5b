"""The store's wall clock (ms); ``CommitLog`` recognises it and inlines it on the put path."""

from __future__ import annotations

import time

_time_ns = time.time_ns


def now_ms() -> int:
    """Wall-clock milliseconds (store timestamps, index file names, retention)."""
    return _time_ns() // 1_000_000
