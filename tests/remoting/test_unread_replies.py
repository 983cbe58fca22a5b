"""A peer that sends requests and never reads the replies (issue 23, T16's 100 pulling clients).

* the kernel keeps little unsent for it (``TCP_NOTSENT_LOWAT`` on the listening socket, inherited
  by accepted connections): it was served ~8-16 replies of 512 KiB, each a ~1 ms loop turn,
  before its write buffer filled and its requests stopped being handled; now one or two;
* once idle past ``serverChannelMaxIdleTimeSeconds`` it is closed for good: a close waits for the
  write buffer to drain, which it never does, so each sweep closed (and logged) it again.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.transport import server as server_module
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig
from pocketmq.remoting.transport.sockopts import NOTSENT_LOWAT
from tests.waiting import wait_until

BIG = 77
REPLY = b"r" * 512 * 1024


async def _big_reply_server(**cfg: float) -> tuple[RemotingServer, list[int]]:
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1", **cfg))  # type: ignore[arg-type]
    handled = [0]

    def big(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        handled[0] += 1
        return RemotingCommand.response_to(req, body=REPLY)

    srv.register(BIG, big)
    await srv.start()
    return srv, handled


@pytest.mark.skipif(not hasattr(socket, "TCP_NOTSENT_LOWAT"), reason="Linux/macOS socket option")
async def test_a_peer_that_does_not_read_is_served_one_or_two_large_replies() -> None:
    srv, handled = await _big_reply_server()
    sock = socket.create_connection(("127.0.0.1", srv.port))
    try:
        await wait_until(lambda: len(srv.connections) == 1)
        (conn,) = srv.connections
        assert conn.transport is not None
        accepted = conn.transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT) == NOTSENT_LOWAT
        requests = b"".join(RemotingCommand.request(BIG).encode() for _ in range(64))
        sock.sendall(requests)
        await wait_until(lambda: not conn.can_write)
        await asyncio.sleep(0.1)  # whatever would still be handled
        assert 1 <= handled[0] <= 2  # (the kernel's default autotuning took 8-16)
    finally:
        sock.close()
        await srv.stop()


async def test_an_idle_peer_that_does_not_read_is_closed_once(caplog: pytest.LogCaptureFixture) -> None:
    srv, _handled = await _big_reply_server(idle_timeout=0.3, sweep_interval=0.02)
    sock = socket.create_connection(("127.0.0.1", srv.port))
    try:
        with caplog.at_level(logging.INFO, logger=server_module.logger.name):
            sock.sendall(b"".join(RemotingCommand.request(BIG).encode() for _ in range(64)))
            await wait_until(lambda: len(srv.connections) == 1)
            # its replies never drain, yet it is gone once idle
            await wait_until(lambda: not srv.connections, timeout=5)
        lines = [r for r in caplog.records if "idle connection" in r.getMessage()]
        assert len(lines) == 1
    finally:
        sock.close()
        await srv.stop()


async def test_an_idle_peer_that_does_not_read_has_its_unhandled_requests_dropped() -> None:
    """Closed for idleness while its write buffer is full, the requests it sent and the server
    read but did not handle yet are dropped, not decoded and handled after the close (no reply
    could reach it; T16: ~80,000 pulls of 100 non-readers, 2-3 ms turns while idle ones closed)."""
    srv, handled = await _big_reply_server(idle_timeout=0.3, sweep_interval=0.02)
    sock = socket.create_connection(("127.0.0.1", srv.port))
    try:
        sock.sendall(b"".join(RemotingCommand.request(BIG).encode() for _ in range(512)))
        await wait_until(lambda: len(srv.connections) == 1)
        (conn,) = srv.connections
        await wait_until(lambda: not conn.can_write)
        served = handled[0]
        await wait_until(lambda: not srv.connections, timeout=5)
        assert handled[0] == served < 512
        assert conn._raw is None and not conn._backlog
    finally:
        sock.close()
        await srv.stop()
