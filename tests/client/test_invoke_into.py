"""``RemotingClient.invoke_into`` over a real loopback connection: the connection hands the
waiter the reply, the sweeper's timeout or the connection's loss (what send_async's first
attempt relies on, ``sender._FirstAttempt``), and nothing is written without an open connection."""

from __future__ import annotations

import asyncio

from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingConnectError, RemotingTimeoutError
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig

ECHO, SILENT = 9001, 9002


class Waiter:
    """A ReplyWaiter that records what it is given."""

    def __init__(self) -> None:
        self.outcome: asyncio.Future[RemotingCommand | BaseException] = (
            asyncio.get_running_loop().create_future()
        )

    def set_result(self, reply: RemotingCommand) -> None:
        self.outcome.set_result(reply)

    def set_exception(self, exc: BaseException) -> None:
        self.outcome.set_result(exc)

    def done(self) -> bool:
        return self.outcome.done()


def echo(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
    return RemotingCommand.response_to(req, 0, req.ext_fields and req.ext_fields.get("x"))


def silent(conn: RemotingConnection, req: RemotingCommand) -> None:
    return None  # never answered


async def test_invoke_into_hands_the_waiter_the_reply_the_timeout_and_the_loss() -> None:
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1", port=0))
    srv.register(ECHO, echo)
    srv.register(SILENT, silent)
    await srv.start()
    client = RemotingClient(RemotingClientConfig(sweep_interval=0.01))
    addr = f"127.0.0.1:{srv.port}"
    try:
        # no connection yet: nothing written, the caller takes invoke
        assert not client.invoke_into(addr, RemotingCommand.request(ECHO, {"x": "0"}), 3.0, Waiter())
        await client.get_connection(addr)
        # the reply of each request reaches its own waiter
        waiters = [Waiter() for _ in range(3)]
        for i, w in enumerate(waiters):
            assert client.invoke_into(addr, RemotingCommand.request(ECHO, {"x": str(i)}), 3.0, w)
        replies = [await asyncio.wait_for(w.outcome, 5) for w in waiters]
        assert [r.remark for r in replies if isinstance(r, RemotingCommand)] == ["0", "1", "2"]
        # no reply: the sweeper's timeout
        w = Waiter()
        assert client.invoke_into(addr, RemotingCommand.request(SILENT), 0.05, w)
        assert isinstance(await asyncio.wait_for(w.outcome, 5), RemotingTimeoutError)
        # the connection lost with a request pending
        w = Waiter()
        assert client.invoke_into(addr, RemotingCommand.request(SILENT), 30.0, w)
        await asyncio.sleep(0.05)  # on the server
        await srv.stop()
        assert isinstance(await asyncio.wait_for(w.outcome, 5), RemotingConnectError)
    finally:
        await client.close()
        await srv.stop()
