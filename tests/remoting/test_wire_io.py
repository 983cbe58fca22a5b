"""``wire_io.write_through`` on a real socket: what the socket did not take comes back, in order;
and ``RemotingConnection._put``'s own write of a reply alone."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.dispatch import ProcessorDispatcher
from pocketmq.remoting.transport.wire_io import write_through

Pair = tuple[socket.socket, socket.socket]


@pytest.fixture
def pair() -> Iterator[Pair]:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a.setblocking(False)
    b.setblocking(False)
    with a, b:
        yield a, b


def _drain(b: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = b.recv(1 << 20)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def _fill(a: socket.socket) -> None:
    while write_through(a.fileno(), [bytes(65536)]) != [bytes(65536)]:
        pass  # (until the socket takes nothing)


def test_one_buffer_taken_whole_leaves_nothing(pair: Pair) -> None:
    # (the reply alone of a read at one send in flight: the short path)
    a, b = pair
    assert write_through(a.fileno(), [b"reply-head"]) == []
    assert _drain(b) == b"reply-head"


def test_what_the_socket_does_not_take_comes_back_in_order(pair: Pair) -> None:
    a, b = pair
    big = bytes(range(256)) * 4096  # 1 MiB: more than the socket takes at once
    for bufs in ([big], [b"head", big, b"tail"]):
        expected = b"".join(bufs)
        rest = write_through(a.fileno(), bufs)
        assert rest, "the socket took all of 1 MiB at once"
        got = _drain(b)
        while rest:  # the caller's part: write the rest later (here: as the reader drains)
            rest = write_through(a.fileno(), rest) or []
            got += _drain(b)
        got += _drain(b)
        assert got == expected


class _Transport:
    """What ``RemotingConnection._put`` asks of a transport; ``writelines`` keeps the rest."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.kept, self.held = sock, b"", 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"socket": self.sock, "peername": ("127.0.0.1", 1)}.get(name, default)

    def get_write_buffer_size(self) -> int:
        return self.held

    def writelines(self, bufs: list[bytes]) -> None:
        self.kept += b"".join(bufs)


@pytest.mark.parametrize("size", [10, 1 << 20])
async def test_a_reply_alone_goes_out_whole_or_its_rest_to_the_transport(pair: Pair, size: int) -> None:
    """``_put`` writes a lone buffer itself (write(2)): taken whole, or what the socket did not
    take (a part, or none once full) goes to the transport, in order."""
    a, b = pair
    conn = RemotingConnection(ProcessorDispatcher())
    transport = _Transport(a)
    conn.connection_made(transport)  # type: ignore[arg-type]
    reply = bytes(range(256)) * (size // 256) or b"reply-head"
    conn._put(transport, [reply])  # type: ignore[arg-type]
    assert (len(transport.kept) > 0) == (size > 10)
    assert _drain(b) + transport.kept == reply
    _fill(a)  # the socket is full now: a lone reply is taken by none of it
    transport.kept = b""
    conn._put(transport, [b"next"])  # type: ignore[arg-type]
    assert transport.kept == b"next"


def test_a_full_socket_gives_the_buffers_back(pair: Pair) -> None:
    """EAGAIN: nothing taken, the same buffers come back."""
    a, _ = pair
    _fill(a)
    assert write_through(a.fileno(), [b"reply"]) == [b"reply"]
    assert write_through(a.fileno(), [b"head", b"body"]) == [b"head", b"body"]
