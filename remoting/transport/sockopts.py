"""Socket buffer sizes of a server's connections (``serverSocketSndBufSize`` / ``serverSocketRcvBufSize``).

RocketMQ sets Netty's ``SO_SNDBUF`` / ``SO_RCVBUF`` child options only when the key is above 0,
so 0 keeps the kernel's autotuned default; the name server and the broker share this code.

The sizes go on the *listening* socket, not on each socket after the loop accepts it: the kernel
clones a connection from the listener when the handshake completes, before ``accept``, and sizes
the first receive window it advertises from the listener's buffer. A size set after ``accept``
only widens the window step by step as the server reads, so a burst that arrives first still meets
the default (~64 KiB) window.

Why a user raises ``serverSocketRcvBufSize``: the receive buffer is what the kernel accepts on
the server's behalf while its loop is busy. A client that writes a burst of oneway requests and
closes with replies unread sends RST, and every byte still in *its* send buffer is dropped by its
own kernel; only what the server's receive buffer already holds is still read and served.

``TCP_NOTSENT_LOWAT`` (``NOTSENT_LOWAT``, always set): the send buffer's autotuning lets the kernel
take ~4 MiB a connection that the peer has not acknowledged, so a client that pulls and never
reads was served ~8-16 pulls of 512 KiB (each read from the store and copied) before its write
buffer filled and its reading stopped; 100 of them cost ~1.4 s of loop time in ~14 ms turns
(T16). With the mark a write takes what the peer's window allows plus ``NOTSENT_LOWAT``, the rest
waits in the transport's buffer (``writeBufferHighWaterMark``), so such a peer is stopped after
one reply. A reading peer loses nothing: the kernel reports the socket writable again as soon
as less than the mark is left to send.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable
from typing import Protocol

logger = logging.getLogger(__name__)

#: unsent bytes the kernel holds for a connection beyond what the peer's window takes
NOTSENT_LOWAT = 256 * 1024
_TCP_NOTSENT_LOWAT: int | None = getattr(socket, "TCP_NOTSENT_LOWAT", None)


class _SockOpt(Protocol):
    def setsockopt(self, level: int, optname: int, value: int, /) -> None: ...


def tune_listeners(sockets: Iterable[_SockOpt], snd_buf: int, rcv_buf: int) -> None:
    """Set the non-zero sizes and ``NOTSENT_LOWAT`` on listening sockets; connections accepted
    later inherit them."""
    opts = [
        (opt, size) for opt, size in ((socket.SO_SNDBUF, snd_buf), (socket.SO_RCVBUF, rcv_buf)) if size > 0
    ]
    for sock in sockets:
        for opt, size in opts:
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, size)
            except OSError as exc:  # pragma: no cover - platform limits
                logger.warning("cannot set socket buffer size=%d error=%s", size, exc)
        if _TCP_NOTSENT_LOWAT is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, _TCP_NOTSENT_LOWAT, NOTSENT_LOWAT)
            except OSError as exc:  # pragma: no cover - not TCP (a Unix socket), old kernels
                logger.debug("cannot set TCP_NOTSENT_LOWAT: %s", exc)
