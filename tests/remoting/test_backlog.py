"""A peer that writes a burst of requests and closes gets every one served (issue 25, defect A).

The connection handles ``PER_TURN`` commands per loop turn while the peer is connected; once the
transport closes, the rest of what was read is handled at once, replies dropped without a log.
A write that finds the peer reset before the loop read its last bytes reads them first
(``wire_io``). After framing garbage only the whole frames before it are served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import AsyncIterator

import pytest

from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.transport.connection import PER_TURN, RemotingConnection
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig

COUNT = 9101  # a code of our own: each request is counted and answered


@pytest.fixture
async def counting() -> AsyncIterator[tuple[RemotingServer, list[int]]]:
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1"))
    seen: list[int] = []

    def count(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        seen.append(req.opaque)
        return RemotingCommand.response_to(req, remark="counted")

    srv.register(COUNT, count)
    await srv.start()
    yield srv, seen
    await srv.stop()


def frames(n: int, start: int = 0) -> bytes:
    return b"".join(RemotingCommand(COUNT, start + i).encode() for i in range(n))


async def write_and_close(port: int, data: bytes) -> None:
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def wait_for_count(seen: list[int], n: int) -> None:
    for _ in range(100):
        if len(seen) >= n:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)  # nothing more arrives


async def test_burst_then_close_is_all_served_replies_dropped_silently(
    counting: tuple[RemotingServer, list[int]], caplog: pytest.LogCaptureFixture
) -> None:
    srv, seen = counting
    n = 1000
    assert n > 10 * PER_TURN
    with caplog.at_level(logging.DEBUG, logger="pocketmq.remoting"):
        await write_and_close(srv.port, frames(n))
        await wait_for_count(seen, n)
    assert seen == list(range(n))  # all of them, in order
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_after_framing_garbage_only_the_frames_before_it_are_served(
    counting: tuple[RemotingServer, list[int]],
) -> None:
    srv, seen = counting
    garbage = struct.pack(">i", -8) + b"x" * 100
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    writer.write(frames(500) + garbage + frames(50, start=500))
    await writer.drain()
    with contextlib.suppress(ConnectionError):  # the server aborts the connection
        await asyncio.wait_for(reader.read(), 5)
    writer.close()
    await wait_for_count(seen, 500)
    assert seen == list(range(500))


async def test_a_write_that_finds_the_peer_reset_first_reads_and_serves_what_it_sent(
    counting: tuple[RemotingServer, list[int]], caplog: pytest.LogCaptureFixture
) -> None:
    """The transport closes the socket when a write fails, and a failed write is how the server
    learns of an RST: the bytes the peer sent before it were still unread in the kernel."""
    srv, seen = counting
    accepted: list[RemotingConnection] = []
    srv.dispatcher.on_connect.append(accepted.append)
    n = 300  # ~25 KB: within the first receive window, so all of it is in the server's kernel
    with socket.create_connection(("127.0.0.1", srv.port)) as sock:
        for _ in range(100):
            if accepted:
                break
            await asyncio.sleep(0.01)
        # the burst and the RST (linger 0) with no loop turn between: the loop has read none of it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(frames(n))
    with caplog.at_level(logging.DEBUG, logger="pocketmq.remoting"):
        # a write of the server's own (a held pull's reply, a transaction check) finds the reset
        accepted[0].oneway(RemotingCommand(COUNT, 10**6))
        await asyncio.wait_for(accepted[0].wait_closed(), 5)
        await wait_for_count(seen, n)
    assert seen == list(range(n))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
