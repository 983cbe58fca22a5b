"""A request's reply future (transport/reply.py): the awaiting task resumes inside the read that
brings its reply, and its next request leaves with that read's batch; every other ending (a
timeout, a cancel, a lost connection, other waiters) keeps a future's usual behaviour."""

from __future__ import annotations

import asyncio
import contextvars
import time

import pytest

from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingConnectError, RemotingTimeoutError
from pocketmq.remoting.transport.client import ReplyConnection
from pocketmq.remoting.transport.dispatch import ProcessorDispatcher
from pocketmq.remoting.transport.reply import ReplyFuture
from tests.remoting.test_transport import ECHO, RecordingTransport

_var: contextvars.ContextVar[str] = contextvars.ContextVar("_var", default="loop")


def reply_connection() -> tuple[ReplyConnection, RecordingTransport]:
    conn = ReplyConnection(ProcessorDispatcher())
    transport = RecordingTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def reply(opaque: int, remark: str | None = None) -> bytes:
    return RemotingCommand(0, opaque, 1, remark).encode()


async def feed(conn: ReplyConnection, data: bytes) -> None:
    """``data_received`` as the loop calls it: from a callback, with no task running."""
    asyncio.get_running_loop().call_soon(conn.data_received, data)
    await asyncio.sleep(0)


async def test_the_awaiting_task_resumes_in_the_read_and_its_next_request_joins_its_batch() -> None:
    conn, transport = reply_connection()
    seen: list[tuple[int, str]] = []

    async def sender() -> None:
        _var.set("task")
        for opaque in (1, 2):
            response = await conn.request(RemotingCommand(ECHO, opaque, body=b"b"), 5.0)
            seen.append((response.opaque, _var.get()))  # in the task's own context
        conn.request(RemotingCommand(ECHO, 3), 5.0)

    task = asyncio.create_task(sender())
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # request 1 written, its (empty) flush turn run
    assert transport.opaques() == [1] and conn._out is None
    assert isinstance(conn.pending[1][0], ReplyFuture)
    await feed(conn, reply(1))
    # resumed within data_received: request 2 was written at the end of the read's handling,
    # in one write, and no flush turn is pending
    assert seen == [(1, "task")] and transport.opaques() == [1, 2] and len(transport.calls) == 2
    assert conn._out is None and _var.get() == "loop"
    await feed(conn, reply(2))
    assert seen == [(1, "task"), (2, "task")] and task.done() and task.exception() is None
    assert transport.opaques() == [1, 2, 3] and len(transport.calls) == 3 and sorted(conn.pending) == [3]


async def test_several_tasks_resumed_by_one_read_write_their_requests_together() -> None:
    conn, transport = reply_connection()

    async def one(opaque: int) -> None:
        await conn.request(RemotingCommand(ECHO, opaque), 5.0)
        conn.request(RemotingCommand(ECHO, opaque + 10), 5.0)

    tasks = [asyncio.create_task(one(k)) for k in (1, 2, 3)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    calls = len(transport.calls)
    await feed(conn, reply(1) + reply(2) + reply(3))
    assert all(t.done() for t in tasks)
    assert len(transport.calls) == calls + 1 and transport.opaques()[-3:] == [11, 12, 13]


async def test_a_read_fed_by_a_task_wakes_the_awaiting_task_next_turn() -> None:
    conn, transport = reply_connection()
    task = asyncio.create_task(_await(conn.request(RemotingCommand(ECHO, 1), 5.0)))
    await asyncio.sleep(0)
    conn.data_received(reply(1, "late"))  # this test's task runs: no direct wake-up
    assert not task.done()
    assert (await task).remark == "late"


async def test_a_timeout_wakes_the_task_with_remoting_timeout_error() -> None:
    conn, transport = reply_connection()
    task = asyncio.create_task(_await(conn.request(RemotingCommand(ECHO, 1), 0.01)))
    await asyncio.sleep(0)
    assert conn.expire(time.monotonic() + 1.0) == 1  # (what the sweeper task does)
    with pytest.raises(RemotingTimeoutError):
        await task
    conn.data_received(reply(1))  # the late reply is dropped
    assert conn.pending == {}


async def test_a_lost_connection_wakes_the_task_with_connect_error() -> None:
    conn, transport = reply_connection()
    task = asyncio.create_task(_await(conn.request(RemotingCommand(ECHO, 1), 5.0)))
    await asyncio.sleep(0)
    conn.connection_lost(None)
    with pytest.raises(RemotingConnectError):
        await task


async def test_a_cancelled_task_is_cancelled_and_its_late_reply_dropped() -> None:
    conn, transport = reply_connection()
    task = asyncio.create_task(_await(conn.request(RemotingCommand(ECHO, 1), 5.0)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    conn.data_received(reply(1))
    assert conn.pending == {}


async def test_wait_for_and_gather_on_the_future_behave_as_on_a_plain_one() -> None:
    conn, transport = reply_connection()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(conn.request(RemotingCommand(ECHO, 1), 5.0), 0.01)
    first = conn.request(RemotingCommand(ECHO, 2), 5.0)
    second = conn.request(RemotingCommand(ECHO, 3), 5.0)
    both = asyncio.gather(first, second)
    done: list[bool] = []
    first.add_done_callback(lambda f: done.append(f.done()))
    conn.data_received(reply(1) + reply(2, "a") + reply(3, "b"))  # 1: cancelled, dropped
    assert [r.remark for r in await both] == ["a", "b"] and done == [True]
    assert conn.pending == {}


async def test_a_removed_wake_up_is_not_called() -> None:
    loop = asyncio.get_running_loop()
    conn, transport = reply_connection()
    fut = conn.request(RemotingCommand(ECHO, 1), 5.0)
    calls: list[object] = []
    ctx = contextvars.copy_context()
    fut.add_done_callback(calls.append, context=ctx)
    assert fut.remove_done_callback(calls.append) == 1
    conn.data_received(reply(1))
    await asyncio.sleep(0)
    assert calls == [] and fut.result().opaque == 1 and fut.get_loop() is loop


async def _await(fut: asyncio.Future[RemotingCommand]) -> RemotingCommand:
    return await fut
