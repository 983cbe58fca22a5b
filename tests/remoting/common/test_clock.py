from __future__ import annotations

import time

import pytest

from pocketmq.remoting.common.clock import SYSTEM_CLOCK, Clock, FakeClock, SystemClock


def test_system_clock_tracks_real_time() -> None:
    clock = SystemClock()
    assert isinstance(clock, Clock)
    assert abs(clock.now_ms() - time.time() * 1000) < 5_000
    a = clock.monotonic_ms()
    b = clock.monotonic_ms()
    assert b >= a
    assert abs(clock.monotonic() - time.monotonic()) < 5
    assert isinstance(SYSTEM_CLOCK, SystemClock)


def test_fake_clock_moves_only_when_told() -> None:
    clock = FakeClock(wall_ms=1_000, monotonic=10.0)
    assert isinstance(clock, Clock)
    assert (clock.now_ms(), clock.monotonic_ms(), clock.monotonic()) == (1_000, 10_000, 10.0)
    clock.advance(1.5)
    assert (clock.now_ms(), clock.monotonic_ms()) == (2_500, 11_500)
    clock.advance_ms(250)
    assert (clock.now_ms(), clock.monotonic_ms()) == (2_750, 11_750)


def test_fake_clock_small_steps_do_not_drift() -> None:
    clock = FakeClock(wall_ms=0, monotonic=0.0)
    for _ in range(1000):
        clock.advance(0.001)
    assert clock.monotonic_ms() == 1000
    assert clock.now_ms() == 1000


def test_fake_clock_wall_step_leaves_monotonic_alone() -> None:
    clock = FakeClock(wall_ms=5_000, monotonic=1.0)
    clock.set_wall_ms(0)
    assert clock.now_ms() == 0
    assert clock.monotonic_ms() == 1_000


def test_fake_clock_refuses_to_go_backwards() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.advance_ms(-1)
