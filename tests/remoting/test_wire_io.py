"""``wire_io.write_through`` on a real socket: what the socket did not take comes back, in order."""

from __future__ import annotations

import socket

from pocketmq.remoting.transport.wire_io import write_through


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a.setblocking(False)
    b.setblocking(False)
    return a, b


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


def test_one_buffer_taken_whole_leaves_nothing() -> None:
    # (the reply alone of a read at one send in flight: the short path)
    a, b = _pair()
    try:
        assert write_through(a.fileno(), [b"reply-head"]) == []
        assert _drain(b) == b"reply-head"
    finally:
        a.close()
        b.close()


def test_what_the_socket_does_not_take_comes_back_in_order() -> None:
    a, b = _pair()
    try:
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
    finally:
        a.close()
        b.close()


def test_a_full_socket_gives_the_buffers_back() -> None:
    """EAGAIN: nothing taken, the same buffers come back (one alone: write(2); several: writev)."""
    a, b = _pair()
    try:
        while write_through(a.fileno(), [bytes(65536)]) != [bytes(65536)]:
            pass  # (filled until the socket takes nothing)
        assert write_through(a.fileno(), [b"reply"]) == [b"reply"]
        assert write_through(a.fileno(), [b"head", b"body"]) == [b"head", b"body"]
    finally:
        a.close()
        b.close()
