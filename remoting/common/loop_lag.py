"""``LoopLagMonitor``: how late the event loop runs, and what was running when it ran late.

Every server does all its work on one asyncio loop, so any callback that blocks (a page fault
on a new file, an ``fsync``, a big ``json.dumps``) delays every connection at once. The monitor
measures that cheaply, with nothing added per message or per loop turn:

* a timer callback every ``interval`` seconds (10 ms: 100 callbacks a second, ~10 µs each on a
  busy loop, so ~1 ms of CPU a second) records how late it ran (``time.monotonic`` now minus when it was due) into a
  histogram, a maximum since start and a maximum of the last minute;
* a watchdog thread wakes when the pending timer would be ``warn`` late (at least ``warn / 2``
  apart, 25 ms to 0.5 s) and, when the pending timer is overdue by more than
  ``warn``, samples the loop thread's stack (``sys._current_frames``) and the current task's
  name. Sampling happens only during a stall, so it costs nothing in steady state; a stall
  inside one C call that holds the GIL is sampled right after that call returns, i.e. in the
  Python function that made it, which is the one to blame;
* a late tick over ``warn`` counts a slow turn and logs one warning (at most one a second, with
  the number of slow turns not logged) naming what the watchdog saw, and how much CPU the loop
  thread got since the previous tick and how often it was switched out (``getrusage`` of the
  thread, one call per tick: CPU, involuntary switches = preempted by the OS, voluntary ones =
  it blocked: a lock, the GIL, a page fault waiting for a journal or the disk; and major page
  faults): a stall with
  little CPU is the thread waiting (a disk page fault, a blocking syscall, or a machine so
  loaded that the OS did not run it; "run (runners.py)" as the sample means it was inside the
  event loop's own C code, e.g. waiting to be scheduled), a stall with CPU close to its length
  is Python or C work on the loop, named by the sample; and whether a full (generation 2)
  garbage collection ran during it (``gc.get_count``, read once per tick), since a full
  collection stalls whatever allocation triggered it, so the sample alone would blame an
  innocent line.

A stall that ends between two ticks is seen as ``stall - time to the next tick``: lags under
``interval`` are underestimated by up to ``interval`` (stalls longer than it are always seen).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import sys
import threading
import time
from bisect import bisect_left
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

logger = logging.getLogger(__name__)

_RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None)

#: default timer period, seconds
DEFAULT_INTERVAL = 0.010
#: upper bounds (ms) of the lag histogram's buckets (Prometheus ``le`` in seconds: / 1000)
BUCKETS_MS: tuple[float, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
#: at most one warning per this many seconds (the rest are counted)
LOG_EVERY_S = 1.0
#: innermost frames named in a warning
STACK_DEPTH = 4
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _thread_usage() -> tuple[float, int, int, int]:
    """CPU seconds, voluntary and involuntary context switches, major faults of this thread."""
    if _RUSAGE_THREAD is None:  # pragma: no cover - not Linux
        return (time.thread_time(), 0, 0, 0)
    r = resource.getrusage(_RUSAGE_THREAD)
    return (r.ru_utime + r.ru_stime, r.ru_nvcsw, r.ru_nivcsw, r.ru_majflt)


def _gen1_since_full() -> int:
    """Generation-1 collections since the last full one: it drops when a full collection runs
    (``gc.get_count``, ~50 ns; ``gc.get_stats`` would cost ~5 µs a tick)."""
    return gc.get_count()[2]


def describe_frame(frame: FrameType | None, depth: int = STACK_DEPTH) -> str:
    """``func (file:line) < caller (file:line) < ...``, innermost first; paths relative to the
    project when inside it."""
    parts: list[str] = []
    while frame is not None and len(parts) < depth:
        code = frame.f_code
        path = code.co_filename
        if path.startswith(_ROOT):
            path = path[len(_ROOT) + 1 :]
        else:
            path = os.path.basename(path)
        parts.append(f"{code.co_name} ({path}:{frame.f_lineno})")
        frame = frame.f_back
    return " < ".join(parts) or "?"


class LoopLagMonitor:
    """Start with :meth:`start` on the running loop; :meth:`stop` ends the timer and the thread.

    Args:
        warn_ms: a tick later than this counts as a slow turn and is logged (``loopLagWarnMillis``).
        interval: seconds between ticks.
        name: names the watchdog thread and the log lines (``broker``, ``namesrv``).
    """

    def __init__(self, *, warn_ms: int, interval: float = DEFAULT_INTERVAL, name: str = "loop") -> None:
        if warn_ms <= 0:
            raise ValueError(f"warn_ms must be > 0, got {warn_ms}")
        if interval <= 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        self.warn_ms = warn_ms
        self.interval = interval
        self.name = name
        #: ticks per bucket of ``BUCKETS_MS`` (last: above the largest bound)
        self.counts = [0] * (len(BUCKETS_MS) + 1)
        self.sum_ms = 0.0
        self.max_ms = 0.0
        #: ticks later than ``warn_ms``
        self.slow_turns = 0
        #: the last slow turn: ``(lag ms, what was running)``
        self.last_slow: tuple[float, str] | None = None
        self._minute_max = [0.0, 0.0]  # [current 30 s window, previous one]
        self._window_start = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        #: when the pending tick is due (``time.monotonic``)
        self._due = 0.0
        self._thread_id = 0
        #: the watchdog's sample of the current stall: ``(due of the late tick, text)``
        self._sample: tuple[float, str] | None = None
        self._stopping = False
        self._watchdog: threading.Thread | None = None
        self._last_log = 0.0
        self._usage = _thread_usage()
        self._tick_at = 0.0
        self._gen1 = 0
        self._unlogged = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Call on the loop thread, with the loop running."""
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._thread_id = threading.get_ident()
        self._window_start = self._tick_at = time.monotonic()
        self._usage = _thread_usage()
        self._gen1 = _gen1_since_full()
        self._schedule()
        self._stopping = False
        self._watchdog = threading.Thread(target=self._watch, name=f"{self.name}-loop-watchdog", daemon=True)
        self._watchdog.start()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._stopping = True
        thread, self._watchdog = self._watchdog, None
        if thread is not None:
            thread.join(timeout=self._watch_period() + 1.0)
        self._loop = None

    @property
    def count(self) -> int:
        return sum(self.counts)

    @property
    def recent_max_ms(self) -> float:
        """Largest lag of the last 30-60 s."""
        self._rotate(time.monotonic())
        return max(self._minute_max)

    def buckets(self) -> list[tuple[str, int]]:
        """Cumulative ``(le seconds, count)`` pairs, ``+Inf`` last (Prometheus histogram)."""
        out: list[tuple[str, int]] = []
        acc = 0
        for bound, n in zip(BUCKETS_MS, self.counts, strict=False):
            acc += n
            out.append((repr(bound / 1000), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out

    # ------------------------------------------------------------------ loop side
    def _schedule(self) -> None:
        loop = self._loop
        if loop is None:
            return
        self._due = time.monotonic() + self.interval
        self._handle = loop.call_later(self.interval, self._tick)

    def _rotate(self, now: float) -> None:
        if now - self._window_start >= 30.0:
            self._minute_max = [0.0, self._minute_max[0] if now - self._window_start < 60.0 else 0.0]
            self._window_start = now

    def _tick(self) -> None:
        now = time.monotonic()
        due = self._due
        lag = max(0.0, (now - due) * 1000.0)
        self.counts[bisect_left(BUCKETS_MS, lag)] += 1
        self.sum_ms += lag
        self.max_ms = max(self.max_ms, lag)
        self._rotate(now)
        self._minute_max[0] = max(self._minute_max[0], lag)
        gen1 = _gen1_since_full()
        if lag > self.warn_ms:
            u0, u1 = self._usage, _thread_usage()
            text = (
                f"loop thread CPU {(u1[0] - u0[0]) * 1000:.1f} of {(now - self._tick_at) * 1000:.1f} ms, "
                f"preempted {u1[2] - u0[2]}x, blocked {u1[1] - u0[1]}x, major faults {u1[3] - u0[3]}"
            )
            if gen1 < self._gen1:
                text += "; a full garbage collection ran"
            self._slow(lag, due, now, text)
        self._usage = _thread_usage()
        self._tick_at = now
        self._gen1 = gen1
        self._schedule()

    def _slow(self, lag: float, due: float, now: float, cpu: str) -> None:
        sample = self._sample
        what = sample[1] if sample is not None and sample[0] == due else "not sampled (stall ended first)"
        what = f"{what}; {cpu}"
        self.slow_turns += 1
        self.last_slow = (lag, what)
        if now - self._last_log < LOG_EVERY_S:
            self._unlogged += 1
            return
        more = f" (+{self._unlogged} slow turns not logged)" if self._unlogged else ""
        self._last_log = now
        self._unlogged = 0
        logger.warning(
            "%s event loop ran %.1f ms late (loopLagWarnMillis=%d); running: %s%s",
            self.name, lag, self.warn_ms, what, more,
        )  # fmt: skip

    # ------------------------------------------------------------------ watchdog thread
    def _watch_period(self) -> float:
        """Shortest sleep of the watchdog: half the threshold, 25 ms to 0.5 s."""
        return min(0.5, max(self.warn_ms / 2000.0, 0.025))

    def _watch(self) -> None:
        # a plain sleep: Event.wait with a timeout costs a lock and a condition per wake-up.
        # Each wake-up takes the GIL from a busy loop, and on a loaded machine the loop then
        # waits until this thread is scheduled again (measured: 12 waits a second, up to 31 ms),
        # so it sleeps until the pending tick would be late, not a fixed half-threshold: a
        # healthy loop is looked at once per threshold (50 ms) instead of twice.
        period = self._watch_period()
        warn_s = self.warn_ms / 1000.0
        while True:
            time.sleep(min(0.5, max(period, self._due + warn_s - time.monotonic())))
            if self._stopping:
                return
            due = self._due
            if time.monotonic() - due <= warn_s:
                continue
            sample = self._sample
            if sample is not None and sample[0] == due:
                continue  # this stall is sampled already
            self._sample = (due, self._what_runs())

    def _what_runs(self) -> str:
        frame = sys._current_frames().get(self._thread_id)
        text = describe_frame(frame)
        loop = self._loop
        task = None
        if loop is not None:
            try:
                task = asyncio.current_task(loop)
            except RuntimeError:  # pragma: no cover - the loop closed meanwhile
                task = None
        return f"task {task.get_name()}: {text}" if task is not None else text

    # ------------------------------------------------------------------ export
    def families(self, labels: list[str], values: list[str]) -> list[Metric]:
        """Prometheus families (``prometheus_client`` custom-collector metrics):
        ``rocketmq_loop_lag_seconds`` (histogram of tick lateness),
        ``rocketmq_loop_lag_max_seconds`` (since start), ``rocketmq_loop_lag_recent_max_seconds``
        (last 30-60 s) and ``rocketmq_loop_slow_turns`` (ticks later than ``loopLagWarnMillis``)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        hist = HistogramMetricFamily(
            "rocketmq_loop_lag_seconds", "how late the event loop ran its 10 ms timer", labels=labels
        )
        hist.add_metric(values, self.buckets(), self.sum_ms / 1000)
        peak = GaugeMetricFamily(
            "rocketmq_loop_lag_max_seconds", "largest event loop lag since start", labels=labels
        )
        peak.add_metric(values, self.max_ms / 1000)
        recent = GaugeMetricFamily(
            "rocketmq_loop_lag_recent_max_seconds",
            "largest event loop lag of the last 30-60 s",
            labels=labels,
        )
        recent.add_metric(values, self.recent_max_ms / 1000)
        slow = CounterMetricFamily(
            "rocketmq_loop_slow_turns", "event loop ticks later than loopLagWarnMillis", labels=labels
        )
        slow.add_metric(values, self.slow_turns)
        return [hist, peak, recent, slow]
