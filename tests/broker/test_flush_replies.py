"""FlushReplies: SYNC_FLUSH sends answered per group-commit round (the round future is driven here)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pocketmq.broker.processor.flush_replies import FlushReplies
from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.store.results import AppendResult, PutMessageStatus, PutResult


class Rounds:
    """A group commit whose rounds the test resolves; records every registration."""

    def __init__(self) -> None:
        self.registered: list[int] = []
        self.future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.direct: list[Callable[[asyncio.Future[bool]], None]] = []

    def flush_waiter(
        self, result: PutResult, direct: Callable[[asyncio.Future[bool]], None] | None = None
    ) -> asyncio.Future[bool] | None:
        append = result.append
        assert append is not None
        self.registered.append(append.wrote_offset + append.wrote_bytes)
        if direct is not None and direct not in self.direct:
            self.direct.append(direct)
        return self.future

    def resolve(self, how: Callable[[], object]) -> None:
        """Resolve the round as the group commit does: the callbacks run in the same call."""
        how()
        for cb in self.direct:
            cb(self.future)


class Conn:
    remote_addr = "127.0.0.1:1"

    def __init__(self, active: bool = True) -> None:
        self.is_active = active
        self.sent: list[RemotingCommand] = []

    def send_response(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


def put(offset: int, size: int = 100) -> PutResult:
    return PutResult(PutMessageStatus.PUT_OK, AppendResult.of(offset, size))


def reply(request: RemotingCommand, result: PutResult, queue_id: int) -> RemotingCommand:
    """The send processor's rendering (``_render``), told apart by its remark."""
    code = (
        ResponseCode.SUCCESS if result.status is PutMessageStatus.PUT_OK else ResponseCode.FLUSH_DISK_TIMEOUT
    )
    return RemotingCommand.response_to(request, code, f"T:{queue_id}")


def add(fr: FlushReplies, rounds: object, conn: Conn, req: RemotingCommand, result: PutResult, queue_id: int) -> RemotingCommand:  # fmt: skip
    """A stored send handed over as the send processor does: its reply rendered at the put."""
    rendered = reply(req, result, queue_id)
    fr.add(rounds, conn, req, result, queue_id, rendered)  # type: ignore[arg-type]
    return rendered


def request(oneway: bool = False) -> RemotingCommand:
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
    if oneway:
        req.flag |= RPC_ONEWAY
    return req


async def turn() -> None:
    await asyncio.sleep(0)


async def test_one_registration_per_turn_at_its_highest_end_then_answers_in_order():
    rounds, conn = Rounds(), Conn()
    fr = FlushReplies(reply)
    reqs = [request() for _ in range(3)]
    for i, (req, off) in enumerate(zip(reqs, (0, 300, 100), strict=True)):
        add(fr, rounds, conn, req, put(off), i)
    assert rounds.registered == [] and fr.waiting == 3  # nothing registered inside the turn
    await turn()
    assert rounds.registered == [400, 100]  # the highest end, then the first put's
    assert conn.sent == []
    rounds.resolve(lambda: rounds.future.set_result(True))
    # answered in the call that resolved the round, not a loop turn later
    assert [(r.opaque, r.code, r.remark) for r in conn.sent] == [
        (q.opaque, ResponseCode.SUCCESS, f"T:{i}") for i, q in enumerate(reqs)
    ]
    assert fr.waiting == 0


async def test_turns_joining_one_round_are_answered_together():
    rounds, conn = Rounds(), Conn()
    fr = FlushReplies(reply)
    add(fr, rounds, conn, request(), put(0), 0)
    await turn()
    add(fr, rounds, conn, request(), put(100), 1)
    await turn()
    assert rounds.registered == [100, 200] and fr.waiting == 2
    rounds.resolve(lambda: rounds.future.set_result(True))
    await turn()
    assert [r.remark for r in conn.sent] == ["T:0", "T:1"]


async def test_timed_out_round_answers_flush_disk_timeout():
    rounds, conn = Rounds(), Conn()
    fr = FlushReplies(reply)
    rendered = add(fr, rounds, conn, request(), put(0), 0)
    await turn()
    rounds.resolve(lambda: rounds.future.set_result(False))
    await turn()
    assert [r.code for r in conn.sent] == [ResponseCode.FLUSH_DISK_TIMEOUT]
    assert conn.sent[0] is not rendered  # rendered anew from a FLUSH_DISK_TIMEOUT result


async def test_flushed_round_sends_the_replies_rendered_at_the_put():
    """The send processor renders a stored send's SEND_OK when it is put: a flushed round
    sends those very objects, rendering nothing."""
    rounds, conn = Rounds(), Conn()
    fr = FlushReplies(reply)
    rendered = [add(fr, rounds, conn, request(), put(100 * i), i) for i in range(3)]
    await turn()
    rounds.resolve(lambda: rounds.future.set_result(True))
    assert len(conn.sent) == 3 and all(a is b for a, b in zip(conn.sent, rendered, strict=True))


async def test_already_flushed_is_answered_right_after_the_turn():
    rounds, conn = Rounds(), Conn()
    rounds.resolve(lambda: rounds.future.set_result(True))
    fr = FlushReplies(reply)
    add(fr, rounds, conn, request(), put(0), 0)
    await turn()
    assert [r.code for r in conn.sent] == [ResponseCode.SUCCESS]


async def test_failed_round_is_system_error_and_skips_oneway_and_closed():
    rounds, conn, closed = Rounds(), Conn(), Conn(active=False)
    fr = FlushReplies(reply)
    add(fr, rounds, conn, request(), put(0), 0)
    add(fr, rounds, conn, request(oneway=True), put(100), 0)
    add(fr, rounds, closed, request(), put(200), 0)
    await turn()
    rounds.resolve(lambda: rounds.future.set_exception(OSError("EIO")))
    await turn()
    assert [(r.code, r.remark) for r in conn.sent] == [(ResponseCode.SYSTEM_ERROR, "OSError: EIO")]
    assert closed.sent == []


async def test_cancelled_round_answers_nobody():
    rounds, conn = Rounds(), Conn()
    fr = FlushReplies(reply)
    add(fr, rounds, conn, request(), put(0), 0)
    await turn()
    rounds.resolve(rounds.future.cancel)
    await turn()
    assert conn.sent == [] and fr.waiting == 0


class Staged:
    """A group commit as ``GroupCommitService.wait_flushed`` places ends: at or below
    ``flushed`` a done future, at or below ``target`` (the fsync in flight) the riding round,
    past it the open round."""

    def __init__(self, flushed: int, target: int) -> None:
        loop = asyncio.get_running_loop()
        self.flushed, self.target = flushed, target
        self.done: asyncio.Future[bool] = loop.create_future()
        self.done.set_result(True)
        self.riding: asyncio.Future[bool] = loop.create_future()
        self.open: asyncio.Future[bool] = loop.create_future()
        self.direct: list[Callable[[asyncio.Future[bool]], None]] = []
        self.registered: list[int] = []

    def flush_waiter(
        self, result: PutResult, direct: Callable[[asyncio.Future[bool]], None] | None = None
    ) -> asyncio.Future[bool] | None:
        append = result.append
        assert append is not None
        end = append.wrote_offset + append.wrote_bytes
        self.registered.append(end)
        if direct is not None and direct not in self.direct:
            self.direct.append(direct)
        if end <= self.flushed:
            return self.done
        return self.riding if end <= self.target else self.open

    def resolve(self, fut: asyncio.Future[bool]) -> None:
        fut.set_result(True)
        for cb in self.direct:
            cb(fut)


async def test_a_turn_an_fsync_started_in_is_registered_in_parts_and_its_prefix_rides_it():
    # puts 0..9 of 100 bytes; the first two are flushed already, the fsync in flight covers
    # up to 650 (puts 2..5), the rest waits for the next fsync
    staged, conn = Staged(flushed=200, target=650), Conn()
    fr = FlushReplies(reply)
    reqs = [request() for _ in range(10)]
    for i, req in enumerate(reqs):
        add(fr, staged, conn, req, put(i * 100), i)
    await turn()
    assert staged.registered[:2] == [1000, 100]  # the highest end, then the first put's
    assert len(staged.registered) <= 2 + 2 * 4  # then a bisection per boundary
    assert [r.remark for r in conn.sent] == ["T:0", "T:1"]  # the flushed prefix: at once
    staged.resolve(staged.riding)
    assert [r.remark for r in conn.sent] == [f"T:{i}" for i in range(6)]
    assert fr.waiting == 4
    staged.resolve(staged.open)
    assert [r.opaque for r in conn.sent] == [q.opaque for q in reqs] and fr.waiting == 0


async def test_a_turn_in_one_round_is_registered_twice_only():
    staged, conn = Staged(flushed=0, target=0), Conn()
    fr = FlushReplies(reply)
    for i in range(5):
        add(fr, staged, conn, request(), put(i * 100), i)
    await turn()
    assert staged.registered == [500, 100] and conn.sent == []
    staged.resolve(staged.open)
    assert [r.remark for r in conn.sent] == [f"T:{i}" for i in range(5)]


class Failing(Conn):
    """A connection that closes at its first reply (the peer reset mid-round)."""

    def __init__(self) -> None:
        super().__init__()
        self.tries = 0

    def send_response(self, cmd: RemotingCommand) -> None:
        self.tries += 1
        self.is_active = False
        raise ConnectionResetError("reset")


async def test_a_connection_that_fails_mid_round_is_read_again_and_skipped_the_others_answered():
    rounds, broken, conn = Rounds(), Failing(), Conn()
    fr = FlushReplies(reply)
    for i in range(3):
        add(fr, rounds, broken, request(), put(100 * i), i)
    add(fr, rounds, conn, request(), put(300), 3)
    await turn()
    rounds.resolve(lambda: rounds.future.set_result(True))
    # (the connection's state is read once per run of its waiters, and again after a failure)
    assert broken.tries == 1
    assert [r.remark for r in conn.sent] == ["T:3"]


async def test_the_turns_registration_looks_the_loop_up_once(monkeypatch):
    """asyncio.get_running_loop is a getpid syscall per call in CPython 3.11: once per
    FlushReplies (and loop), not once per turn."""
    import pocketmq.broker.processor.flush_replies as module

    rounds, conn = Rounds(), Conn()
    calls = []
    real = asyncio.get_running_loop

    def counting() -> asyncio.AbstractEventLoop:
        calls.append(1)
        return real()

    monkeypatch.setattr(module.asyncio, "get_running_loop", counting)
    fr = FlushReplies(reply)
    for i in range(3):
        add(fr, rounds, conn, request(), put(100 * i), i)
        await turn()
    assert rounds.registered == [100, 200, 300]
    assert len(calls) == 1


async def test_a_stored_put_and_a_wrapped_append_register_alike():
    """add reads a stored put (an AppendResult: its own append) without the append property, a
    PutResult around an append through it: the turn's highest end is found from either."""
    rounds, conn = Rounds(), Conn()
    fr = FlushReplies(reply)
    add(fr, rounds, conn, request(), AppendResult.of(500, 100), 0)  # the broker's own form
    add(fr, rounds, conn, request(), put(0, 700), 1)  # end 700: the turn's highest
    add(fr, rounds, conn, request(), AppendResult.of(100, 50), 2)
    await turn()
    assert rounds.registered == [700, 600]  # the highest end, then the first put's
    rounds.resolve(lambda: rounds.future.set_result(True))
    assert [r.remark for r in conn.sent] == ["T:0", "T:1", "T:2"]
