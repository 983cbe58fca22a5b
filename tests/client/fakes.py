"""Fakes of the client's I/O seams for unit tests (no servers are involved)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pocketmq.remoting.protocol.command import RemotingCommand


class FakeRemoting:
    """Stands in for ``RemotingClient``: records requests, answers from a handler."""

    def __init__(self, handler: Callable[[str, RemotingCommand], RemotingCommand | Exception]) -> None:
        self.handler = handler
        self.requests: list[tuple[str, RemotingCommand]] = []
        self.oneway: list[tuple[str, RemotingCommand]] = []

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout: float | None = None
    ) -> RemotingCommand:
        self.requests.append((addr, request))
        reply = self.handler(addr, request)
        if isinstance(reply, Exception):
            raise reply
        reply.opaque = request.opaque
        return reply

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        self.oneway.append((addr, request))


def reply(
    code: int = 0, ext: dict[str, str] | None = None, body: bytes | None = None, remark: str | None = None
) -> RemotingCommand:
    return RemotingCommand(code, 0, 1, remark, ext, body)


def as_any(x: object) -> Any:
    return x
