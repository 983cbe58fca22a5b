from __future__ import annotations

import asyncio
import logging
from collections import deque

import pytest

from pocketmq.remoting.common.service import Service, TaskSet, wake_first


class Counter(Service):
    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.runs = 0
        self.ran = asyncio.Event()
        self.shutdowns = 0
        self.fail_on: set[int] = set()

    async def run_once(self) -> None:
        self.runs += 1
        self.ran.set()
        if self.runs in self.fail_on:
            raise RuntimeError(f"boom {self.runs}")

    async def on_shutdown(self) -> None:
        self.shutdowns += 1


async def wait_runs(svc: Counter, n: int) -> None:
    async with asyncio.timeout(5):
        while svc.runs < n:
            svc.ran.clear()
            await svc.ran.wait()


async def test_runs_periodically_and_stops() -> None:
    svc = Counter(interval=0.01)
    svc.start()
    assert svc.is_running
    await wait_runs(svc, 3)
    await svc.stop()
    assert not svc.is_running
    assert svc.shutdowns == 1
    runs = svc.runs
    await asyncio.sleep(0.05)
    assert svc.runs == runs  # nothing after stop
    await svc.stop()  # idempotent
    assert svc.shutdowns == 1


async def test_wakeup_runs_immediately_without_interval() -> None:
    svc = Counter(interval=None)
    svc.start()
    await wait_runs(svc, 1)  # the first iteration runs at start
    await asyncio.sleep(0.02)
    assert svc.runs == 1  # no interval: it waits for a wakeup
    svc.wakeup()
    await wait_runs(svc, 2)
    await svc.stop()


async def test_wakeup_during_run_is_not_lost() -> None:
    gate = asyncio.Event()
    second = asyncio.Event()

    class Slow(Service):
        runs = 0

        async def run_once(self) -> None:
            self.runs += 1
            if self.runs == 1:
                await gate.wait()
            else:
                second.set()

    svc = Slow(interval=None)
    svc.start()
    await asyncio.sleep(0)  # first iteration is now blocked on the gate
    await asyncio.sleep(0)
    assert svc.runs == 1
    svc.wakeup()  # arrives while run_once is in progress
    gate.set()
    async with asyncio.timeout(5):
        await second.wait()
    await svc.stop()


async def test_initial_delay_is_interruptible_by_stop() -> None:
    svc = Counter(interval=0.01, initial_delay=60)
    svc.start()
    await asyncio.sleep(0.01)
    assert svc.runs == 0
    async with asyncio.timeout(2):
        await svc.stop()
    assert svc.runs == 0
    assert svc.shutdowns == 1


async def test_iteration_errors_are_logged_and_loop_continues(caplog: pytest.LogCaptureFixture) -> None:
    svc = Counter(interval=0.001, name="flaky")
    svc.fail_on = {1, 2}
    with caplog.at_level(logging.ERROR, logger="pocketmq.remoting.common.service"):
        svc.start()
        await wait_runs(svc, 4)
        await svc.stop()
    assert svc.failures == 2
    assert svc.iterations >= 3
    messages = [r for r in caplog.records if "flaky" in r.getMessage()]
    assert len(messages) == 2
    assert all(r.exc_info for r in messages)


async def test_stop_cancels_a_stuck_iteration_after_grace() -> None:
    cancelled = asyncio.Event()

    class Stuck(Service):
        async def run_once(self) -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise

    svc = Stuck(interval=1)
    svc.start()
    await asyncio.sleep(0.01)
    async with asyncio.timeout(2):
        await svc.stop(grace=0.05)
    assert cancelled.is_set()
    assert not svc.is_running


async def test_stop_lets_current_iteration_finish_within_grace() -> None:
    finished = asyncio.Event()

    class Brief(Service):
        async def run_once(self) -> None:
            await asyncio.sleep(0.02)
            finished.set()

    svc = Brief(interval=10)
    svc.start()
    await asyncio.sleep(0.005)
    await svc.stop(grace=2)
    assert finished.is_set()


async def test_start_twice_and_bad_arguments() -> None:
    svc = Counter(interval=1)
    svc.start()
    with pytest.raises(RuntimeError):
        svc.start()
    await svc.stop()
    with pytest.raises(ValueError):
        Counter(interval=-1)
    with pytest.raises(ValueError):
        Counter(interval=1, initial_delay=-1)


async def test_stop_without_start_still_runs_shutdown_hook() -> None:
    svc = Counter(interval=1)
    await svc.stop()
    assert svc.shutdowns == 1


async def test_run_once_is_directly_callable() -> None:
    svc = Counter(interval=1)
    await svc.run_once()
    assert svc.runs == 1


async def test_taskset_keeps_refs_logs_failures_and_cancels_newest_first(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = TaskSet("test")
    order: list[str] = []

    async def sleeper(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            order.append(name)
            raise

    async def failing() -> None:
        raise ValueError("bad")

    a = tasks.spawn(sleeper("a"), name="a")
    b = tasks.spawn(sleeper("b"), name="b")
    with caplog.at_level(logging.ERROR, logger="pocketmq.remoting.common.service"):
        f = tasks.spawn(failing(), name="failing")
        await asyncio.sleep(0.01)
    assert f.done()
    assert f not in tasks
    assert len(tasks) == 2
    assert any("failing" in r.getMessage() and r.exc_info for r in caplog.records)
    await tasks.cancel_all()
    assert order == ["b", "a"]
    assert a.cancelled() and b.cancelled()
    assert len(tasks) == 0


async def test_taskset_finished_tasks_leave_and_cancelled_are_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = TaskSet()

    async def quick() -> int:
        return 7

    t = tasks.spawn(quick())
    assert await t == 7
    await asyncio.sleep(0)
    assert len(tasks) == 0
    with caplog.at_level(logging.ERROR):
        s = tasks.spawn(asyncio.sleep(3600))
        await asyncio.sleep(0)
        s.cancel()
        await asyncio.sleep(0.01)
    assert not caplog.records


async def test_service_can_stop_itself_from_run_once() -> None:
    class OneShot(Service):
        runs = 0

        async def run_once(self) -> None:
            self.runs += 1
            await self.stop()

    svc = OneShot(interval=0.001)
    svc.start()
    async with asyncio.timeout(5):
        while svc.is_running:  # noqa: ASYNC110 - polling the public flag is the point here
            await asyncio.sleep(0.001)
    assert svc.runs == 1
    await svc.stop()  # the outside stop completes the shutdown


async def test_cancel_and_wait_stops_a_task_and_keeps_the_callers_cancellation() -> None:
    from pocketmq.remoting.common.service import cancel_and_wait

    await cancel_and_wait(None)
    sweeper = asyncio.create_task(asyncio.sleep(3600))
    await cancel_and_wait(sweeper)
    assert sweeper.cancelled()

    # the caller being cancelled while it waits is not swallowed
    release = asyncio.Event()

    async def slow_to_stop() -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await release.wait()  # cleanup that takes a while
        return "stopped"

    inner = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    caller = asyncio.create_task(cancel_and_wait(inner))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    assert await inner == "stopped"


async def test_wake_first_skips_the_done_waiters_and_wakes_one() -> None:
    loop = asyncio.get_running_loop()
    cancelled, first, second = loop.create_future(), loop.create_future(), loop.create_future()
    cancelled.cancel()
    waiters = deque([cancelled, first, second])
    wake_first(waiters)
    assert first.done() and not second.done()
    assert list(waiters) == [second]
    wake_first(deque())  # nobody waits: nothing happens
