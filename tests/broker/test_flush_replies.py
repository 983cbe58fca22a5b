"""FlushReplies: SYNC_FLUSH sends answered per group-commit round (the round future is driven here)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pocketmq.broker.processor.flush_replies import FlushReplies
from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.store.results import AppendMessageStatus, AppendResult, PutMessageStatus, PutResult


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
    return PutResult(PutMessageStatus.PUT_OK, AppendResult(AppendMessageStatus.PUT_OK, offset, size))


def reply(request: RemotingCommand, result: PutResult, queue_id: int, topic: str) -> RemotingCommand:
    code = (
        ResponseCode.SUCCESS if result.status is PutMessageStatus.PUT_OK else ResponseCode.FLUSH_DISK_TIMEOUT
    )
    return RemotingCommand.response_to(request, code, f"{topic}:{queue_id}")


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
        fr.add(rounds, conn, req, put(off), i, "T")
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
    fr.add(rounds, conn, request(), put(0), 0, "T")
    await turn()
    fr.add(rounds, conn, request(), put(100), 1, "T")
    await turn()
    assert rounds.registered == [100, 200] and fr.waiting == 2
    rounds.resolve(lambda: rounds.future.set_result(True))
    await turn()
    assert [r.remark for r in conn.sent] == ["T:0", "T:1"]


async def test_timed_out_round_answers_flush_disk_timeout():
    rounds, conn = Rounds(), Conn()
    fr = FlushReplies(reply)
    fr.add(rounds, conn, request(), put(0), 0, "T")
    await turn()
    rounds.resolve(lambda: rounds.future.set_result(False))
    await turn()
    assert [r.code for r in conn.sent] == [ResponseCode.FLUSH_DISK_TIMEOUT]


async def test_already_flushed_is_answered_right_after_the_turn():
    rounds, conn = Rounds(), Conn()
    rounds.resolve(lambda: rounds.future.set_result(True))
    fr = FlushReplies(reply)
    fr.add(rounds, conn, request(), put(0), 0, "T")
    await turn()
    assert [r.code for r in conn.sent] == [ResponseCode.SUCCESS]


async def test_failed_round_is_system_error_and_skips_oneway_and_closed():
    rounds, conn, closed = Rounds(), Conn(), Conn(active=False)
    fr = FlushReplies(reply)
    fr.add(rounds, conn, request(), put(0), 0, "T")
    fr.add(rounds, conn, request(oneway=True), put(100), 0, "T")
    fr.add(rounds, closed, request(), put(200), 0, "T")
    await turn()
    rounds.resolve(lambda: rounds.future.set_exception(OSError("EIO")))
    await turn()
    assert [(r.code, r.remark) for r in conn.sent] == [(ResponseCode.SYSTEM_ERROR, "OSError: EIO")]
    assert closed.sent == []


async def test_cancelled_round_answers_nobody():
    rounds, conn = Rounds(), Conn()
    fr = FlushReplies(reply)
    fr.add(rounds, conn, request(), put(0), 0, "T")
    await turn()
    rounds.resolve(rounds.future.cancel)
    await turn()
    assert conn.sent == [] and fr.waiting == 0
