from __future__ import annotations

import asyncio
import threading

import pytest

from pocketmq.client.sync import _loop_thread, run


def test_run_returns_results_and_times_out() -> None:
    async def add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    assert run(add(1, 2)) == 3
    with pytest.raises(TimeoutError):
        run(asyncio.sleep(5), timeout=0.05)
    with pytest.raises(ZeroDivisionError):

        async def boom() -> None:
            raise ZeroDivisionError

        run(boom())


def test_calling_from_the_loop_thread_is_refused() -> None:
    runner = _loop_thread()
    assert runner.loop is not None
    seen: list[BaseException] = []

    def inside() -> None:
        coro = asyncio.sleep(0)
        try:
            run(coro)
        except RuntimeError as exc:
            seen.append(exc)

    done = threading.Event()
    runner.loop.call_soon_threadsafe(lambda: (inside(), done.set()))
    assert done.wait(5)
    assert seen and "own event loop thread" in str(seen[0])
