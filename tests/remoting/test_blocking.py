"""The blocking remoting client (``remoting.transport.blocking``) against a scripted loopback peer.

The peer is a plain thread with a socket (no event loop, like the callers of this module): it
decodes requests with the sans-IO ``FrameDecoder`` and answers according to the request code.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import (
    RemoteProtocolError,
    RemotingConnectError,
    RemotingTimeoutError,
)
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.transport.blocking import BlockingConnection, ConnectionPool, pool

ECHO = 9100  # reply with the request's body
STALE = 9101  # first a reply with another opaque and a server request, then the real reply
SILENT = 9102  # no reply
GARBAGE_LENGTH = 9103  # a frame length word of -1
GARBAGE_HEADER = 9104  # an intact frame whose serialize type is unknown
CLOSE = 9105  # close the connection without a reply
REVERSED = 9106  # held until three arrived, then answered last first (a broker's thread pool)


class Peer:
    """A loopback server; every accepted connection is served by its own thread."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self._threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        held: list[RemotingCommand] = []
        with conn:
            while data := conn.recv(65536):
                for req in decoder.feed(data):
                    if req.code == REVERSED:
                        held.append(req)
                        if len(held) == 3:
                            for r in reversed(held):
                                conn.sendall(RemotingCommand.response_to(r, body=r.body).encode())
                            held.clear()
                    elif not self._answer(conn, req):
                        return

    @staticmethod
    def _answer(conn: socket.socket, req: RemotingCommand) -> bool:
        if req.code == ECHO:
            conn.sendall(RemotingCommand.response_to(req, body=req.body).encode())
        elif req.code == STALE:
            other = RemotingCommand.response_to(req, body=b"stale")
            other.opaque = req.opaque + 1000
            server_request = RemotingCommand.request(ECHO)
            server_request.opaque = req.opaque
            real = RemotingCommand.response_to(req, body=b"real")
            conn.sendall(other.encode() + server_request.encode() + real.encode())
        elif req.code == GARBAGE_LENGTH:
            conn.sendall(struct.pack(">i", -1))
        elif req.code == GARBAGE_HEADER:
            conn.sendall(struct.pack(">ii", 4 + 2, (9 << 24) | 2) + b"{}")
        elif req.code == CLOSE:
            return False
        return True  # SILENT

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def peer() -> Iterator[Peer]:
    p = Peer()
    yield p
    p.close()


def _req(code: int, body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand.request(code, {"k": "v"}, body)


def test_invoke_matches_opaques_and_reuses_the_receive_buffer(peer: Peer) -> None:
    conn = BlockingConnection(peer.addr, 1.0)
    try:
        reply, body = conn.invoke(_req(ECHO, b"x" * 1000), 2.0)
        assert reply.code == ResponseCode.SUCCESS and bytes(body) == b"x" * 1000
        buf = conn.receive_frame(conn.send(_req(ECHO, b"y" * 10)), 2.0)[1]
        reply, frame, start, end = conn.receive_frame(conn.send(_req(ECHO, b"z" * 20)), 2.0)
        assert frame is buf and bytes(frame[start:end]) == b"z" * 20  # no new buffer per reply
        # a reply to another opaque and a server-initiated request are skipped
        reply, body = conn.invoke(_req(STALE), 2.0)
        assert bytes(body) == b"real"
        replies = conn.invoke_many([_req(ECHO, b"1"), _req(ECHO), _req(ECHO, b"3")], 2.0)
        assert [r.code for r in replies] == [ResponseCode.SUCCESS] * 3
        # replies that come in another order are matched by opaque (Apache answers from a pool)
        reqs = [_req(REVERSED, b"%d" % i) for i in range(3)]
        replies = conn.invoke_many(reqs, 2.0)
        assert [r.opaque for r in replies] == [r.opaque for r in reqs]
        assert not conn.broken
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("code", "error", "match"),
    [
        (SILENT, RemotingTimeoutError, "in time"),
        (CLOSE, RemotingConnectError, "closed by the peer"),
        (GARBAGE_LENGTH, RemoteProtocolError, "invalid length -1"),
        (GARBAGE_HEADER, RemoteProtocolError, "undecodable header"),
    ],
)
def test_failures_close_the_connection(peer: Peer, code: int, error: type[Exception], match: str) -> None:
    conn = BlockingConnection(peer.addr, 1.0)
    with pytest.raises(error, match=match):
        conn.invoke(_req(code), 0.3)
    assert conn.broken


def test_connect_errors() -> None:
    with pytest.raises(RemotingConnectError, match="invalid address"):
        BlockingConnection("no-port", 1.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(RemotingConnectError, match="connect to"):
            BlockingConnection(f"127.0.0.1:{port}", 1.0)


def test_pool_reuses_connections_and_retries_a_stale_one_fresh(peer: Peer) -> None:
    p = ConnectionPool(connect_timeout=1.0)
    try:
        for _ in range(3):
            reply, body = p.invoke(peer.addr, _req(ECHO, b"abc"), 2.0)
            assert body == b"abc" and isinstance(body, bytes)
        assert peer.accepted == 1
        # the idle connection is closed by the peer: the next call retries once on a fresh one
        with pytest.raises(RemotingConnectError):
            p.invoke(peer.addr, _req(CLOSE), 2.0)
        assert peer.accepted == 2  # the pooled one, then one fresh one (which also failed)
        assert [r.code for r in p.invoke_many(peer.addr, [_req(ECHO), _req(ECHO)], 2.0)] == [0, 0]
        # a broken connection is never returned to the pool
        with pytest.raises(RemotingTimeoutError), p.connection(peer.addr) as conn:
            conn.invoke(_req(SILENT), 0.2)
        assert conn.broken
        with p.connection(peer.addr) as again:
            assert again is not conn
        p.discard(peer.addr)
        assert again.broken
    finally:
        p.close()


def test_process_pool_is_shared() -> None:
    assert pool() is pool()
