"""Blocking remoting client: plain sockets, no event loop, with a per-process connection pool.

For callers that must not run an event loop: Spark's planner and its reused Python worker
processes (a forked worker must not inherit a loop), scripts. It speaks the RocketMQ frame
protocol with the sans-IO codec of :mod:`pocketmq.remoting.protocol`; the
asyncio side is :mod:`pocketmq.remoting.transport.client`.

* :class:`BlockingConnection`: one socket. ``send`` assigns the opaque and writes the frame;
  ``receive`` reads frames until the reply with that opaque arrives (stale replies to an
  abandoned request and server-initiated requests are dropped). Frames are read into one
  receive buffer per connection, reused from reply to reply (a pull reply is about a megabyte:
  no fresh allocation per reply), and the body is handed out without a copy (``receive_frame``:
  buffer + bounds, ``receive``: a view), valid until the next receive on that connection.
  Several requests may be in flight (``invoke_many`` pipelines them; a caller may send its
  next request before decoding the current reply's body).
* :class:`ConnectionPool`: idle connections per address, thread-safe (callers may ask several
  peers from parallel threads), reset after a fork. A connection that saw any error is closed,
  never returned. The process-wide pool is :func:`pool`.

Errors: :class:`RemotingConnectError` (connect failed, connection lost),
:class:`RemotingTimeoutError` (no reply in time) and :class:`RemoteProtocolError` (the peer
sent a frame that cannot be decoded: the local codec error becomes a remote one at this one
receive point, as h11 does). Each of them closes the connection.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from pocketmq.remoting.protocol.codes import RPC_TYPE_RESPONSE
from pocketmq.remoting.protocol.command import RemotingCommand, command_from_header
from pocketmq.remoting.protocol.errors import (
    LocalProtocolError,
    RemoteProtocolError,
    RemotingConnectError,
    RemotingTimeoutError,
)
from pocketmq.remoting.protocol.frame import DEFAULT_MAX_FRAME_SIZE

__all__ = ["MAX_IDLE_PER_ADDR", "BlockingConnection", "ConnectionPool", "pool"]

T = TypeVar("T")
_LENGTH = struct.Struct(">i")
_WORD = struct.Struct(">i")
#: Idle connections kept per address.
MAX_IDLE_PER_ADDR = 4


class BlockingConnection:
    """One TCP connection to a broker or name server."""

    __slots__ = ("_buf", "_len_buf", "_opaque", "addr", "broken", "pid", "sock")

    def __init__(self, addr: str, connect_timeout: float) -> None:
        host, _, port_s = addr.rpartition(":")
        try:
            port = int(port_s)
        except ValueError:
            raise RemotingConnectError(f"invalid address {addr!r}") from None
        try:
            self.sock = socket.create_connection((host.strip("[]"), port), timeout=connect_timeout)
        except OSError as exc:
            raise RemotingConnectError(f"connect to {addr} failed: {exc}") from exc
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.addr = addr
        self.pid = os.getpid()
        self.broken = False
        self._opaque = 0
        self._len_buf = bytearray(4)
        self._buf = bytearray()

    def close(self) -> None:
        self.broken = True
        with contextlib.suppress(OSError):
            self.sock.close()

    def send(self, cmd: RemotingCommand) -> int:
        """Write ``cmd`` with a fresh opaque; returns the opaque."""
        self._opaque = (self._opaque + 1) & 0x7FFFFFFF
        cmd.opaque = self._opaque
        head = cmd.encode_header()
        try:
            self.sock.settimeout(None)
            if cmd.body:
                self.sock.sendall(head + cmd.body)
            else:
                self.sock.sendall(head)
        except OSError as exc:
            self.close()
            raise RemotingConnectError(f"send to {self.addr} failed: {exc}") from exc
        return cmd.opaque

    def _read_into(self, view: memoryview, deadline: float) -> None:
        got = 0
        n = len(view)
        sock = self.sock
        while got < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise RemotingTimeoutError(f"no reply from {self.addr} in time")
            sock.settimeout(remaining)
            try:
                k = sock.recv_into(view[got:])
            except TimeoutError:
                self.close()
                raise RemotingTimeoutError(f"no reply from {self.addr} in time") from None
            except OSError as exc:
                self.close()
                raise RemotingConnectError(f"read from {self.addr} failed: {exc}") from exc
            if k == 0:
                self.close()
                raise RemotingConnectError(f"connection to {self.addr} closed by the peer")
            got += k

    def _garbage(self, what: str) -> RemoteProtocolError:
        self.close()
        return RemoteProtocolError(f"{self.addr} sent {what}", peer=self.addr)

    def receive(self, opaque: int, timeout: float) -> tuple[RemotingCommand, memoryview]:
        """The reply to ``opaque`` and its body (empty view when there is none; valid until the
        next receive on this connection)."""
        cmd, frame, start, end = self.receive_frame(opaque, timeout)
        return cmd, memoryview(frame)[start:end]

    def receive_frame(self, opaque: int, timeout: float) -> tuple[RemotingCommand, bytearray, int, int]:
        """The reply to ``opaque``, the receive buffer and its body's bounds in it.

        The buffer is reused by the next receive on this connection: decode or copy the body first.

        Raises:
            RemotingTimeoutError: nothing within ``timeout`` seconds (the connection is closed).
            RemotingConnectError: the connection broke (it is closed).
            RemoteProtocolError: the peer sent a frame that cannot be decoded (it is closed).
        """
        deadline = time.monotonic() + timeout
        while True:
            reply = self._next_reply(deadline)
            if reply[0].opaque == opaque:
                return reply
            # a late reply to an abandoned request: not ours

    def _next_reply(self, deadline: float) -> tuple[RemotingCommand, bytearray, int, int]:
        """The next response frame (server-initiated requests skipped); raises as ``receive_frame``."""
        while True:
            self._read_into(memoryview(self._len_buf), deadline)
            (length,) = _LENGTH.unpack_from(self._len_buf)
            if length < 4 or length > DEFAULT_MAX_FRAME_SIZE:
                raise self._garbage(f"a frame of invalid length {length}")
            frame = self._buf
            if len(frame) < length:
                frame = self._buf = bytearray(length)
            view = memoryview(frame)[:length]
            self._read_into(view, deadline)
            (word,) = _WORD.unpack_from(frame)
            hlen = word & 0xFFFFFF
            if 4 + hlen > length:
                raise self._garbage("a header longer than its frame")
            try:
                cmd = command_from_header(bytes(view[4 : 4 + hlen]), (word >> 24) & 0xFF, None)
            except (ValueError, LocalProtocolError) as exc:
                raise self._garbage(f"an undecodable header: {exc}") from exc
            if cmd.flag & RPC_TYPE_RESPONSE:
                return cmd, frame, 4 + hlen, length

    def invoke(self, cmd: RemotingCommand, timeout: float) -> tuple[RemotingCommand, memoryview]:
        return self.receive(self.send(cmd), timeout)

    def invoke_many(self, cmds: Sequence[RemotingCommand], timeout: float) -> list[RemotingCommand]:
        """Pipeline ``cmds`` (all written first) and return the replies in order (bodies dropped).

        Replies are matched by opaque in whatever order they come: Apache RocketMQ's broker
        answers from a thread pool, so a later request's reply may arrive first.
        """
        opaques = [self.send(c) for c in cmds]
        deadline = time.monotonic() + timeout
        want = set(opaques)
        replies: dict[int, RemotingCommand] = {}
        while want:
            cmd = self._next_reply(deadline)[0]
            if cmd.opaque in want:  # else a late reply to an abandoned request
                want.discard(cmd.opaque)
                replies[cmd.opaque] = cmd
        return [replies[o] for o in opaques]


class ConnectionPool:
    """Idle :class:`BlockingConnection` objects per address; safe across threads and forks."""

    def __init__(self, connect_timeout: float = 3.0) -> None:
        self.connect_timeout = connect_timeout
        self._idle: dict[str, list[BlockingConnection]] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    @property
    def pid(self) -> int:
        """The process the pool belongs to (a forked child must not use its parent's sockets)."""
        return self._pid

    def _take(self, addr: str) -> BlockingConnection | None:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's sockets are not ours
                self._idle = {}
                self._pid = os.getpid()
            idle = self._idle.get(addr)
            return idle.pop() if idle else None

    def _give(self, conn: BlockingConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(conn.addr, [])
            if conn.pid == os.getpid() and len(idle) < MAX_IDLE_PER_ADDR:
                idle.append(conn)
                return
        conn.close()

    @contextlib.contextmanager
    def connection(self, addr: str) -> Iterator[BlockingConnection]:
        """A connection to ``addr`` for the block; returned to the pool unless it broke."""
        conn = self._take(addr) or BlockingConnection(addr, self.connect_timeout)
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        if conn.broken:
            conn.close()
        else:
            self._give(conn)

    def _call(self, addr: str, call: Callable[[BlockingConnection], T]) -> T:
        """``call`` on a pooled connection; one the peer closed meanwhile is retried once, fresh."""
        for attempt in (0, 1):
            conn = self._take(addr) if attempt == 0 else None
            fresh = conn is None
            if conn is None:
                conn = BlockingConnection(addr, self.connect_timeout)
            try:
                result = call(conn)
            except (RemotingConnectError, RemoteProtocolError):
                conn.close()
                if fresh:
                    raise
                continue
            except BaseException:
                conn.close()
                raise
            self._give(conn)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> tuple[RemotingCommand, bytes]:
        """One request/reply; the body is copied out of the connection's buffer."""

        def call(conn: BlockingConnection) -> tuple[RemotingCommand, bytes]:
            reply, body = conn.invoke(cmd, timeout)
            return reply, bytes(body)

        return self._call(addr, call)

    def invoke_many(
        self, addr: str, cmds: Sequence[RemotingCommand], timeout: float
    ) -> list[RemotingCommand]:
        """``cmds`` pipelined on one connection; the replies in order (bodies dropped)."""
        return self._call(addr, lambda conn: conn.invoke_many(cmds, timeout))

    def discard(self, addr: str) -> None:
        """Close the idle connections to ``addr`` (one broke: the peer probably restarted)."""
        with self._lock:
            idle = self._idle.pop(addr, [])
        for conn in idle:
            conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()


_POOL: ConnectionPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> ConnectionPool:
    """The process-wide pool (created on first use, recreated after a fork)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():
            _POOL = ConnectionPool()
        return _POOL
