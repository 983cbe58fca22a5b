"""``loopSchedSliceMicros``: the event loop thread's own scheduler slice (``remoting.common.sched``)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from typing import Any

import pytest

from pocketmq.broker.config import BrokerConfig, ConfigError
from pocketmq.remoting.common import sched


def in_a_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` on a thread of its own (the test process's threads keep their slices)."""
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def _probe() -> bool:
    return bool(sched.set_loop_slice(sched.MIN_SLICE_US))


needs_slices = pytest.mark.skipif(
    sched.thread_slice_ns() is None or not in_a_thread(_probe),
    reason="this kernel has no per-thread scheduler slices (Linux 6.12+)",
)


@needs_slices
def test_the_loop_thread_gets_its_slice_and_what_it_starts_does_not() -> None:
    default = sched.thread_slice_ns()

    def loop_thread() -> tuple[bool, int | None, int | None, str]:
        ok = sched.set_loop_slice(300) and sched.set_loop_slice(250)  # (asked again: changed again)
        mine = sched.thread_slice_ns()
        # an executor thread and a helper process started afterwards: the default again
        # (SCHED_FLAG_RESET_ON_FORK), not the loop's slice
        worker = in_a_thread(sched.thread_slice_ns)
        child = subprocess.run(["cat", "/proc/self/sched"], capture_output=True, text=True, check=True).stdout
        return ok, mine, worker, child

    ok, mine, worker, child = in_a_thread(loop_thread)
    assert ok and mine == 250_000
    assert worker == default
    (line,) = [ln for ln in child.splitlines() if ln.startswith("se.slice")]
    assert int(line.rsplit(":", 1)[1]) == default


def test_zero_leaves_the_thread_as_it_is() -> None:
    before = in_a_thread(sched.thread_slice_ns)
    assert in_a_thread(lambda: (sched.set_loop_slice(0), sched.thread_slice_ns())) == (False, before)


def test_key_default_and_validation() -> None:
    cfg = BrokerConfig()
    assert cfg.loop_sched_slice_micros == 0  # (off by default: docs/performance.md)
    assert cfg.with_updates({"loopSchedSliceMicros": "100"}).loop_sched_slice_micros == 100
    assert cfg.with_updates({"loopSchedSliceMicros": "100000"}).loop_sched_slice_micros == 100_000
    for bad in ("-1", "50", "99", "100001", "x"):  # (under 100: the kernel would not honour it)
        with pytest.raises(ConfigError, match="loopSchedSliceMicros"):
            cfg.with_updates({"loopSchedSliceMicros": bad})
