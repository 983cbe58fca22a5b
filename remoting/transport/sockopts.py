"""Socket buffer sizes of accepted connections (``serverSocketSndBufSize`` / ``serverSocketRcvBufSize``).

RocketMQ sets Netty's ``SO_SNDBUF`` / ``SO_RCVBUF`` child options only when the key is above 0,
so 0 keeps the kernel's autotuned default; the name server and the broker share this hook.

Why a user raises ``serverSocketRcvBufSize``: the receive buffer is what the kernel accepts on
the server's behalf while its loop is busy. A client that writes a burst of oneway requests and
closes with replies unread sends RST, and every byte still in *its* send buffer is dropped by its
own kernel; only what the server's receive buffer already holds is still read and served.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)


def socket_buffer_hook(snd_buf: int, rcv_buf: int) -> Callable[[RemotingConnection], None] | None:
    """An ``on_connect`` callback setting the non-zero sizes on each accepted socket, or None."""
    opts = [
        (opt, size) for opt, size in ((socket.SO_SNDBUF, snd_buf), (socket.SO_RCVBUF, rcv_buf)) if size > 0
    ]
    if not opts:
        return None

    def tune(conn: RemotingConnection) -> None:
        transport = conn.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None:
            return
        for opt, size in opts:
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, size)
            except OSError as exc:  # pragma: no cover - platform limits
                logger.warning("cannot set socket buffer size=%d error=%s", size, exc)

    return tune
