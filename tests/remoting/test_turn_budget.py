"""A read of requests heavier than a send (pulls returning 32 messages, queries) is handled
until ``dispatch.TURN_BUDGET`` of the turn has passed; the rest wait for the next turns, in
order (32 pulls of 32 x 1 KiB held the loop 2.5 ms). Sends' replies, and handlers that reply
later (None), pay no clock read and are not cut."""

from __future__ import annotations

import asyncio
import time

import pytest

from pocketmq.remoting.protocol.codes import RPC_TYPE_RESPONSE, RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.transport import dispatch
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.dispatch import ProcessorDispatcher

CODE = 9302
N = 12


class Transport(asyncio.Transport):
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


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _setup(reply: bool, hooked: bool = False) -> tuple[list[int], RemotingConnection, Transport]:
    seen: list[int] = []

    def handler(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        seen.append(request.opaque)
        _busy(dispatch.TURN_BUDGET / 2.5)  # three a turn
        return RemotingCommand(0, body=b"m" * 1024) if reply else None

    d = ProcessorDispatcher()
    for code in (CODE, int(RequestCode.SEND_MESSAGE_V2)):
        d.register(code, handler)
    if hooked:
        d.before_hooks.append(lambda addr, request: None)
    conn = RemotingConnection(d)
    t = Transport()
    conn.connection_made(t)
    return seen, conn, t


def _read(code: int = CODE) -> bytes:
    return b"".join(RemotingCommand(code, k).encode() for k in range(N))


def _replies(t: Transport) -> list[int]:
    cmds = FrameDecoder(server=False).feed(b"".join(t.out))
    assert all(c.flag & RPC_TYPE_RESPONSE for c in cmds)
    return [c.opaque for c in cmds]


@pytest.mark.parametrize("hooked", [False, True])
async def test_heavy_requests_of_one_read_are_handled_over_several_turns_in_order(hooked: bool) -> None:
    seen, conn, t = _setup(reply=True, hooked=hooked)
    conn.data_received(_read())
    first = len(seen)
    assert 1 <= first < N and _replies(t) == list(range(first))  # the turn's replies written
    turns = 0
    while len(seen) < N:
        turns += 1
        await asyncio.sleep(0)
        assert turns < 50
    assert turns >= 2 and seen == list(range(N))
    await asyncio.sleep(0)
    assert _replies(t) == list(range(N)) and conn._backlog is None


@pytest.mark.parametrize(("reply", "code"), [(False, CODE), (True, int(RequestCode.SEND_MESSAGE_V2))])
async def test_replies_left_for_later_and_sends_are_not_cut(reply: bool, code: int) -> None:
    seen, conn, t = _setup(reply=reply, hooked=code != CODE)
    conn.data_received(_read(code))
    assert seen == list(range(N))
