"""RemotingServer / RemotingClient over real loopback sockets."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator

import pytest

from pocketmq.remoting.protocol.codes import RPC_ONEWAY, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import (
    RemotingConnectError,
    RemotingTimeoutError,
    TopicNotExistError,
)
from pocketmq.remoting.transport import connection as conn_module
from pocketmq.remoting.transport.client import RemotingClient
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.dispatch import ProcessorDispatcher
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig
from tests.waiting import wait_until
from tests.wire_calls import remoting_client

ECHO = 9000
SLOW = 9001
FAIL = 9002
RAISE_CODE = 9003
HOLD = 9004
NOTIFY = 9005


class Recorder:
    def __init__(self) -> None:
        self.before: list[int] = []
        self.after: list[int | None] = []

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        self.before.append(request.code)

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        self.after.append(None if response is None else response.code)


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1", idle_timeout=0.6, sweep_interval=0.02))
    held: list[tuple[RemotingConnection, RemotingCommand]] = []
    srv.register(
        ECHO, lambda conn, req: RemotingCommand.response_to(req, ext_fields=req.ext_fields, body=req.body)
    )

    async def slow(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(float(req.ext("delay", "0") or 0))
        return RemotingCommand.response_to(req, remark="slow")

    def fail(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        raise ValueError("boom")

    def raise_code(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        raise TopicNotExistError("topic[X] not exist, apply first please!")

    def hold(conn: RemotingConnection, req: RemotingCommand) -> None:
        held.append((conn, req))

    srv.register(SLOW, slow)
    srv.register(FAIL, fail)
    srv.register(RAISE_CODE, raise_code)
    srv.register(HOLD, hold)
    srv.held = held  # type: ignore[attr-defined]
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with remoting_client(2.0) as cli:
        yield cli


def addr(srv: RemotingServer) -> str:
    return f"127.0.0.1:{srv.port}"


async def test_echo_and_body(server: RemotingServer, client: RemotingClient) -> None:
    body = bytes(range(256)) * 40
    reply = await client.invoke(addr(server), RemotingCommand.request(ECHO, {"k": "v"}, body))
    assert reply.code == ResponseCode.SUCCESS and reply.body == body and reply.ext_fields == {"k": "v"}
    assert reply.is_response and reply.language == 0 and reply.version == 409


async def test_unknown_code_gets_3(server: RemotingServer, client: RemotingClient) -> None:
    reply = await client.invoke(addr(server), RemotingCommand.request(4242))
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert reply.remark == " request type 4242 not supported"


async def test_handler_exception_is_system_error(server: RemotingServer, client: RemotingClient) -> None:
    reply = await client.invoke(addr(server), RemotingCommand.request(FAIL))
    assert reply.code == ResponseCode.SYSTEM_ERROR and "boom" in (reply.remark or "")
    reply = await client.invoke(addr(server), RemotingCommand.request(RAISE_CODE))
    assert (
        reply.code == ResponseCode.TOPIC_NOT_EXIST
        and reply.remark == "topic[X] not exist, apply first please!"
    )
    # The connection survives handler failures.
    assert (await client.invoke(addr(server), RemotingCommand.request(ECHO))).code == 0


async def test_async_handlers_and_pipelining(server: RemotingServer, client: RemotingClient) -> None:
    slow = client.invoke(addr(server), RemotingCommand.request(SLOW, {"delay": "0.2"}))
    fast = [client.invoke(addr(server), RemotingCommand.request(ECHO, {"i": str(i)})) for i in range(200)]
    replies = await asyncio.gather(slow, *fast)
    assert replies[0].remark == "slow"
    assert [r.ext_fields["i"] for r in replies[1:]] == [str(i) for i in range(200)]  # type: ignore[index]


async def test_timeout_and_late_reply_dropped(server: RemotingServer, client: RemotingClient) -> None:
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(addr(server), RemotingCommand.request(SLOW, {"delay": "0.3"}), timeout=0.05)
    await asyncio.sleep(0.35)  # the late reply arrives and is dropped
    assert (await client.invoke(addr(server), RemotingCommand.request(ECHO))).code == 0


async def test_connection_loss_fails_pending(server: RemotingServer, client: RemotingClient) -> None:
    pending = asyncio.ensure_future(client.invoke(addr(server), RemotingCommand.request(HOLD)))
    await asyncio.sleep(0.1)
    for conn in list(server.connections):
        conn.abort()
    with pytest.raises(RemotingConnectError):
        await pending
    # Reconnects transparently.
    assert (await client.invoke(addr(server), RemotingCommand.request(ECHO))).code == 0


async def test_held_request_replied_later(server: RemotingServer, client: RemotingClient) -> None:
    fut = asyncio.ensure_future(client.invoke(addr(server), RemotingCommand.request(HOLD)))
    await asyncio.sleep(0.05)
    conn, req = server.held.pop()  # type: ignore[attr-defined]
    assert not fut.done()
    conn.send_response(RemotingCommand.response_to(req, remark="later"))
    assert (await fut).remark == "later"


async def test_server_initiated_request(server: RemotingServer, client: RemotingClient) -> None:
    seen: list[str | None] = []

    def on_notify(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        seen.append(req.ext("consumerGroup"))
        return RemotingCommand.response_to(req, remark="client says hi")

    client.register(NOTIFY, on_notify)
    await client.invoke(addr(server), RemotingCommand.request(ECHO))
    (conn,) = server.connections
    reply = await server.invoke(conn, RemotingCommand.request(NOTIFY, {"consumerGroup": "G"}), timeout=2)
    assert reply.remark == "client says hi" and seen == ["G"]
    server.invoke_oneway(conn, RemotingCommand.request(NOTIFY, {"consumerGroup": "H"}))
    await asyncio.sleep(0.1)
    assert seen == ["G", "H"]


async def test_oneway_gets_no_reply(server: RemotingServer, client: RemotingClient) -> None:
    await client.invoke_oneway(addr(server), RemotingCommand.request(ECHO))
    reply = await client.invoke(addr(server), RemotingCommand.request(ECHO, {"after": "1"}))
    assert reply.ext_fields == {"after": "1"}


async def test_oneway_now_writes_on_an_open_connection_only(
    server: RemotingServer, client: RemotingClient
) -> None:
    """``oneway_now`` writes a oneway request at once on an open connection; with none yet, or
    once its transport is closing, it writes nothing and returns False (the caller then takes
    ``invoke_oneway``)."""
    target = addr(server)
    held = server.held  # type: ignore[attr-defined]
    assert not client.oneway_now(target, RemotingCommand.request(HOLD, {"n": "0"}))  # not connected
    conn = await client.get_connection(target)
    assert client.oneway_now(target, RemotingCommand.request(HOLD, {"n": "1"}))
    await wait_until(lambda: held)
    assert [(req.ext("n"), req.flag & RPC_ONEWAY) for _, req in held] == [("1", RPC_ONEWAY)]
    # a request of three frames takes three opaques: the next request has the one after them
    first = held[0][1].opaque
    assert client.writable(target)
    assert client.oneway_now(target, RemotingCommand.request(HOLD, {"n": "2"}), frames=3)
    assert client.oneway_now(target, RemotingCommand.request(HOLD, {"n": "3"}))
    await wait_until(lambda: len(held) == 3)
    assert [(req.ext("n"), req.opaque) for _, req in held[1:]] == [("2", first + 1), ("3", first + 4)]
    assert conn.transport is not None
    conn.transport.close()
    assert not client.writable(target)
    assert not client.oneway_now(target, RemotingCommand.request(HOLD, {"n": "4"}))


async def test_rpc_hooks_see_requests_and_replies() -> None:
    rec = Recorder()
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1"), hooks=[rec])
    srv.register(ECHO, lambda conn, req: RemotingCommand.response_to(req))
    await srv.start()
    crec = Recorder()
    cli = RemotingClient(hooks=[crec])
    try:
        await cli.invoke(f"127.0.0.1:{srv.port}", RemotingCommand.request(ECHO))
        await cli.invoke(f"127.0.0.1:{srv.port}", RemotingCommand.request(77))
    finally:
        await cli.close()
        await srv.stop()
    assert rec.before == [ECHO] and rec.after == [0]
    assert crec.before == [ECHO, 77] and crec.after == [0, ResponseCode.REQUEST_CODE_NOT_SUPPORTED]


async def raw_connection(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", 0x7FFFFFFF) + b"x" * 100,  # 2 GiB claim
        struct.pack(">i", -8) + b"x" * 100,  # negative length
        struct.pack(">ii", 12, 1000) + b"{}" * 10,  # header length beyond frame
        struct.pack(">ii", 8, 4) + b"\xff\xfe\xfd\xfc",  # invalid UTF-8 header, no opaque
    ],
)
async def test_garbage_closes_only_that_connection(
    server: RemotingServer, client: RemotingClient, garbage: bytes
) -> None:
    await client.invoke(addr(server), RemotingCommand.request(ECHO))
    reader, writer = await raw_connection(server.port)
    writer.write(garbage)
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 2) == b""  # closed by the server
    writer.close()
    # The other client keeps working on its existing connection.
    reply = await client.invoke(addr(server), RemotingCommand.request(ECHO, {"still": "ok"}))
    assert reply.ext_fields == {"still": "ok"}


async def test_bad_header_with_readable_opaque_gets_system_error(server: RemotingServer) -> None:
    reader, writer = await raw_connection(server.port)
    header = b'{"code":"not-a-number","opaque":99}'
    writer.write(struct.pack(">ii", 4 + len(header), len(header)) + header)
    writer.write(RemotingCommand(ECHO, 100).encode())
    prefix = await asyncio.wait_for(reader.readexactly(4), 2)
    (length,) = struct.unpack(">i", prefix)
    from pocketmq.remoting.protocol.command import decode_command

    first = decode_command(await reader.readexactly(length))
    assert first.opaque == 99 and first.code == ResponseCode.SYSTEM_ERROR
    (length,) = struct.unpack(">i", await reader.readexactly(4))
    second = decode_command(await reader.readexactly(length))
    assert second.opaque == 100 and second.code == 0
    writer.close()


async def test_idle_connection_is_closed(server: RemotingServer) -> None:
    reader, writer = await raw_connection(server.port)
    assert await asyncio.wait_for(reader.read(), 3) == b""
    writer.close()


async def test_connect_refused_is_connect_error(client: RemotingClient) -> None:
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1"))
    await srv.start()
    port = srv.port
    await srv.stop()
    with pytest.raises(RemotingConnectError):
        await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO))


class RecordingTransport:
    """Stands in for the socket transport: records each write call (unit tests of batching)."""

    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.calls.append([data])

    def writelines(self, seq: list[bytes]) -> None:
        self.calls.append(list(seq))

    def is_closing(self) -> bool:
        return self.closing

    reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closing = True

    aborted = False

    def abort(self) -> None:
        self.closing = self.aborted = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def opaques(self) -> list[int]:
        from pocketmq.remoting.protocol.frame import FrameDecoder

        return [c.opaque for c in FrameDecoder().feed(b"".join(b for call in self.calls for b in call))]


def recording_connection() -> tuple[RemotingConnection, RecordingTransport]:
    from pocketmq.remoting.transport.dispatch import ProcessorDispatcher

    conn = RemotingConnection(ProcessorDispatcher())
    transport = RecordingTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


async def test_writes_of_one_loop_turn_are_coalesced() -> None:
    conn, transport = recording_connection()
    for opaque in range(1, 6):
        conn.request(RemotingCommand(ECHO, opaque, body=b"body"), 5.0)
    assert len(transport.calls) == 1  # the first request goes out at once ...
    await asyncio.sleep(0)
    assert len(transport.calls) == 2  # ... the other four together, at the next turn
    conn.send(RemotingCommand(ECHO, 6))
    assert len(transport.calls) == 3  # a new turn writes at once again
    assert transport.opaques() == [1, 2, 3, 4, 5, 6]
    assert len(conn.pending) == 5


async def test_a_request_written_alone_opens_no_batch() -> None:
    conn, transport = recording_connection()
    conn.request(RemotingCommand(ECHO, 1, body=b"body"), 5.0, alone=True)
    assert len(transport.calls) == 1 and conn._out is None  # out at once, no flush turn pending
    conn.request(RemotingCommand(ECHO, 2), 5.0, alone=True)
    conn.request(RemotingCommand(ECHO, 3), 5.0)  # an ordinary write opens the turn's batch
    conn.request(RemotingCommand(ECHO, 4), 5.0, alone=True)  # ... which an alone one then joins
    assert len(transport.calls) == 3
    await asyncio.sleep(0)
    assert len(transport.calls) == 4 and conn._out is None
    assert transport.opaques() == [1, 2, 3, 4]
    assert sorted(conn.pending) == [1, 2, 3, 4]


async def test_a_large_batch_is_written_in_slices_of_max_parts() -> None:
    from pocketmq.remoting.transport.connection import MAX_BATCH_PARTS

    conn, transport = recording_connection()
    n = MAX_BATCH_PARTS + 20  # requests with bodies: two buffers each
    for opaque in range(1, n + 1):
        conn.request(RemotingCommand(ECHO, opaque, body=b"body"), 5.0)
    # the first at once, then a slice each time the open batch reaches MAX_BATCH_PARTS buffers
    sizes = [sum(1 for _ in call) for call in transport.calls]
    assert sizes[0] == 2 and all(size == MAX_BATCH_PARTS for size in sizes[1:])
    await asyncio.sleep(0)  # the rest at the next turn, once
    assert len(transport.calls) == 1 + (2 * (n - 1)) // MAX_BATCH_PARTS + 1
    assert transport.opaques() == list(range(1, n + 1))
    # replies produced while handling one read are sliced the same way, and stay in order
    conn2, transport2 = recording_connection()
    reads = b"".join(RemotingCommand(4242, k, body=b"x").encode() for k in range(1, n + 1))
    conn2.data_received(reads)  # unknown code: each gets REQUEST_CODE_NOT_SUPPORTED
    for _ in range(4):  # (handled PER_TURN commands per loop turn)
        await asyncio.sleep(0)
    assert transport2.opaques() == list(range(1, n + 1))


async def test_a_large_read_is_handled_per_turn_slices_in_order() -> None:
    from pocketmq.remoting.transport import connection as connection_module
    from pocketmq.remoting.transport.connection import PER_TURN

    conn, transport = recording_connection()
    n = 3 * PER_TURN + 5
    # server-side requests with no handler: each is answered REQUEST_CODE_NOT_SUPPORTED
    frames = [RemotingCommand(4242, k).encode() for k in range(1, n + 1)]
    conn.data_received(b"".join(frames[: n - 10]))
    assert transport.opaques() == list(range(1, PER_TURN + 1))  # one slice in this turn
    conn.data_received(b"".join(frames[n - 10 :]))  # a later read waits behind the backlog
    assert transport.opaques() == list(range(1, PER_TURN + 1))
    for _ in range(4):
        await asyncio.sleep(0)
    assert transport.opaques() == list(range(1, n + 1))  # all answered, in arrival order
    assert conn._backlog is None and transport.reading
    # a peer that keeps sending while a backlog waits has its reads paused, then resumed
    conn2, transport2 = recording_connection()
    old = connection_module.MAX_BACKLOG
    connection_module.MAX_BACKLOG = 2 * PER_TURN
    try:
        conn2.data_received(b"".join(RemotingCommand(4242, k).encode() for k in range(1, 4 * PER_TURN)))
        assert not transport2.reading
        for _ in range(5):
            await asyncio.sleep(0)
        assert transport2.reading and transport2.opaques() == list(range(1, 4 * PER_TURN))
    finally:
        connection_module.MAX_BACKLOG = old


async def test_replies_join_the_open_batch_in_order_and_close_flushes_it() -> None:
    conn, transport = recording_connection()
    conn.request(RemotingCommand(ECHO, 1), 5.0)
    conn.request(RemotingCommand(ECHO, 2), 5.0)  # batched
    # A reply arriving in the same turn resolves request 1; a server-initiated request is
    # answered (no handler: REQUEST_CODE_NOT_SUPPORTED) into the same batch, after request 2.
    conn.data_received(RemotingCommand(0, 1, 1).encode() + RemotingCommand(4242, 77).encode())
    assert transport.opaques() == [1, 2, 77]
    conn.request(RemotingCommand(ECHO, 3), 5.0)
    conn.close()  # what was batched leaves before the connection closes
    assert transport.closing and transport.opaques() == [1, 2, 77, 3]
    await asyncio.sleep(0)
    assert transport.opaques() == [1, 2, 77, 3]  # nothing written twice


async def test_reply_to_a_cancelled_request_is_dropped() -> None:
    conn, transport = recording_connection()
    first = conn.request(RemotingCommand(ECHO, 1), 5.0)
    second = conn.request(RemotingCommand(ECHO, 2), 5.0)
    first.cancel()  # e.g. the caller wrapped the await in its own timeout
    conn.data_received(RemotingCommand(0, 1, 1).encode() + RemotingCommand(0, 2, 1, "ok").encode())
    assert second.result().remark == "ok"
    assert conn.pending == {}


async def test_batched_requests_take_their_deadline_from_the_turn() -> None:
    conn, transport = recording_connection()
    before = time.monotonic()
    conn.request(RemotingCommand(ECHO, 1), 5.0)  # written at once: reads the clock
    late = conn.request(RemotingCommand(ECHO, 2), 0.5)  # batched: the turn's clock read
    assert before + 0.5 <= conn.pending[2][1] <= time.monotonic() + 0.5
    assert conn.expire(time.monotonic()) == 0
    assert conn.expire(time.monotonic() + 0.6) == 1
    with pytest.raises(RemotingTimeoutError):
        late.result()
    assert list(conn.pending) == [1]


@pytest.mark.parametrize("alone", [False, True])
async def test_a_request_written_at_once_reads_the_clock_once(
    alone: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a batch a request's deadline, its write's time and the batch it opens take one
    clock read (not one for the deadline and another in the write)."""
    conn, transport = recording_connection()
    reads = iter([100.0, 200.0, 300.0])
    monkeypatch.setattr(conn_module, "_monotonic", lambda: next(reads))
    conn.request(RemotingCommand(ECHO, 1), 5.0, alone=alone)
    assert transport.opaques() == [1]
    assert conn.pending[1][1] == 105.0 and conn.last_write == 100.0
    if not alone:  # the batch it opened: the next request's deadline from the same read
        conn.request(RemotingCommand(ECHO, 2), 0.5)
        assert conn.pending[2][1] == 100.5
    assert next(reads) == 200.0


async def test_writes_after_close_fail_even_while_a_batch_is_open() -> None:
    conn, transport = recording_connection()
    conn.request(RemotingCommand(ECHO, 1), 5.0)
    conn.request(RemotingCommand(ECHO, 2), 5.0)  # batched
    conn.close()
    assert transport.opaques() == [1, 2]
    with pytest.raises(RemotingConnectError):
        conn.send(RemotingCommand(ECHO, 3))
    with pytest.raises(RemotingConnectError):
        conn.request(RemotingCommand(ECHO, 4), 5.0)
    assert sorted(conn.pending) == [1, 2]
    await asyncio.sleep(0)
    assert transport.opaques() == [1, 2]


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">ii", -8, 0),  # broken framing
        struct.pack(">ii", 8, 4) + b"\xff\xfe\xfd\xfc",  # a header without a readable opaque
    ],
)
async def test_garbage_becomes_a_remote_protocol_error_after_the_whole_frames_before_it(
    garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    from pocketmq.remoting.protocol.errors import LocalProtocolError, RemoteProtocolError

    conn, transport = recording_connection()
    pending = conn.request(RemotingCommand(ECHO, 1), 5.0)
    await asyncio.sleep(0)
    # a server-initiated request (answered REQUEST_CODE_NOT_SUPPORTED), then garbage
    with caplog.at_level("WARNING", logger="pocketmq.remoting.transport.connection"):
        conn.data_received(RemotingCommand(4242, 77).encode() + garbage)
    assert transport.opaques() == [1, 77] and not transport.aborted  # the whole frame is served
    await asyncio.sleep(0)
    assert transport.aborted  # then the connection is closed, logged once
    assert [r.message.startswith("closing ") for r in caplog.records] == [True]
    reason = conn.close_reason
    assert isinstance(reason, RemoteProtocolError) and isinstance(reason.__cause__, LocalProtocolError)
    conn.connection_lost(None)  # what the transport reports after abort()
    with pytest.raises(RemotingConnectError) as info:
        pending.result()
    assert info.value.__cause__ is reason


@pytest.mark.parametrize("case", ["reply", "oneway", "closed"])
async def test_dispatch_hot_path_replies_as_reply_does(case: str) -> None:
    # ProcessorDispatcher.dispatch inlines _reply for a synchronous reply without hooks: the
    # bytes written (or not) must be what _reply writes for the same request and reply.
    from pocketmq.remoting.protocol.codes import RPC_ONEWAY

    def make_reply(req: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response_to(req, remark="r", ext_fields={"k": "v"}, body=b"ok")

    written = []
    for path in ("inline", "reference"):
        conn, transport = recording_connection()
        if case == "closed":
            transport.closing = True
        request = RemotingCommand(ECHO, 5, RPC_ONEWAY if case == "oneway" else 0)
        dispatcher = conn._dispatcher
        assert isinstance(dispatcher, ProcessorDispatcher)
        if path == "inline":
            dispatcher.register(ECHO, lambda conn, req: make_reply(req))
            dispatcher.dispatch(conn, request)
        else:
            dispatcher._reply(conn, request, make_reply(request))
        await asyncio.sleep(0)
        written.append(b"".join(b for call in transport.calls for b in call))
    assert written[0] == written[1]
    assert bool(written[0]) == (case == "reply")


async def test_a_bad_header_read_while_closing_is_not_answered() -> None:
    conn, transport = recording_connection()
    conn.close()
    header = b'{"code":"not-a-number","opaque":99}'
    conn.data_received(struct.pack(">ii", 4 + len(header), len(header)) + header)  # no exception
    await asyncio.sleep(0)
    assert transport.calls == []


@pytest.mark.parametrize("hooked", [False, True])
async def test_oneway_and_held_requests_write_nothing_and_hooks_still_see_them(
    hooked: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # dispatch skips _reply for a handler's None when there are no hooks (END_TRANSACTION, a
    # held pull): nothing is written either way, hooks see (request, None), and a oneway
    # request's handler error is logged, never answered
    conn, transport = recording_connection()
    dispatcher = conn._dispatcher
    assert isinstance(dispatcher, ProcessorDispatcher)
    rec = Recorder()
    if hooked:
        dispatcher.hooks.append(rec)

    def fail(conn: RemotingConnection, req: RemotingCommand) -> None:
        raise ValueError("boom")

    dispatcher.register(HOLD, lambda conn, req: None)
    dispatcher.register(FAIL, fail)
    conn.data_received(
        RemotingCommand(HOLD, 1, RPC_ONEWAY).encode()
        + RemotingCommand(HOLD, 2).encode()
        + RemotingCommand(FAIL, 3, RPC_ONEWAY).encode()
    )
    await asyncio.sleep(0)
    assert transport.calls == []
    assert rec.before == ([HOLD, HOLD, FAIL] if hooked else [])
    assert rec.after == ([None, None, ResponseCode.SYSTEM_ERROR] if hooked else [])
    assert [r.getMessage() for r in caplog.records if "failed" in r.getMessage()] == [
        f"request code={FAIL} from {conn.remote_addr} failed"
    ]
