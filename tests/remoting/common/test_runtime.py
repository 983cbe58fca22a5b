from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Awaitable, Callable

import pytest

from pocketmq.remoting.common import runtime


def test_run_returns_result_on_uvloop_when_available() -> None:
    async def main() -> str:
        return type(asyncio.get_running_loop()).__module__

    module = runtime.run(main)
    if runtime.uvloop_available():
        assert module.startswith("uvloop")
    else:  # pragma: no cover
        assert module.startswith("asyncio")


def test_stdlib_fallback() -> None:
    async def main() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert runtime.run(main, use_uvloop=False).startswith("asyncio")


def test_default_executor_is_bounded_and_named() -> None:
    async def main() -> str:
        return await asyncio.get_running_loop().run_in_executor(None, lambda: threading.current_thread().name)

    assert runtime.run(main, executor_workers=2).startswith("pocketmq-io")
    assert 4 <= runtime.default_executor_workers() <= 16


def test_exception_from_main_propagates() -> None:
    async def main() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        runtime.run(main)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_first_signal_runs_graceful_shutdown(sig: signal.Signals) -> None:
    stopped: list[str] = []

    async def body() -> str:
        done = asyncio.Event()

        async def shutdown() -> None:
            stopped.append("shutdown")
            done.set()

        holder["shutdown"] = shutdown
        os.kill(os.getpid(), sig)
        async with asyncio.timeout(5):
            await done.wait()
        return "clean"

    holder: dict[str, object] = {}

    async def shutdown_proxy() -> None:
        fn = holder["shutdown"]
        assert callable(fn)
        await fn()

    assert runtime.run(body, shutdown=shutdown_proxy) == "clean"
    assert stopped == ["shutdown"]
    # handlers are removed afterwards: SIGINT is Python's default again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


async def _sigterm_then_wait() -> None:
    """A main that receives SIGTERM and would run on for 5 s."""
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.sleep(5)


async def _hanging_shutdown() -> None:
    await asyncio.sleep(0)
    os.kill(os.getpid(), signal.SIGTERM)  # the impatient operator
    await asyncio.sleep(3600)


async def _bad_shutdown() -> None:
    raise RuntimeError("shutdown bug")


@pytest.mark.parametrize(
    "shutdown",
    [None, _hanging_shutdown, _bad_shutdown],
    ids=[
        "signal_without_shutdown_cancels_main",
        "second_signal_forces_cancellation_when_shutdown_hangs",
        "failing_shutdown_cancels_main",
    ],
)
def test_signal_ends_in_cancelling_main(shutdown: Callable[[], Awaitable[None]] | None) -> None:
    with pytest.raises(asyncio.CancelledError):
        runtime.run(_sigterm_then_wait, shutdown=shutdown)


def test_run_off_main_thread_skips_signal_handlers() -> None:
    result: list[int] = []

    async def main() -> int:
        return 7

    t = threading.Thread(target=lambda: result.append(runtime.run(main)))
    t.start()
    t.join(10)
    assert result == [7]


def test_run_until_stopped_sets_stop_on_the_first_signal() -> None:
    async def main(stop: asyncio.Event) -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(5):
            await stop.wait()
        return "clean"

    assert runtime.run_until_stopped(main) == "clean"


def test_run_until_stopped_exits_130_when_forced() -> None:
    async def main(stop: asyncio.Event) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await stop.wait()
        os.kill(os.getpid(), signal.SIGINT)  # the second signal: main is cancelled
        await asyncio.sleep(5)

    with pytest.raises(SystemExit) as info:
        runtime.run_until_stopped(main)
    assert info.value.code == 130


def test_freeze_heap_and_boot_done(capsys: pytest.CaptureFixture[str]) -> None:
    """``freeze_heap`` (before the port opens) collects and freezes and sets the third
    threshold; ``boot_done`` (the port is open) freezes what came since without a collection."""
    import gc

    before = gc.get_freeze_count()
    thresholds = gc.get_threshold()
    try:
        runtime.boot_done("The Name Server boot success. serializeType=JSON", freeze_gc=False)
        assert gc.get_freeze_count() == before and gc.get_threshold() == thresholds
        full = gc.get_stats()[2]["collections"]
        runtime.freeze_heap()
        assert gc.get_stats()[2]["collections"] == full + 1
        frozen = gc.get_freeze_count()
        assert frozen > before
        assert gc.get_threshold() == (*thresholds[:2], runtime.GEN2_THRESHOLD)
        made_since = [[i] for i in range(100)]  # tracked containers built after the freeze
        runtime.boot_done("up", freeze_gc=True)
        assert gc.get_stats()[2]["collections"] == full + 1  # no second collection
        assert gc.get_freeze_count() >= frozen + len(made_since)
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
    assert capsys.readouterr().out == "The Name Server boot success. serializeType=JSON\nup\n"
