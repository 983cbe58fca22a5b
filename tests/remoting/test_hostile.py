"""What one hostile or broken peer may cost the server (issue 23; ``remoting.transport.limits``).

Each test is a defect a hostile client reproduced on the code before the limits: a peer that
never reads its replies made the server handle (and buffer the reply of) every request it had
sent; a partial frame was held forever and without a total; any number of connections was
accepted; a header of any size was buffered and parsed; every rejection logged a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import AsyncIterator, Callable

import pytest

from pocketmq.remoting.protocol.command import RemotingCommand, decode_command
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.limits import RateLimitedLog, max_connections
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig
from tests.waiting import wait_until

BIG = 9102  # answered with a 128 KiB body (a pull's reply)
ECHO = 9103
BODY = b"r" * 128 * 1024


@contextlib.asynccontextmanager
async def serving(**kw: object) -> AsyncIterator[tuple[RemotingServer, list[int]]]:
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1", sweep_interval=0.02, **kw))  # type: ignore[arg-type]
    seen: list[int] = []

    def big(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        seen.append(req.opaque)
        return RemotingCommand.response_to(req, body=BODY)

    def echo(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response_to(req, body=req.body)

    srv.register(BIG, big)
    srv.register(ECHO, echo)
    await srv.start()
    try:
        yield srv, seen
    finally:
        await srv.stop()


async def read_frames(reader: asyncio.StreamReader, n: int) -> list[int]:
    opaques = []
    for _ in range(n):
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        frame = await reader.readexactly(length)
        opaques.append(decode_command(frame).opaque)
    return opaques


async def closed_by_server(reader: asyncio.StreamReader, timeout: float = 10.0) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1 << 20), timeout) == b""
    except ConnectionResetError:
        return True


async def echo_ok(port: int, opaque: int = 1) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(RemotingCommand(ECHO, opaque, body=b"hi").encode())
        return await asyncio.wait_for(read_frames(reader, 1), 5) == [opaque]
    finally:
        writer.close()


def only_conn(srv: RemotingServer) -> Callable[[], RemotingConnection]:
    return lambda: next(iter(srv.connections))


async def test_unread_replies_stop_the_handling_of_that_peers_requests() -> None:
    n = 600  # 600 x 128 KiB = 75 MiB of replies if every request were handled
    async with serving() as (srv, seen):
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(b"".join(RemotingCommand(BIG, i).encode() for i in range(n)))
        await writer.drain()
        await wait_until(lambda: len(srv.connections) == 1)
        conn = only_conn(srv)()
        # the peer reads nothing: the server stalls on its write buffer, not after every reply
        await wait_until(lambda: conn._backlog_stalled or len(seen) == n)
        # one reply past the high-water mark per stall, not one per request sent
        assert len(seen) < 40
        assert conn.transport is not None and conn.transport.get_write_buffer_size() < 4 * 1024 * 1024
        # once the peer reads, everything is served, in order
        assert await asyncio.wait_for(read_frames(reader, n), 60) == list(range(n))
        assert seen == list(range(n))
        writer.close()


async def test_a_frame_not_completed_in_time_closes_the_connection() -> None:
    async with serving(frame_timeout=0.3) as (srv, _seen):
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", srv.port)
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        frame = RemotingCommand(ECHO, 5, body=b"x" * 100).encode()
        writer.write(frame[:20])  # a peer trickling bytes: the rest never comes
        assert await closed_by_server(reader)
        # a connection holding no partial frame is left to the idle timeout
        idle_writer.write(RemotingCommand(ECHO, 6, body=b"y").encode())
        assert await read_frames(idle_reader, 1) == [6]
        idle_writer.close()
        writer.close()


async def test_partial_frames_share_one_memory_budget() -> None:
    budget = 1024 * 1024
    async with serving(partial_frame_budget=budget) as (srv, _seen):
        body = b"z" * 900_000
        frame = RemotingCommand(ECHO, 7, body=body).encode()
        ra, wa = await asyncio.open_connection("127.0.0.1", srv.port)
        wa.write(frame[:700_000])
        await wa.drain()
        await wait_until(lambda: srv.partial_budget.used >= 600_000)
        rb, wb = await asyncio.open_connection("127.0.0.1", srv.port)
        wb.write(frame[:700_000])  # both would hold 1.4 MB: the second is closed
        assert await closed_by_server(rb)
        assert srv.partial_budget.used <= budget
        wa.write(frame[700_000:])  # the first completes its frame and is answered
        assert await read_frames(ra, 1) == [7]
        await wait_until(lambda: srv.partial_budget.used == 0)
        wa.close()
        wb.close()


async def test_connections_beyond_the_limit_are_closed_at_accept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with serving(max_connections=3) as (srv, _seen):
        held = [await asyncio.open_connection("127.0.0.1", srv.port) for _ in range(3)]
        await wait_until(lambda: len(srv.connections) == 3)
        with caplog.at_level(logging.WARNING, logger="pocketmq.remoting"):
            for _ in range(5):
                reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
                assert await closed_by_server(reader)
                writer.close()
        warnings = [r for r in caplog.records if "serverMaxConnections" in r.getMessage()]
        assert len(warnings) == 1  # rate limited
        held[0][1].close()
        await wait_until(lambda: len(srv.connections) == 2)
        assert await echo_ok(srv.port)
        for _r, w in held[1:]:
            w.close()


async def test_header_bomb_closes_at_its_length_word_and_others_are_served() -> None:
    async with serving() as (srv, _seen):
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        header_len = 14_700_000
        writer.write(struct.pack(">ii", 4 + header_len, header_len) + b'{"code":10,')
        assert await closed_by_server(reader)
        assert srv.partial_budget.used == 0
        assert await echo_ok(srv.port)
        writer.close()


async def test_junk_on_many_connections_logs_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with serving() as (srv, _seen):
        with caplog.at_level(logging.WARNING, logger="pocketmq.remoting"):
            for _ in range(30):
                reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
                writer.write(struct.pack(">i", -5) + b"junk")
                assert await closed_by_server(reader)
                writer.close()
        closing = [r for r in caplog.records if r.getMessage().startswith("closing")]
        assert 1 <= len(closing) <= 2


def test_rate_limited_log_counts_what_it_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    log = RateLimitedLog(logging.getLogger("pocketmq.test.ratelimit"), interval=0.0)
    with caplog.at_level(logging.WARNING, logger="pocketmq.test.ratelimit"):
        log.emit("k", "one %s", "a")
        log.emit("k", "two %s", "b")
    assert [r.getMessage() for r in caplog.records] == ["one a", "two b"]
    slow = RateLimitedLog(logging.getLogger("pocketmq.test.ratelimit"), interval=3600)
    slow.emit("k", "first")
    slow.emit("k", "second")
    slow._last["k"] = -1e9  # the interval has passed
    with caplog.at_level(logging.WARNING, logger="pocketmq.test.ratelimit"):
        slow.emit("k", "third")
    assert caplog.records[-1].getMessage() == "third (1 similar messages suppressed)"


def test_max_connections_default_leaves_file_descriptors_for_the_store() -> None:
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert max_connections(50) == 50
    if soft != resource.RLIM_INFINITY:
        assert max_connections(0) == max(16, soft - 1024)
    assert socket.SOMAXCONN > 0


async def test_a_connection_sending_bad_headers_is_closed_after_a_few() -> None:
    """Each bad header (a readable opaque) is answered SYSTEM_ERROR, ``MAX_BAD_HEADERS`` times;
    then the connection is closed and nothing more of it is decoded (T14: a fuzzing client kept
    the loop busy with answers to garbage), while other clients are served."""
    from pocketmq.remoting.transport.connection import MAX_BAD_HEADERS

    async with serving() as (srv, _seen):
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        bad = [b'{"code":"x","opaque":%d}' % k for k in range(MAX_BAD_HEADERS + 10)]
        writer.write(b"".join(struct.pack(">ii", 4 + len(h), len(h)) + h for h in bad))
        writer.write(RemotingCommand(ECHO, 999, body=b"after").encode())
        rest = await asyncio.wait_for(reader.read(), 10)  # up to the close
        replies = []
        while rest:
            (length,) = struct.unpack_from(">i", rest)
            replies.append(decode_command(rest[4 : 4 + length]))
            rest = rest[4 + length :]
        errors = [r.opaque for r in replies if r.code == 1]
        assert errors == list(range(MAX_BAD_HEADERS))  # then closed: the rest never answered
        assert {r.opaque for r in replies} <= set(errors) | {999}  # a whole frame of the same read may be
        writer.close()
        assert await echo_ok(srv.port)


async def test_a_connection_closed_for_garbage_is_freed_without_the_cycle_collector() -> None:
    """T14: the ``close_reason`` of a connection closed for garbage was raised under its own
    ``data_received``, and its traceback's frames held the connection and the read: a cycle that
    only a full collection freed (rare after ``gc.freeze()``); ~600 dead connections and their
    reads (~23 MiB) waited for one after a fuzzing run. Now the last reference frees them."""
    import gc
    import weakref

    async with serving() as (srv, _seen):
        gone: list[weakref.ref[RemotingConnection]] = []
        srv.dispatcher.on_connect.append(lambda conn: gone.append(weakref.ref(conn)))
        gc.disable()
        try:
            for garbage in (struct.pack(">i", -5) + b"junk", struct.pack(">ii", 8, 4) + b"\xff\xfe\xfd\xfc"):
                reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
                writer.write(RemotingCommand(ECHO, 1, body=b"x" * 40_000).encode() + garbage)
                with contextlib.suppress(ConnectionResetError):
                    await asyncio.wait_for(reader.read(), 10)  # the reply, then the close
                writer.close()
            await wait_until(lambda: not srv.connections)
            await asyncio.sleep(0.05)  # the callbacks that still hold the last one
            assert len(gone) == 2 and [ref() for ref in gone] == [None, None]
        finally:
            gc.enable()
