"""RPC hooks: the seam for ACL signing/verification and tracing (RocketMQ ``RPCHook``).

A hook sees every request before it is processed (server) or sent (client), and every
response after it is produced or received. A server-side ``before_request`` may raise a
``ResponseError`` to reject the request (ACL denial replies SYSTEM_ERROR with the reason).
"""

from __future__ import annotations

from typing import Protocol

from pocketmq.remoting.protocol.command import RemotingCommand


class RPCHook(Protocol):
    def before_request(self, remote_addr: str, request: RemotingCommand) -> None: ...

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None: ...
