"""``KeepWarm``: an idle strategy for the replication link (``haKeepWarmMillis``, pocketmq's key).

Why: a SYNC_MASTER send waits for two wake-ups, the slave's loop when the transfer arrives and
the master's when the report comes back. Measured on a 2-core VM (``bench/ha_bench.py --only
lag``, 20k msg/s, quiet machine): the median lag is 0.4 ms, but the p99 was 6.9-10.9 ms, and the
loop-lag monitor found no turn of our code behind it (every slow turn was the loop thread off the
CPU). The same runs with both loops woken every millisecond and a thread waking every 1.5 ms
gave 2.1-3.0 ms, at the same CPU per message: an idle virtual CPU is descheduled by the host and
is slow to run again when the next transfer or report arrives. This is the busy-wait end of the
idle strategies latency-sensitive messaging uses (Aeron's ``IdleStrategy``), kept cheap: it runs
only while replication traffic flows (:meth:`touch` on each transfer and report) and stops
``LINGER_S`` after the last one, so an idle broker does not wake at all.

Cost while traffic flows: one loop timer per interval (~1,000 callbacks a second) and one thread
waking every 1.5 intervals, about 1-2 % of a core.
"""

from __future__ import annotations

import asyncio
import threading
import time

__all__ = ["KeepWarm"]

#: seconds of silence after which the timer and the thread stop until the next touch
LINGER_S = 1.0


class KeepWarm:
    """Wakes the loop every ``interval_ms`` (and a thread every 1.5 intervals) while touched."""

    def __init__(self, interval_ms: int) -> None:
        self.interval = interval_ms / 1000.0
        self._loop = asyncio.get_running_loop()
        self._last = 0.0  # loop time of the last touch
        self._timer: asyncio.TimerHandle | None = None
        self._wake = threading.Event()  # set while active (the thread waits on it when idle)
        self._stopped = False
        self._thread: threading.Thread | None = None

    def touch(self) -> None:
        """Replication traffic now: keep warm for another ``LINGER_S`` (the hot-path call)."""
        self._last = self._loop.time()
        if self._timer is None and not self._stopped:
            self._start()

    def _start(self) -> None:
        self._timer = self._loop.call_later(self.interval, self._tick)
        self._wake.set()
        if self._thread is None:
            self._thread = threading.Thread(target=self._spin, name="ha-keepwarm", daemon=True)
            self._thread.start()

    def _tick(self) -> None:
        if self._stopped or self._loop.time() - self._last > LINGER_S:
            self._timer = None
            self._wake.clear()
            return
        self._timer = self._loop.call_later(self.interval, self._tick)

    def _spin(self) -> None:
        period = self.interval * 1.5
        while not self._stopped:
            if not self._wake.is_set():
                self._wake.wait()
                continue
            time.sleep(period)

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake.set()  # the thread sees _stopped and ends
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(1.0)
