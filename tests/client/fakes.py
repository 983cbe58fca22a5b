"""Fakes of the client's I/O seams for unit tests (no servers are involved)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pocketmq.remoting.protocol.command import RemotingCommand, decode_command


class FakeRemoting:
    """Stands in for ``RemotingClient``: records requests, answers from a handler."""

    def __init__(self, handler: Callable[[str, RemotingCommand], RemotingCommand | Exception]) -> None:
        self.handler = handler
        self.hooks: list[Any] = []
        self.before_hooks: list[Any] = []
        self.requests: list[tuple[str, RemotingCommand]] = []
        #: the type of every request given (api.SendRequest: a pre-rendered header)
        self.request_types: list[type] = []
        self.oneway: list[tuple[str, RemotingCommand]] = []

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout: float | None = None
    ) -> RemotingCommand:
        self.request_types.append(type(request))
        request = as_decoded(request)
        self.requests.append((addr, request))
        reply = self.handler(addr, request)
        if isinstance(reply, Exception):
            raise reply
        reply.opaque = request.opaque
        return reply

    def invoke_into(
        self, addr: str, request: RemotingCommand, timeout: float, waiter: Any, alone: bool = False
    ) -> bool:
        return False  # as RemotingClient without an open connection: the caller uses invoke

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        self.oneway.append((addr, request))


def as_decoded(request: RemotingCommand) -> RemotingCommand:
    """``request`` as the peer decodes it when its header was pre-rendered (api.SendRequest:
    no ``ext_fields``), else itself."""
    if type(request).encode_header is not RemotingCommand.encode_header:
        return decode_command(request.encode()[4:])
    return request


def reply(
    code: int = 0, ext: dict[str, str] | None = None, body: bytes | None = None, remark: str | None = None
) -> RemotingCommand:
    return RemotingCommand(code, 0, 1, remark, ext, body)


def as_any(x: object) -> Any:
    return x
