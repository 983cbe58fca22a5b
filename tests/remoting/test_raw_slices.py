"""A large read of many small frames is decoded ``PER_TURN`` frames per loop turn, reading paused
meanwhile (issue 23, T16): decoding a 256 KB read of pipelined pulls at once held the loop ~8 ms
per client, and a hundred such clients starting together stalled every other client for over a
second. Order, completeness and the close-time rule (everything read is served) are kept.
"""

from __future__ import annotations

import asyncio

from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.transport.connection import PER_TURN, RemotingConnection

CODE = 9301


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.pauses = 0
        self.out: list[bytes] = []

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out.append(bytes(data))

    def writelines(self, lines: object) -> None:
        self.out.extend(bytes(x) for x in lines)  # type: ignore[attr-defined]


class Dispatcher:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def dispatch(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        self.seen.append(request.opaque)

    def connection_made(self, conn: RemotingConnection) -> None:
        pass

    def connection_lost(self, conn: RemotingConnection) -> None:
        pass


def _blob(n: int, body: bytes = b"") -> bytes:
    return b"".join(RemotingCommand(CODE, k, body=body or None).encode() for k in range(n))


def _connected() -> tuple[Dispatcher, RemotingConnection, Transport]:
    d = Dispatcher()
    conn = RemotingConnection(d)
    t = Transport()
    conn.connection_made(t)
    return d, conn, t


async def _turns(until: object, limit: int = 1000) -> int:
    for turn in range(limit):
        if until():  # type: ignore[operator]
            return turn
        await asyncio.sleep(0)
    raise AssertionError("not done")


async def test_a_large_read_is_decoded_a_slice_per_turn_in_order() -> None:
    d, conn, t = _connected()
    data = _blob(1000)
    assert len(data) > 16 * 1024
    conn.data_received(data)
    assert len(d.seen) == PER_TURN and t.paused  # one slice decoded and handled now
    assert conn._raw is not None  # the rest still bytes: not decoded in this turn
    turns = await _turns(lambda: len(d.seen) == 1000)
    assert turns >= 1000 // PER_TURN - 1
    assert d.seen == list(range(1000)) and not t.paused and conn._raw is None


async def test_large_frames_are_not_sliced() -> None:
    d, conn, t = _connected()
    conn.data_received(_blob(3, body=b"b" * 100_000))  # 3 frames: fewer than a slice
    assert d.seen == [0, 1, 2] and not t.paused and conn._raw is None


async def test_what_was_read_is_served_when_the_peer_closes() -> None:
    d, conn, t = _connected()
    conn.data_received(_blob(500))
    conn.connection_lost(None)
    assert d.seen == list(range(500))


async def test_a_frame_split_across_reads_still_decodes() -> None:
    d, conn, t = _connected()
    data = _blob(1000)
    conn.data_received(data[:7])  # a partial frame held: the next read is not sliced
    conn.data_received(data[7:])
    await _turns(lambda: len(d.seen) == 1000)
    assert d.seen == list(range(1000))
