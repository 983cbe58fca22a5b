"""Injectable clocks.

Every table that makes time-based decisions (namesrv broker liveness, client channel expiry,
long-polling deadlines) takes a :class:`Clock` instead of calling ``time`` itself, so tests can
drive time with :class:`FakeClock` and never sleep.

Two time lines, as in Java:

* ``now_ms()``: wall-clock milliseconds since the epoch (``System.currentTimeMillis``). Use it for
  values that travel or are stored (DataVersion timestamps, store timestamps, ``subVersion``).
* ``monotonic()`` / ``monotonic_ms()``: never goes backwards. Use it for expiry and timeouts, so a
  wall-clock step (NTP, an operator) cannot expire every broker at once.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Source of wall and monotonic time."""

    def now_ms(self) -> int:
        """Wall-clock time in milliseconds since the Unix epoch."""
        ...

    def monotonic(self) -> float:
        """Monotonic time in seconds (arbitrary origin)."""
        ...

    def monotonic_ms(self) -> int:
        """Monotonic time in whole milliseconds (arbitrary origin)."""
        ...


class SystemClock:
    """The real clocks of the process."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


#: Shared instance; it has no state.
SYSTEM_CLOCK = SystemClock()


class FakeClock:
    """A clock that only moves when told to.

    Wall and monotonic time advance together through :meth:`advance` / :meth:`advance_ms`;
    :meth:`set_wall_ms` moves only the wall clock, to test that expiry does not follow it.
    Time is kept in integer nanoseconds so repeated small advances never drift.
    """

    __slots__ = ("_mono_ns", "_wall_ns")

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic: float = 1_000.0) -> None:
        self._wall_ns = wall_ms * 1_000_000
        self._mono_ns = round(monotonic * 1_000_000_000)

    def now_ms(self) -> int:
        return self._wall_ns // 1_000_000

    def monotonic(self) -> float:
        return self._mono_ns / 1_000_000_000

    def monotonic_ms(self) -> int:
        return self._mono_ns // 1_000_000

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds``.

        Raises:
            ValueError: ``seconds`` is negative (time never runs backwards here).
        """
        self._advance_ns(round(seconds * 1_000_000_000))

    def advance_ms(self, ms: int) -> None:
        """Move both clocks forward by ``ms`` milliseconds.

        Raises:
            ValueError: ``ms`` is negative.
        """
        self._advance_ns(ms * 1_000_000)

    def set_wall_ms(self, wall_ms: int) -> None:
        """Step the wall clock (either direction) without touching monotonic time."""
        self._wall_ns = wall_ms * 1_000_000

    def _advance_ns(self, ns: int) -> None:
        if ns < 0:
            raise ValueError(f"cannot advance a clock by a negative amount ({ns} ns)")
        self._wall_ns += ns
        self._mono_ns += ns

    def __repr__(self) -> str:
        return f"FakeClock(wall_ms={self.now_ms()}, monotonic={self.monotonic():.3f})"
