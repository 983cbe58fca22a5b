"""The broker's ACL batch check: the requests of one read checked back to back before the first
is handled (``AclValidator.check_batch`` as ``ProcessorDispatcher.batch_checks``), then each let
through or denied at its turn exactly as without it."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.broker.acl.rules import AclRules, build_rules
from pocketmq.broker.acl.validator import ACL_EXCEPTION, AclDenied, AclValidator
from pocketmq.client.acl import AclClientRPCHook
from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.transport.connection import ProcessorDispatcher, RemotingConnection

SEND_V2, RELOAD = 310, 4242


def _rules(topic_perm: str) -> AclRules:
    account = {"accessKey": "RocketMQ", "secretKey": "12345678", "topicPerms": [f"topicB={topic_perm}"]}
    return build_rules([("plain_acl.yml", {"accounts": [account]})])


class _Manager:
    def __init__(self) -> None:
        self.rules = _rules("PUB")


def _send(opaque: int, secret: str = "12345678") -> RemotingCommand:
    req = RemotingCommand.request(SEND_V2, {"a": "G", "b": "topicB"}, b"body")
    AclClientRPCHook("RocketMQ", secret).before_request("x", req)
    req.opaque = opaque
    return req


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.out: list[bytes] = []

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def writelines(self, lines: object) -> None:
        self.out.extend(bytes(x) for x in lines)  # type: ignore[attr-defined]


def _server(manager: _Manager) -> tuple[RemotingConnection, _Transport, AclValidator, list[int]]:
    """A connection of a server whose dispatcher checks as the broker's does (ACL on)."""
    validator = AclValidator(manager)  # type: ignore[arg-type]
    dispatcher = ProcessorDispatcher()
    dispatcher.before_hooks.append(validator.before_request)
    batches: list[int] = []

    def check_batch(addr: str, commands: list[RemotingCommand]) -> None:
        batches.append(len(commands))
        validator.check_batch(addr, commands)

    dispatcher.batch_checks.append(check_batch)

    def send(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    def reload(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        manager.rules = _rules("SUB")  # as an admin update would: new rules, topicB no longer PUB
        return RemotingCommand.response_to(req, ResponseCode.SUCCESS)

    dispatcher.register(SEND_V2, send)
    dispatcher.register(RELOAD, reload)
    conn = RemotingConnection(dispatcher)
    transport = _Transport()
    conn.connection_made(transport)
    return conn, transport, validator, batches


def _replies(transport: _Transport) -> list[tuple[int, int, str | None]]:
    return [(c.opaque, c.code, c.remark) for c in FrameDecoder().feed(b"".join(transport.out))]


async def test_one_read_is_checked_as_a_batch_and_each_request_decided_at_its_turn() -> None:
    conn, transport, validator, batches = _server(_Manager())
    frames = [_send(1), _send(2, secret="wrong123"), _send(3)]
    conn.data_received(b"".join(f.encode() for f in frames))
    assert batches == [3]
    replies = _replies(transport)
    assert [(o, c) for o, c, _ in replies] == [(1, 0), (2, ResponseCode.SYSTEM_ERROR), (3, 0)]
    assert replies[1][2] == f"{ACL_EXCEPTION}: Check signature failed for accessKey=RocketMQ"
    assert validator.denied == 1


async def test_a_reload_inside_the_batch_applies_to_the_requests_after_it() -> None:
    """A request allowed ahead under the old rules is decided again under the new ones."""
    conn, transport, validator, batches = _server(_Manager())
    reload = RemotingCommand.request(RELOAD, {})
    AclClientRPCHook("RocketMQ", "12345678").before_request("x", reload)
    reload.opaque = 2
    conn.data_received(b"".join(c.encode() for c in (_send(1), reload, _send(3))))
    assert batches == [3]
    codes = [(o, c) for o, c, _ in _replies(transport)]
    assert codes == [(1, 0), (2, 0), (3, ResponseCode.SYSTEM_ERROR)]
    assert validator.denied == 1


def test_the_batch_check_only_prepares() -> None:
    """What it allowed passes for that very object under the same rules only; it never raises."""
    manager = _Manager()
    validator = AclValidator(manager)  # type: ignore[arg-type]
    good, twin = _send(1), _send(1)
    broken = RemotingCommand.request(SEND_V2, {"AccessKey": "RocketMQ", "Signature": "x", "b": 7}, None)  # type: ignore[dict-item]
    validator.check_batch("127.0.0.1:1", [good, broken])
    validator.before_request("127.0.0.1:1", twin)  # not the object checked: checked itself (allowed)
    validator.before_request("127.0.0.1:1", good)
    validator.check_batch("127.0.0.1:1", [good])
    manager.rules = _rules("SUB")  # a reload after the batch check
    with pytest.raises(AclDenied, match="topic:topicB"):
        validator.before_request("127.0.0.1:1", good)
    assert validator.denied == 1
