"""What one peer may cost a server: the limits a hostile or broken client runs into.

RocketMQ's Netty server bounds a frame (``frameMaxLength``) and closes idle channels; it lets
a peer hold a partial frame forever, parse a header of any size and open any number of
connections. pocketmq adds the bounds below (broker.conf / namesrv.properties keys in
brackets, defaults documented in ``docs/limits.md``):

* ``serverHeaderMaxLength`` (256 KiB): a header longer than this closes the connection as soon
  as its length word is read, before its bytes are buffered or parsed (the largest header a
  real client sends is a send's properties, which RocketMQ caps at 32 KiB);
* ``serverFrameCompletionTimeoutSeconds`` (30): a frame begun and not completed within this
  closes the connection (a peer trickling one byte a second);
* ``serverPartialFrameMemoryMax`` (256 MiB): the bytes of partial frames across all
  connections; the connection whose partial frame would pass it is closed;
* ``serverMaxConnections`` (0: the process's open-file limit minus a reserve of 1024 for the
  store and the logs): connections beyond it are closed at accept, with a warning, instead of
  running out of file descriptors (which hangs new clients with nothing said);
* ``writeBufferHighWaterMark`` / ``writeBufferLowWaterMark`` (64 KiB / 16 KiB): replies
  the peer has not read pile up to the high mark, then that connection's reading stops, and so
  does the handling of requests it already sent, until the buffer drains below the low mark.

Rejections are logged through :class:`RateLimitedLog` (a junk-sending peer must not fill the
disk with warnings).

Running out of file descriptors (``EMFILE``/``ENFILE``: connections past the open-file limit,
store files, logs) is logged, rate-limited, naming the limit (:func:`fd_exhaustion`): asyncio
reports a failed accept to the loop's exception handler (:func:`log_accept_errors` turns it into
that line); uvloop accepts and drops the connection silently, so the server's sweeper also probes
for a free descriptor once a second (:func:`probe_fds`). Before, new clients hung with nothing said.

Flow control (:class:`QueueWait`, the broker's ``brokerFastFailureEnable`` and
``waitTimeMillsIn*Queue`` keys): RocketMQ answers a request that waited in its processor's
thread-pool queue longer than the key's value with SYSTEM_BUSY (2), so the client retries on
another broker instead of waiting for a reply that comes too late. pocketmq's queue is a
connection's backlog: the commands of a large read handled ``PER_TURN`` per loop turn. Each
slice of the backlog compares its oldest command's read time with the shortest limit (one
comparison per slice, nothing per message); only past it is each command's own limit looked up.
The one-writer event loop is pocketmq's put lock: a handling that held the loop longer than
``osPageCacheBusyTimeOutMills`` is recorded, and the commands that waited through it get the
``[PCBUSY_CLEAN_QUEUE]`` remark instead of ``[TIMEOUT_CLEAN_QUEUE]``.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import resource
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingConnectError
from pocketmq.remoting.protocol.frame import DEFAULT_MAX_HEADER_SIZE

__all__ = [
    "DEFAULT_FRAME_TIMEOUT",
    "DEFAULT_MAX_HEADER_SIZE",
    "DEFAULT_PARTIAL_FRAME_BUDGET",
    "FD_RESERVE",
    "PartialFrameBudget",
    "QueueWait",
    "RateLimitedLog",
    "TurnShare",
    "fd_exhaustion",
    "forget_frames",
    "log_accept_errors",
    "probe_fds",
    "max_connections",
    "reserve_fd_table",
    "server_limits",
]

#: ``serverFrameCompletionTimeoutSeconds`` default.
DEFAULT_FRAME_TIMEOUT = 30.0
#: ``serverPartialFrameMemoryMax`` default.
DEFAULT_PARTIAL_FRAME_BUDGET = 256 * 1024 * 1024
#: file descriptors kept out of ``serverMaxConnections`` (0) for store segments, logs, pipes.
FD_RESERVE = 1024


def max_connections(configured: int) -> int:
    """``serverMaxConnections``: ``configured`` if > 0, else the open-file limit minus a reserve."""
    if configured > 0:
        return configured
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1_000_000
    return max(16, soft - FD_RESERVE)


class LimitSettings(Protocol):
    """The keys above, as the broker's and the name server's configs spell them."""

    @property
    def write_buffer_high_water_mark(self) -> int: ...
    @property
    def write_buffer_low_water_mark(self) -> int: ...
    @property
    def server_header_max_length(self) -> int: ...
    @property
    def server_frame_completion_timeout_seconds(self) -> float: ...
    @property
    def server_partial_frame_memory_max(self) -> int: ...
    @property
    def server_max_connections(self) -> int: ...


def server_limits(cfg: LimitSettings) -> dict[str, Any]:
    """The ``RemotingServerConfig`` fields set by a config's limit keys."""
    return {
        "max_header_size": cfg.server_header_max_length,
        "frame_timeout": float(cfg.server_frame_completion_timeout_seconds),
        "partial_frame_budget": cfg.server_partial_frame_memory_max,
        "max_connections": cfg.server_max_connections,
        "write_buffer_high": cfg.write_buffer_high_water_mark,
        "write_buffer_low": cfg.write_buffer_low_water_mark,
    }


class PartialFrameBudget:
    """Bytes of partial frames held across a server's connections (``serverPartialFrameMemoryMax``)."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int = DEFAULT_PARTIAL_FRAME_BUDGET) -> None:
        self.limit = limit
        self.used = 0


def forget_frames(exc: BaseException) -> None:
    """Drop the tracebacks of a closed connection's ``close_reason`` and what it chains to.

    A reason raised under the connection's own callbacks (a decoder error, a write that found
    the peer reset) has frames that hold the connection and its read (``self``, ``data``): a
    reference cycle that only a full collection frees, and after ``gc.freeze()`` those come
    seldom. Under T14's fuzzing ~600 dead connections with their reads (~23 MiB) waited for one.
    The type and message are what the reason is kept for.
    """
    chain: list[BaseException | None] = [exc]
    for _ in range(8):  # a few links: enough for any chain the transport makes
        if not chain:
            break
        e = chain.pop()
        if e is not None:
            e.__traceback__ = None
            chain += (e.__cause__, e.__context__)


class TurnShare:
    """Work that may wait, run round-robin for at most ``budget`` seconds a loop turn.

    What connections closed by their peers still have to serve (``_serve_lost``) comes here: a
    callback per connection scheduled with ``call_soon`` all run in the same loop turn, so a
    hundred non-reading clients closing together (T16, ~2,000 pulls read from each) held the
    loop 85-156 ms a turn even with each one's share cut to ``PER_TURN`` commands. The budget
    (0.5 ms) is about what a healthy request waits at most behind this work: with 4 ms, 100
    never-reading clients idle-closed together kept the loop in ~4 ms turns for seconds (T16:
    ~80,000 pulls read before their close, ~35 µs each, served over ~2 s).
    """

    __slots__ = ("_budget", "_loop", "_queue", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop, budget: float = 0.0005) -> None:
        self._loop = loop
        self._budget = budget
        self._queue: deque[Callable[[], None]] = deque()
        self._scheduled = False

    def add(self, work: Callable[[], None]) -> None:
        """Run ``work`` in a coming loop turn (after those added before it)."""
        self._queue.append(work)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run)

    def _run(self) -> None:
        queue = self._queue
        end = time.monotonic() + self._budget
        for _ in range(len(queue)):  # each at most once a turn; what it adds waits for the next
            work = queue.popleft()
            try:
                work()
            except Exception:
                logging.getLogger(__name__).exception("deferred %r failed", work)
            if time.monotonic() >= end:
                break
        if queue:
            self._loop.call_soon(self._run)
        else:
            self._scheduled = False


class RateLimitedLog:
    """At most one record per ``interval`` seconds per key; the next one says how many were dropped."""

    __slots__ = ("_dropped", "_interval", "_last", "_logger")

    def __init__(self, logger: logging.Logger, interval: float = 10.0) -> None:
        self._logger = logger
        self._interval = interval
        self._last: dict[str, float] = {}
        self._dropped: dict[str, int] = {}

    def emit(self, key: str, msg: str, *args: object) -> None:
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._dropped[key] = self._dropped.get(key, 0) + 1
            return
        self._last[key] = now
        dropped = self._dropped.pop(key, 0)
        if dropped:
            msg += " (%d similar messages suppressed)"
            args = (*args, dropped)
        self._logger.warning(msg, *args)


#: RocketMQ's remarks (``BrokerFastFailure``): period in queue (ms), commands still queued
TIMEOUT_REMARK = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: %sms, size of queue: %d"
PCBUSY_REMARK = "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: %sms, size of queue: %d"


class _Replier(Protocol):
    remote_addr: str

    def send(self, cmd: RemotingCommand) -> None: ...


class QueueWait:
    """How long a request may wait between its read and its handling, by request code.

    ``limits`` maps request codes to seconds (codes absent: no limit). ``held_limit`` is
    ``osPageCacheBusyTimeOutMills`` in seconds: :meth:`held` records a handling that held the
    loop longer, and a request read before that hold ended is answered with the page-cache remark.
    ``pc_codes`` are the codes that remark applies to (RocketMQ cleans only the send queue so).
    """

    __slots__ = ("busy_replies", "held_limit", "held_until", "limits", "pc_codes", "shortest")

    def __init__(
        self, limits: dict[int, float], *, held_limit: float = 1.0, pc_codes: frozenset[int] = frozenset()
    ) -> None:
        #: when the last hold longer than ``held_limit`` ended (monotonic; 0.0: none yet)
        self.held_until = 0.0
        #: requests answered SYSTEM_BUSY (or, oneway, dropped) instead of handled
        self.busy_replies = 0
        self.update(limits, held_limit=held_limit, pc_codes=pc_codes)

    def update(self, limits: dict[int, float], *, held_limit: float, pc_codes: frozenset[int]) -> None:
        """Adopt new limits (a config update); no limits and an infinite ``held_limit``: off."""
        self.limits = dict(limits)
        self.held_limit = held_limit
        self.pc_codes = pc_codes
        #: the slice check: below this wait no command of a slice can be answered busy
        shortest = min(self.limits.values(), default=float("inf"))
        self.shortest = min(shortest, held_limit) if pc_codes else shortest

    def held(self, began: float, now: float) -> None:
        """A handling ran from ``began`` to ``now``; remember it if it held the loop too long."""
        if now - began > self.held_limit:
            self.held_until = now
            _limits_log.emit(
                "held",
                "the broker's loop was held %.0f ms (osPageCacheBusyTimeOutMills=%.0f): queued sends get SYSTEM_BUSY",
                (now - began) * 1000,
                self.held_limit * 1000,
            )

    def sift(
        self, commands: list[RemotingCommand], reads: list[float], now: float, queued: int, conn: _Replier
    ) -> tuple[list[RemotingCommand], list[float]]:
        """Answer SYSTEM_BUSY on ``conn`` to the ``commands`` (read at ``reads``) that waited
        too long; the others and their read times, to handle."""
        keep: list[RemotingCommand] = []
        kept_reads: list[float] = []
        for cmd, read_at in zip(commands, reads, strict=True):
            remark = None if cmd.flag & RPC_TYPE_RESPONSE else self.verdict(cmd.code, read_at, now, queued)
            if remark is None:
                keep.append(cmd)
                kept_reads.append(read_at)
            elif not cmd.flag & RPC_ONEWAY:
                try:
                    conn.send(RemotingCommand.response_to(cmd, ResponseCode.SYSTEM_BUSY, remark))
                except RemotingConnectError:
                    break  # closed meanwhile: nobody to answer, nothing more to handle
        if len(keep) < len(commands):
            _limits_log.emit(
                "busy",
                "broker busy: requests from %s waited up to %.0f ms since read, answered SYSTEM_BUSY",
                conn.remote_addr,
                (now - reads[0]) * 1000,
            )
        return keep, kept_reads

    def verdict(self, code: int, read_at: float, now: float, queued: int) -> str | None:
        """The busy remark for a request of ``code`` read at ``read_at``, or None to handle it.

        A request of ``pc_codes`` that waited through a hold (read before it ended) gets the
        page-cache remark whatever its wait (RocketMQ drains the whole send queue while the page
        cache is busy); any request that waited at least its code's limit gets the timeout one.
        """
        waited = now - read_at
        if code in self.pc_codes and read_at <= self.held_until:
            remark = PCBUSY_REMARK
        else:
            limit = self.limits.get(code)
            if limit is None or waited < limit:
                return None
            remark = TIMEOUT_REMARK
        self.busy_replies += 1
        return remark % (round(waited * 1000), queued)


_limits_log = RateLimitedLog(logging.getLogger(__name__))


_FD_ERRNOS = (errno.EMFILE, errno.ENFILE)


def fd_exhaustion(what: str) -> None:
    """Log (one line per 10 s) that ``what`` failed for lack of file descriptors, naming the limit."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    _limits_log.emit(
        "emfile",
        "out of file descriptors (open-file limit %s, ulimit -n): %s; raise the limit or lower serverMaxConnections",
        "unlimited" if soft == resource.RLIM_INFINITY else soft,
        what,
    )


#: the descriptor table :func:`reserve_fd_table` grows to at most (8 bytes of kernel memory each)
FD_TABLE_MAX = 65536


def reserve_fd_table(fds: int) -> int:
    """Grow this process's descriptor table to hold ``fds`` descriptors (at most
    ``FD_TABLE_MAX`` and the open-file limit) now, at startup; returns the size asked for.

    Why: the kernel doubles the table when a new descriptor does not fit, and in a process with
    threads (the broker's flush and executor threads) each doubling waits for an RCU grace
    period (``expand_fdtable`` -> ``synchronize_rcu``) with the loop thread blocked: 10-20 ms
    each on a loaded 2-vCPU VM, five of them while T16's 11,100 connections were accepted (the
    table never shrinks, so growing it once costs that wait once, before any client).
    """
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(fds, FD_TABLE_MAX, FD_TABLE_MAX if soft == resource.RLIM_INFINITY else soft)
    try:
        src = os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return want  # out of descriptors already: nothing to grow
    try:
        # F_DUPFD takes the lowest free descriptor >= its argument: it never replaces an open one
        os.close(fcntl.fcntl(src, fcntl.F_DUPFD, want - 1))
    except OSError:
        pass  # at a limit: the table grows on demand as before
    finally:
        os.close(src)
    return want


def probe_fds() -> bool:
    """Whether one more file descriptor can be opened (two syscalls); logs when not."""
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
    except OSError as exc:
        if exc.errno in _FD_ERRNOS:
            fd_exhaustion("new connections are dropped at accept and store files cannot be opened")
            return False
        raise
    os.close(fd)
    return True


def log_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Route the loop's "accept() out of system resource" reports for EMFILE/ENFILE to
    :func:`fd_exhaustion` (asyncio reports each failed accept, a flood once descriptors run out);
    every other report goes to the handler that was there. Installed once per loop."""
    previous = loop.get_exception_handler()
    if getattr(previous, "_pocketmq_fd", False):
        return

    def handler(lp: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in _FD_ERRNOS:
            fd_exhaustion(f"{context.get('message', 'accept failed')}")
        elif previous is not None:
            previous(lp, context)
        else:
            lp.default_exception_handler(context)

    handler._pocketmq_fd = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)
