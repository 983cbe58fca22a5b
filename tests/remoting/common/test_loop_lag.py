"""LoopLagMonitor: a blocking callback is measured, counted, logged with its name, exported."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from pocketmq.remoting.common.loop_lag import BUCKETS_MS, LoopLagMonitor, describe_frame
from tests.waiting import wait_until

BLOCK_S = 0.3


def deliberately_blocking_callback() -> None:
    time.sleep(BLOCK_S)  # releases the GIL: the watchdog samples this frame


def busy_blocking_callback() -> None:
    end = time.monotonic() + BLOCK_S
    while time.monotonic() < end:  # holds the GIL between bytecodes (pure Python work)
        pass


async def _run_block(monitor: LoopLagMonitor, block: object) -> None:
    loop = asyncio.get_running_loop()
    # let a few normal ticks pass first (the monitor has no event of its own: poll its counters)
    await wait_until(lambda: monitor.count >= 3)
    before = monitor.slow_turns
    loop.call_soon(block)  # type: ignore[arg-type]
    await wait_until(lambda: monitor.slow_turns > before, timeout=30)


@pytest.mark.parametrize("block", [deliberately_blocking_callback, busy_blocking_callback])
async def test_blocking_callback_is_counted_logged_and_named(block, caplog) -> None:
    monitor = LoopLagMonitor(warn_ms=50, name="test")
    caplog.set_level(logging.WARNING, logger="pocketmq.remoting.common.loop_lag")
    monitor.start()
    try:
        await _run_block(monitor, block)
    finally:
        monitor.stop()
    assert monitor.slow_turns >= 1
    # the tick due inside the block ran at least BLOCK_S - interval late
    assert monitor.max_ms >= (BLOCK_S - monitor.interval) * 1000 - 5
    assert monitor.recent_max_ms == monitor.max_ms
    assert monitor.last_slow is not None and block.__name__ in monitor.last_slow[1]
    warnings = [r.getMessage() for r in caplog.records if "ran" in r.getMessage()]
    assert warnings and block.__name__ in warnings[0] and "loopLagWarnMillis=50" in warnings[0]
    # the histogram's +Inf bucket counts every tick; the slow one is above 50 ms
    buckets = dict(monitor.buckets())
    assert buckets["+Inf"] == monitor.count
    assert buckets["+Inf"] - buckets["0.05"] >= 1


async def test_quiet_loop_counts_no_slow_turn_and_stop_ends_the_watchdog() -> None:
    monitor = LoopLagMonitor(warn_ms=5000, name="quiet")
    monitor.start()
    await wait_until(lambda: monitor.count >= 5)
    thread = monitor._watchdog
    monitor.stop()
    assert monitor.slow_turns == 0 and monitor.last_slow is None
    assert thread is not None and not thread.is_alive()
    count = monitor.count
    await asyncio.sleep(5 * monitor.interval)
    assert monitor.count == count  # no tick after stop


def test_buckets_are_cumulative_and_bad_arguments_refused() -> None:
    monitor = LoopLagMonitor(warn_ms=10)
    monitor.counts[0] = 2  # <= 1 ms
    monitor.counts[len(BUCKETS_MS)] = 1  # above the largest bound
    rows = monitor.buckets()
    assert rows[0] == ("0.001", 2) and rows[-2] == ("5.0", 2) and rows[-1] == ("+Inf", 3)
    with pytest.raises(ValueError, match="warn_ms"):
        LoopLagMonitor(warn_ms=0)
    with pytest.raises(ValueError, match="interval"):
        LoopLagMonitor(warn_ms=10, interval=0)


def test_describe_frame_names_innermost_first() -> None:
    def inner() -> str:
        import sys

        return describe_frame(sys._getframe(), depth=2)

    text = inner()
    assert text.startswith("inner (tests/remoting/common/test_loop_lag.py:")
    assert "< test_describe_frame_names_innermost_first" in text


def collecting_callback() -> None:
    import gc

    gc.collect()
    time.sleep(BLOCK_S)


async def test_a_full_garbage_collection_during_a_stall_is_named() -> None:
    import gc

    gc.collect(1)  # a generation-1 collection since the last full one: the full one shows as a drop
    monitor = LoopLagMonitor(warn_ms=50, name="gc")
    monitor.start()
    try:
        await _run_block(monitor, collecting_callback)
    finally:
        monitor.stop()
    assert monitor.last_slow is not None and "full garbage collection" in monitor.last_slow[1]
