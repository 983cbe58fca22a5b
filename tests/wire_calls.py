"""Client helpers for tests that talk to a server over loopback: one request over a fresh
:class:`~pocketmq.testing.wire.Wire` connection, closed afterwards (for tests that ask a server
one thing, not hold a conversation), and a :class:`RemotingClient` closed after the test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig
from pocketmq.testing.wire import Wire


async def call_once(
    addr: str, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
) -> RemotingCommand:
    wire = Wire(addr)
    try:
        return await wire.call(code, ext, body)
    finally:
        await wire.close()


async def route_code(namesrv_addr: str, topic: str) -> int:
    """The response code of GET_ROUTEINFO_BY_TOPIC (SUCCESS or TOPIC_NOT_EXIST)."""
    return (await call_once(namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})).code


@contextlib.asynccontextmanager
async def remoting_client(request_timeout: float) -> AsyncIterator[RemotingClient]:
    """A :class:`RemotingClient` whose timeout sweeper runs every 20 ms (timeouts show quickly)."""
    cli = RemotingClient(RemotingClientConfig(request_timeout=request_timeout, sweep_interval=0.02))
    try:
        yield cli
    finally:
        await cli.close()
