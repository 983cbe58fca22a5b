"""A large read of many small frames is decoded ``PER_TURN`` frames per loop turn (issue 23, T16):
decoding a 256 KB read of pipelined pulls at once held the loop ~8 ms per client, and a hundred
such clients starting together stalled every other client for over a second. Order, completeness
and the close-time rule (everything read is served) are kept, and reading goes on meanwhile up to
``RAW_HOLD_MAX`` (bytes left in the kernel are lost when the peer aborts: Go client oneway-close).
"""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.transport import connection
from pocketmq.remoting.transport.client import ReplyConnection
from pocketmq.remoting.transport.connection import (
    LOST_SLICE,
    PER_TURN,
    RAW_HOLD_MAX,
    RAW_SLICE_MIN,
    REPLIES_PER_TURN,
    RemotingConnection,
)
from pocketmq.remoting.transport.limits import QueueWait

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
        self.seen.append(-1)  # the owner's on_close


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
    assert len(d.seen) == PER_TURN and not t.paused  # one slice decoded and handled now
    assert conn._raw is not None  # the rest still bytes: not decoded in this turn
    turns = await _turns(lambda: len(d.seen) == 1000)
    assert turns >= 1000 // PER_TURN - 1
    assert d.seen == list(range(1000)) and not t.paused and conn._raw is None


async def test_large_frames_are_not_sliced() -> None:
    d, conn, t = _connected()
    conn.data_received(_blob(3, body=b"b" * 100_000))  # 3 frames: fewer than a slice
    assert d.seen == [0, 1, 2] and not t.paused and conn._raw is None


async def test_what_was_read_is_served_when_the_peer_closes_a_slice_per_turn() -> None:
    """100 non-reading clients closing with ~2,000 pulls each read: handled in one go, they held
    the loop ~2 s (T16); now ``PER_TURN`` a turn, and the owner hears of the close after them."""
    d, conn, t = _connected()
    conn.data_received(_blob(500))
    conn.connection_lost(None)
    waiting = asyncio.ensure_future(conn.wait_closed())
    turns = await _turns(lambda: d.seen[-1:] == [-1])
    assert turns >= (500 - PER_TURN) // LOST_SLICE - 2  # (the first slice: in data_received)
    assert d.seen == [*range(500), -1] and conn._raw is None and not conn._backlog
    await asyncio.wait_for(waiting, 1)


async def test_a_frame_split_across_reads_still_decodes() -> None:
    d, conn, t = _connected()
    data = _blob(1000)
    conn.data_received(data[:7])  # a partial frame held: the next read is not sliced
    conn.data_received(data[7:])
    await _turns(lambda: len(d.seen) == 1000)
    assert d.seen == list(range(1000))


async def test_reads_arriving_meanwhile_join_in_order_and_reading_goes_on() -> None:
    d, conn, t = _connected()
    data = _blob(3000)
    third = len(data) // 3
    conn.data_received(data[:third])
    conn.data_received(data[third : 2 * third])  # a split frame: joined before it is decoded
    conn.data_received(data[2 * third :])
    assert not t.paused and t.pauses == 0
    await _turns(lambda: len(d.seen) == 3000, limit=5000)
    assert d.seen == list(range(3000)) and conn._raw is None


async def test_reading_pauses_only_past_the_hold_limit() -> None:
    d, conn, t = _connected()
    data = _blob(40_000, body=b"x" * 100)
    assert len(data) > RAW_HOLD_MAX
    step = 256 * 1024
    conn.data_received(data[:step])
    rest = step
    while not t.paused:
        conn.data_received(data[rest : rest + step])
        rest += step
    assert rest < len(data)  # a peer outpacing the decoding is stopped before all was read
    await _turns(lambda: not t.paused, limit=20_000)
    conn.data_received(data[rest:])
    await _turns(lambda: len(d.seen) == 40_000, limit=20_000)
    assert d.seen == list(range(40_000))


async def test_bytes_joining_a_held_read_are_not_judged_by_its_read_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connection that keeps streaming keeps a read held; the bytes that join it carry the
    newest read's time (lenient), not the first one's: with the first's, every request of a
    steady 64-in-flight stream was answered SYSTEM_BUSY once the held read was 200 ms old."""
    clock = [100.0]
    monkeypatch.setattr(connection, "_monotonic", lambda: clock[0])
    qw = QueueWait({CODE: 0.2})
    d = Dispatcher()
    conn = RemotingConnection(d, queue_wait=qw)
    t = Transport()
    conn.connection_made(t)
    data = _blob(3000)
    conn.data_received(data[:20_000])  # held: decoded a slice per turn
    clock[0] += 0.3  # the loop was busy elsewhere; the next read joins the held bytes
    conn.data_received(data[20_000:])
    await _turns(lambda: len(d.seen) + qw.busy_replies == 3000, limit=5000)
    # (the first read's first RAW_WHOLE_MAX frames were decoded in it, a turn's handled: the
    # rest of them waited in the backlog from that read's time, as a read of that many alone)
    whole = connection.RAW_WHOLE_MAX
    assert qw.busy_replies == whole - PER_TURN
    assert d.seen == [*range(PER_TURN), *range(whole, 3000)]


async def test_lost_connections_share_a_time_budget_per_turn() -> None:
    """T16: 100 non-readers closing together each scheduled their slice with ``call_soon``, so all
    100 slices ran in one loop turn (85-156 ms); through a ``TurnShare`` the connections take
    turns within a budget a turn (0 here: one slice a turn), and each is served in full, in order."""
    from pocketmq.remoting.transport.limits import TurnShare

    share = TurnShare(asyncio.get_running_loop(), budget=0.0)
    pairs = []
    for _ in range(3):
        d = Dispatcher()
        conn = RemotingConnection(d, share=share)
        conn.connection_made(Transport())
        conn.data_received(_blob(5 * PER_TURN))
        pairs.append((d, conn))
    before = [len(d.seen) for d, _c in pairs]
    for _d, conn in pairs:
        conn.connection_lost(None)
    # none in connection_lost itself: ~20 never-reading connections aborted in one sweep each
    # served a slice there (T16: ~6 ms turns)
    assert [len(d.seen) for d, _c in pairs] == before
    for turn in range(3):  # one slice a turn, the connections in turn
        await asyncio.sleep(0)
        now = [len(d.seen) for d, _c in pairs]
        assert now == [n + LOST_SLICE * (k == turn) for k, n in enumerate(before)]
        before = now
    await _turns(lambda: all(d.seen[-1:] == [-1] for d, _c in pairs))
    assert all(d.seen == [*range(5 * PER_TURN), -1] for d, _c in pairs)


async def test_turn_share_runs_each_work_once_a_turn_and_goes_on_after_a_failure() -> None:
    from pocketmq.remoting.transport.limits import TurnShare

    share = TurnShare(asyncio.get_running_loop(), budget=10.0)
    ran: list[str] = []

    def again() -> None:
        ran.append("again")
        if ran.count("again") < 3:
            share.add(again)

    def boom() -> None:
        ran.append("boom")
        raise ValueError("boom")

    share.add(again)
    share.add(boom)
    await asyncio.sleep(0)
    assert ran == ["again", "boom"]  # what ``again`` added waits for the next turn
    await _turns(lambda: ran.count("again") == 3)
    assert ran == ["again", "boom", "again", "again"]


async def test_a_clients_connection_decodes_a_large_read_of_replies_whole() -> None:
    """``ReplyConnection`` (a RemotingClient's): the raw slices guard a server's loop; a client's
    replies are decoded in their read (their handling is still ``PER_TURN`` a turn, in order)."""
    conn = ReplyConnection(Dispatcher())
    conn.connection_made(Transport())
    got: list[int] = []
    loop = asyncio.get_running_loop()
    for k in range(1000):
        future = loop.create_future()
        future.add_done_callback(lambda f: got.append(f.result().opaque))
        conn.pending[k] = (future, loop.time() + 60, RemotingCommand(CODE, k))
    replies = b"".join(RemotingCommand(0, k, 1).encode() for k in range(1000))  # response flag
    assert len(replies) > RAW_SLICE_MIN
    conn.data_received(replies)
    assert conn._raw is None and len(conn._backlog or ()) == 1000 - PER_TURN  # all decoded now
    await _turns(lambda: len(got) == 1000)
    assert got == list(range(1000)) and not conn.pending


@pytest.mark.parametrize("n", [PER_TURN + 1, REPLIES_PER_TURN, REPLIES_PER_TURN + 1])
async def test_a_clients_read_of_replies_is_handled_in_its_turn_up_to_replies_per_turn(n: int) -> None:
    """A client's read of up to ``REPLIES_PER_TURN`` replies (a send window's SEND_OKs) resolves
    them all in its turn; a larger one is handled ``PER_TURN`` a turn, in order, as a server's
    requests are (a server's read of ``PER_TURN + 1`` requests waits a turn for its last one)."""
    conn = ReplyConnection(Dispatcher())
    conn.connection_made(Transport())
    got: list[int] = []
    loop = asyncio.get_running_loop()
    for k in range(n):
        conn.pending[k] = (_Waiter(got), loop.time() + 60, RemotingCommand(CODE, k))  # type: ignore[assignment]
    conn.data_received(b"".join(RemotingCommand(0, k, 1).encode() for k in range(n)))
    if n <= REPLIES_PER_TURN:
        assert got == list(range(n)) and conn._backlog is None and not conn.pending
    else:
        assert got == list(range(PER_TURN)) and len(conn._backlog or ()) == n - PER_TURN
        await _turns(lambda: len(got) == n)
        assert got == list(range(n)) and not conn.pending
    d, server, _ = _connected()
    server.data_received(_blob(PER_TURN + 1))
    assert len(d.seen) == PER_TURN
    await _turns(lambda: len(d.seen) == PER_TURN + 1)


class _Waiter:
    """A reply waiter (``RemotingConnection.request``'s ``waiter``) noting the reply's opaque."""

    def __init__(self, got: list[int]) -> None:
        self.got = got

    def set_result(self, reply: RemotingCommand) -> None:
        self.got.append(reply.opaque)


async def test_reads_held_behind_a_large_read_are_kept_apart_until_reached() -> None:
    """Each read behind a held one is joined once, when the slices reach it (a join at every
    read copied all still held each time); frames and length words split anywhere decode."""
    d, conn, t = _connected()
    data = _blob(2000, body=b"y" * 37)
    first = data[: RAW_SLICE_MIN * 2]
    conn.data_received(first)
    assert conn._raw is first
    pos, sizes = len(first), [1, 2, 3, 5, 4097, 7, 11, 30_000, 13]
    chunks = []
    while pos < len(data):
        size = sizes[len(chunks) % len(sizes)]
        chunks.append(data[pos : pos + size])
        pos += size
    for chunk in chunks:
        conn.data_received(chunk)
    assert conn._raw is first and conn._raw_more == chunks  # nothing joined yet
    await _turns(lambda: len(d.seen) == 2000, limit=5000)
    assert d.seen == list(range(2000)) and conn._raw is None and not conn._raw_more


async def test_a_read_of_a_few_frames_more_than_a_turn_is_decoded_whole() -> None:
    """Up to ``RAW_WHOLE_MAX`` frames (a 128-send window's read, ~34) are decoded at once and
    handled ``PER_TURN`` a turn through the backlog; more are held raw and sliced as before."""
    body = b"z" * 1024
    d, conn, t = _connected()
    data = _blob(connection.RAW_WHOLE_MAX, body=body)
    assert len(data) > RAW_SLICE_MIN
    conn.data_received(data)
    assert conn._raw is None and len(d.seen) == PER_TURN  # all decoded, one turn's handled
    await _turns(lambda: len(d.seen) == connection.RAW_WHOLE_MAX)
    assert d.seen == list(range(connection.RAW_WHOLE_MAX))
    d, conn, t = _connected()
    conn.data_received(_blob(connection.RAW_WHOLE_MAX + 1, body=body))
    assert conn._raw is not None and len(d.seen) == PER_TURN  # held: decoded a slice a turn
    await _turns(lambda: len(d.seen) == connection.RAW_WHOLE_MAX + 1)
    assert d.seen == list(range(connection.RAW_WHOLE_MAX + 1))
