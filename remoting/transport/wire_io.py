"""Writes straight to a connection's socket, and what is left to read from it after a reset.

Why the connection writes itself instead of through the transport: the transport closes the
socket the moment a write fails, and a failed write is how the server learns that a peer reset
the connection (a client that closes with replies unread sends RST). The bytes the peer sent
before that RST are still in the kernel's receive buffer, and RocketMQ serves every request that
arrived before the close; once the transport has closed the socket they are gone. Writing with
``os.writev`` on the socket's descriptor lets the connection read them first
(:meth:`RemotingConnection._peer_reset`). The transport still writes whatever the socket does not
take at once (its buffer, high-water marks and pause/resume stay in charge).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

#: ``writev`` takes at most this many buffers (Linux ``IOV_MAX``); longer lists go to the transport
IOV_MAX = 1024
#: An open write batch is written once it holds this many buffers (a frame is one or two), so a
#: burst (128 sends woken by one read) reaches the peer in slices it can start on, not all at the
#: end of the turn: at 128 SYNC sends in flight both sides fell into lockstep (26k -> 34k msgs/s).
#: (Here, not in ``connection``: the dispatcher's inline reply checks it too.)
MAX_BATCH_PARTS = 64
#: at most this much is read back after a reset (the receive buffer holds less unless raised)
SALVAGE_MAX = 64 * 1024 * 1024
_writev = os.writev
_read = os.read


def write_through(fd: int, bufs: Sequence[bytes | memoryview]) -> list[bytes | memoryview]:
    """Write ``bufs`` to ``fd`` without blocking; returns what the socket did not take (empty: all).

    Raises:
        OSError: the write failed for another reason than a full socket buffer (EPIPE,
            ECONNRESET: the peer is gone).
    """
    try:
        sent = _writev(fd, bufs)
    except BlockingIOError:
        return list(bufs)
    if len(bufs) == 1 and sent == len(bufs[0]):  # (a reply alone, all taken: no enumerate loop)
        return []
    for i, buf in enumerate(bufs):
        size = len(buf)
        if sent < size:
            rest: list[bytes | memoryview] = [memoryview(buf)[sent:]] if sent else [buf]
            rest += bufs[i + 1 :]
            return rest
        sent -= size
    return []


def read_rest(fd: int, limit: int = SALVAGE_MAX) -> bytes:
    """Everything ``fd`` still has to read (until empty, EOF, an error or ``limit`` bytes)."""
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        try:
            chunk = _read(fd, 256 * 1024)
        except OSError:  # empty (EAGAIN), or the reset reported after the data
            break
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def format_addr(addr: object) -> str:
    """``host:port`` of a socket address (``get_extra_info("peername")``), else its text."""
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr or "")
