"""Reput at the end of a server read (``hooks.ReadEnd``, wired as the broker does): a put made
while a read's requests are handled has its reput slice run by that read's ``_handle``, after the
read's replies are written, with no ``call_soon``; a put made outside a read, the rest of a slice
past its budget and the retry after a failed slice still go through the loop, and a failure in
the slice does not break the read."""

from __future__ import annotations

import asyncio
import sys

import pytest

from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.hooks import ReadEnd
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig
from pocketmq.store import MessageStore
from pocketmq.store.services import reput as reput_module

from .conftest import make_msg, tiny_config

PUT = 300


async def _until(cond, timeout=5.0):
    async with asyncio.timeout(timeout):
        while not cond():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


@pytest.fixture
async def served(tmp_path, monkeypatch):
    """A started store and a server sharing one ReadEnd; ``events`` records each reply written
    and each reput slice with its caller and the queue's end when it began."""
    events: list[object] = []
    store = MessageStore(tiny_config(str(tmp_path / "s")))
    end = store.read_end = ReadEnd()
    store.load()
    await store.start()
    reput = store._services.reput
    slice_ = reput._slice_cb

    def spy() -> None:
        caller = sys._getframe(1)
        events.append(("slice", caller.f_code.co_name if caller else None, store.get_max_offset_in_queue("TopicA", 0)))
        slice_()

    reput._slice_cb = spy
    put = RemotingConnection._put

    def put_spy(self, transport, parts):
        events.append("reply")
        return put(self, transport, parts)

    monkeypatch.setattr(RemotingConnection, "_put", put_spy)
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1"))
    srv.read_end = end
    count = {"n": 1}

    def handler(conn, req):
        for i in range(count["n"]):
            store.put_message(make_msg(req.opaque * 100 + i))
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS, "stored")

    srv.register(PUT, handler)
    await srv.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)

    async def ask(opaque: int, n: int = 1) -> RemotingCommand:
        count["n"] = n
        writer.write(RemotingCommand(PUT, opaque, 0, None).encode())
        got = FrameDecoder().feed(await asyncio.wait_for(reader.read(65536), 5.0))
        assert [c.opaque for c in got] == [opaque]
        return got[0]

    try:
        yield store, reput, end, events, ask
    finally:
        writer.close()
        await srv.stop()
        await store.shutdown()


async def test_a_reads_put_is_dispatched_at_its_end_after_its_reply(served):
    store, reput, end, events, ask = served
    assert (await ask(1)).remark == "stored"
    # the read's reply first, then the slice, called by the read's _handle itself (not by the
    # loop a turn later), which found the record not yet dispatched and dispatched it
    assert events == ["reply", ("slice", "_handle", 0)]
    assert store.get_max_offset_in_queue("TopicA", 0) == 1
    assert not reput.scheduled and end.pending is None and not end.active
    events.clear()
    await ask(2)
    assert events == ["reply", ("slice", "_handle", 1)]


async def test_a_put_outside_a_read_takes_the_loop(served):
    store, reput, end, events, ask = served
    store.put_message(make_msg(7))  # (a task's put: no read is being handled)
    assert reput.scheduled and end.pending is None
    await _until(lambda: store.get_max_offset_in_queue("TopicA", 0) == 1)
    assert len(events) == 1 and events[0][1] != "_handle"


async def test_the_rest_past_the_budget_waits_for_a_later_turn(served):
    store, reput, end, events, ask = served
    reput.batch = 2
    await ask(1, n=5)
    await _until(lambda: store.get_max_offset_in_queue("TopicA", 0) == 5)
    # two records at the read's end, the rest a slice of two (then one) per later loop turn
    assert events[:2] == ["reply", ("slice", "_handle", 0)]
    assert [e[2] for e in events[1:]] == [0, 2, 4]
    assert all(e[1] != "_handle" for e in events[2:])


async def test_a_failing_slice_does_not_break_the_read(served, monkeypatch):
    store, reput, end, events, ask = served
    monkeypatch.setattr(reput_module, "RETRY_S", 0.01)
    dispatcher = reput.dispatcher
    do_reput = dispatcher.do_reput
    calls = {"n": 0}

    def failing_once(budget: int = 1 << 62) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug in the dispatch")
        return do_reput(budget)

    monkeypatch.setattr(dispatcher, "do_reput", failing_once)
    assert (await ask(1)).remark == "stored"  # the reply, though the slice after it raised
    await _until(lambda: store.get_max_offset_in_queue("TopicA", 0) == 1)  # the retry
    assert (await ask(2)).remark == "stored"
    await _until(lambda: store.get_max_offset_in_queue("TopicA", 0) == 2)
    assert events[:2] == ["reply", ("slice", "_handle", 0)]


async def test_a_stopped_reput_leaves_the_read_alone(served):
    store, reput, end, events, ask = served
    reput._stopping = True  # (as stop() leaves it: no more slices)
    assert (await ask(1)).remark == "stored"
    assert end.pending is None and not end.active
    assert [e for e in events if e != "reply"] == []
