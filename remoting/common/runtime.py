"""Process entry point: one event loop, signals, and the blocking-call executor.

:func:`run` is what ``mqnamesrv``/``mqbroker``/``pocketmq up`` call:

* the loop is uvloop's when importable (``asyncio.Runner(loop_factory=uvloop.new_event_loop)``,
  never the deprecated ``uvloop.install()``), else the stdlib loop;
* the default executor is a bounded thread pool meant only for GIL-releasing calls (fsync,
  fallocate, madvise via ctypes, unlinking big files); see docs/development.md;
* SIGTERM/SIGINT: the first one calls the graceful ``shutdown`` callback (or cancels ``main``
  when there is none); a second one cancels ``main`` at once.

:func:`run_until_stopped` and :func:`boot_done` are the server entry points' common steps
(``mqnamesrv``, ``mqbroker``, ``pocketmq up``): ``main(stop)`` runs until the first signal sets
``stop``, a forced exit is status 130, and once up a server freezes its long-lived objects and
prints its boot line.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import click

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: a server's third ``gc`` threshold (CPython's default: 10), see :func:`freeze_heap`
GEN2_THRESHOLD = 100

__all__ = [
    "boot_done",
    "default_executor_workers",
    "freeze_heap",
    "new_event_loop",
    "run",
    "run_until_stopped",
    "server_command",
    "uvloop_available",
]


def uvloop_available() -> bool:
    """Whether uvloop can be imported on this platform."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def new_event_loop(*, use_uvloop: bool = True) -> asyncio.AbstractEventLoop:
    """A fresh uvloop loop when available and wanted, else a stdlib loop."""
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
    return asyncio.new_event_loop()


def default_executor_workers() -> int:
    """Threads for blocking syscalls: enough to overlap a few fsyncs, never a crowd (4..16)."""
    return max(4, min(16, (os.cpu_count() or 1) * 2))


class _SignalState:
    """What the signal handlers do; lives only for one :func:`run` call."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        main_task: asyncio.Task[Any],
        shutdown: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self.loop = loop
        self.main_task = main_task
        self.shutdown = shutdown
        self.count = 0
        self.shutdown_task: asyncio.Task[None] | None = None

    async def _run_shutdown(self) -> None:
        assert self.shutdown is not None
        try:
            await self.shutdown()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("graceful shutdown failed; cancelling main")
            self.main_task.cancel()

    def on_signal(self, signum: int) -> None:
        self.count += 1
        name = signal.Signals(signum).name
        if self.count == 1 and self.shutdown is not None:
            logger.info("received %s: shutting down gracefully", name)
            # Kept referenced here: the loop holds tasks only weakly.
            self.shutdown_task = self.loop.create_task(self._run_shutdown(), name="graceful-shutdown")
            return
        logger.warning("received %s: cancelling main", name)
        if self.shutdown_task is not None:
            self.shutdown_task.cancel()
        self.main_task.cancel()


async def _main_with_signals(
    main: Callable[[], Coroutine[Any, Any, T]],
    shutdown: Callable[[], Awaitable[None]] | None,
    handle_signals: bool,
) -> T:
    loop = asyncio.get_running_loop()
    main_task = loop.create_task(main(), name="main")
    installed: list[int] = []
    state = _SignalState(loop, main_task, shutdown)
    if handle_signals and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, state.on_signal, int(sig))
            except (NotImplementedError, RuntimeError):  # pragma: no cover - non-POSIX
                continue
            installed.append(int(sig))
    try:
        return await main_task
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        pending = state.shutdown_task
        if pending is not None and not pending.done():
            # main returned because shutdown asked it to: let shutdown finish its cleanup,
            # unless main was cancelled (forced exit), in which case shutdown goes too.
            if main_task.cancelled():
                pending.cancel()
            await asyncio.wait({pending}, timeout=30)


def run(
    main: Callable[[], Coroutine[Any, Any, T]],
    *,
    shutdown: Callable[[], Awaitable[None]] | None = None,
    use_uvloop: bool = True,
    executor_workers: int | None = None,
    handle_signals: bool = True,
    debug: bool | None = None,
) -> T:
    """Run ``main()`` to completion on a fresh loop and return its result.

    Args:
        main: factory of the main coroutine (called inside the loop).
        shutdown: awaited on the first SIGTERM/SIGINT; it should make ``main`` return (e.g. stop
            the server and set the event ``main`` waits on). ``None``: the first signal cancels main.
        use_uvloop: prefer uvloop when importable.
        executor_workers: size of the default executor (:func:`default_executor_workers`).
        handle_signals: install SIGTERM/SIGINT handlers (only possible on the main thread).
        debug: asyncio debug mode.

    Raises:
        asyncio.CancelledError: ``main`` was cancelled by a signal (callers usually exit 0/130).
        Exception: whatever ``main`` raised.
    """
    workers = executor_workers or default_executor_workers()
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pocketmq-io")
    with asyncio.Runner(debug=debug, loop_factory=lambda: new_event_loop(use_uvloop=use_uvloop)) as runner:
        runner.get_loop().set_default_executor(executor)
        return runner.run(_main_with_signals(main, shutdown, handle_signals))


def run_until_stopped(main: Callable[[asyncio.Event], Coroutine[Any, Any, T]]) -> T:
    """Run ``main(stop)`` with :func:`run`; the first SIGTERM/SIGINT sets ``stop``.

    ``main`` should shut its servers down cleanly once ``stop`` is set and return. A second
    signal cancels it: the process then exits with status 130 (``SystemExit``), as a shell
    reports an interrupted command. Any other exception of ``main`` propagates.
    """
    stop = asyncio.Event()

    async def shutdown() -> None:
        stop.set()

    try:
        return run(lambda: main(stop), shutdown=shutdown)
    except asyncio.CancelledError:
        sys.exit(130)


def freeze_heap() -> None:
    """A server process, before its port opens: collect once, then freeze the heap.

    Everything built so far (imported modules, config, tables) lives until shutdown, yet each
    full (gen2) collection traverses it again (one took 15 ms in a broker during the latency
    bench, a p99 outlier). ``gc.freeze()`` moves these objects to the permanent generation, so
    collections only walk what the traffic allocates. Full collections then also come
    ``GEN2_THRESHOLD`` young-generation (gen1) collections apart instead of 10: connections are
    long-lived objects freed by reference counting, and opening 11,100 of them (T16, ~9 objects
    each) ran one or two full collections of 30-90 ms each that found nothing to free.

    This collection (40-90 ms on a 2-core VM) runs before ``start``, while no client can be
    connected; :func:`boot_done` freezes what ``start`` built since without collecting again.
    """
    gc.collect()
    gc.freeze()
    gen0, gen1, _gen2 = gc.get_threshold()
    gc.set_threshold(gen0, gen1, GEN2_THRESHOLD)


def boot_done(line: str, *, freeze_gc: bool) -> None:
    """A server process is up: optionally freeze what its start built, then print the boot line
    on stdout (the one Java's servers print; scripts wait for it, so it is flushed at once).

    ``freeze_gc`` (a server process that called :func:`freeze_heap` before its start, not
    in-process callers such as tests): the objects ``start`` made are frozen too, as they are.
    The port is open by now, so no collection runs here: a full one over them took 10-110 ms on
    the loop (their few cyclic leftovers, ~40 objects in a broker's start, stay for good).
    """
    if freeze_gc:
        gc.freeze()
    print(line, flush=True)


def server_command(conf_help: str) -> Callable[[Callable[..., None]], click.Command]:
    """The click command of ``mqnamesrv`` and ``mqbroker`` with the options both take:
    ``-c/--config-file`` (as RocketMQ's), ``--set KEY=VALUE`` (repeatable; stands in for
    RocketMQ's ``-D`` overrides), ``--log-level`` (default from ``POCKETMQ_LOG_LEVEL``, else INFO)
    and ``-h/--help``. The function receives them as ``conf``, ``overrides`` and ``log_level``;
    its own ``click.option`` decorators go below this one."""

    def make(main: Callable[..., None]) -> click.Command:
        for option in (
            click.option(
                "--log-level",
                default=lambda: os.environ.get("POCKETMQ_LOG_LEVEL", "INFO"),
                show_default="INFO",
            ),
            click.option(
                "--set",
                "overrides",
                multiple=True,
                metavar="KEY=VALUE",
                help="override any config key (repeatable)",
            ),
            click.option("-c", "--config-file", "conf", type=click.Path(dir_okay=False), help=conf_help),
        ):
            main = option(main)
        return click.command(context_settings={"help_option_names": ["-h", "--help"]})(main)

    return make
