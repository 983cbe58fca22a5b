"""A short scheduler slice for a server's event-loop thread (``loopSchedSliceMicros``).

Why: a broker's loop does a little work per wake-up (tens of µs a request) and then waits in
``epoll_wait``; on a small machine it shares the cores with its clients. Under Linux's EEVDF
scheduler (6.6+) a thread that wakes runs before the one on the CPU only if its virtual
deadline is earlier, and the deadline is its eligible time plus its *slice*. With the default
slice (0.7 ms times a log of the CPU count: 1.4 ms on 2 cores) a loop woken by a request often
waited for a client's turn to end, and a client woken by a reply often took the loop's core
before the loop had finished the turn (reput, the held pulls it wakes). Since Linux 6.12 a
thread may ask for its own slice (``sched_setattr``, ``SCHED_OTHER`` with ``sched_runtime``,
0.1-100 ms, no privilege needed); a short one makes the loop's deadline the earliest, so it
is woken at once and keeps its core to the end of a turn.

Off by default (``0``): on a noisy 2-core VM (docs/performance.md) the first alternated sets
measured ASYNC_FLUSH drain and e2e p50 better with 100 µs, a later set worse, and the
ASYNC_FLUSH e2e maximum was higher with it in 7 of 11 pairs; the key is there for a quieter
machine to judge.

Only the calling thread changes: ``SCHED_FLAG_RESET_ON_FORK`` gives threads and processes it
starts later (executors, the fsync and index helpers) the default slice again. Its nice value
is kept. On kernels without custom slices the call is accepted and has no effect, which is
detected (``sched_getattr`` reports no slice of the requested size) and logged.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import struct

__all__ = ["set_loop_slice", "thread_slice_ns"]

logger = logging.getLogger(__name__)

#: sched_setattr(2) / sched_getattr(2) syscall numbers (no glibc wrappers before 2.41)
_SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274, "i686": 351, "armv7l": 380, "ppc64le": 355, "s390x": 345}
_SYS_SCHED_GETATTR = {"x86_64": 315, "aarch64": 275, "i686": 352, "armv7l": 381, "ppc64le": 356, "s390x": 346}
#: struct sched_attr, SCHED_ATTR_SIZE_VER0 (48 bytes): size, policy, flags, nice, priority,
#: runtime, deadline, period
_SCHED_ATTR = struct.Struct("=IIQiIQQQ")
_SCHED_OTHER = 0
_SCHED_FLAG_RESET_ON_FORK = 0x01
#: the policy bit ``sched_getscheduler`` adds once reset-on-fork is set
_SCHED_RESET_ON_FORK = 0x40000000
#: the kernel's bounds for a fair task's slice (kernel/sched/syscalls.c), µs
MIN_SLICE_US = 100
MAX_SLICE_US = 100_000


def thread_slice_ns() -> int | None:
    """The calling thread's scheduler slice (ns) as ``sched_getattr`` reports it (a fair
    thread's ``sched_runtime`` since Linux 6.12); None where it reports none (older kernels
    say 0) or the call is unavailable."""
    nr = _SYS_SCHED_GETATTR.get(platform.machine())
    if nr is None:
        return None
    attr = ctypes.create_string_buffer(_SCHED_ATTR.size)
    if _libc().syscall(nr, 0, attr, _SCHED_ATTR.size, 0) != 0:
        return None
    runtime = _SCHED_ATTR.unpack(attr.raw)[5]
    return int(runtime) or None


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def set_loop_slice(micros: int) -> bool:
    """Ask for a ``micros`` µs scheduler slice for the calling thread (0: leave it as it is).
    True if the kernel now reports that slice; otherwise logs why not and returns False (the
    server runs on with the default)."""
    if micros <= 0:
        return False
    nr = _SYS_SCHED_SETATTR.get(platform.machine())
    if nr is None or not hasattr(os, "sched_getscheduler"):
        logger.warning(
            "loopSchedSliceMicros=%d: not supported on this platform; the default slice stays", micros
        )
        return False
    if os.sched_getscheduler(0) & ~_SCHED_RESET_ON_FORK != _SCHED_OTHER:  # (the bit a call before set)
        logger.info(
            "loopSchedSliceMicros=%d: the loop thread runs a non-default policy; left as it is", micros
        )
        return False
    nice = os.getpriority(os.PRIO_PROCESS, 0)  # (the calling thread's own on Linux)
    if nice < 0:  # (reset-on-fork would also take the negative nice from what it starts)
        logger.info("loopSchedSliceMicros=%d: the loop thread runs at nice %d; left as it is", micros, nice)
        return False
    attr = ctypes.create_string_buffer(
        _SCHED_ATTR.pack(
            _SCHED_ATTR.size, _SCHED_OTHER, _SCHED_FLAG_RESET_ON_FORK, nice, 0, micros * 1000, 0, 0
        ),
        _SCHED_ATTR.size,
    )
    libc = _libc()
    if libc.syscall(nr, 0, attr, 0) != 0:
        err = ctypes.get_errno()
        logger.warning(
            "loopSchedSliceMicros=%d: sched_setattr failed (%s); the default slice stays",
            micros,
            os.strerror(err),
        )
        return False
    got = thread_slice_ns()
    if got != micros * 1000:
        logger.warning(
            "loopSchedSliceMicros=%d: this kernel has no per-thread slices (Linux 6.12+); the default slice stays",
            micros,
        )
        return False
    logger.info("event loop thread: scheduler slice %d us (loopSchedSliceMicros)", micros)
    return True
