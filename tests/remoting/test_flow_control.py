"""Flow control: a request that waited too long between its read and its handling is answered
SYSTEM_BUSY (2) with RocketMQ's remark (``limits.QueueWait``; the broker's keys in
``broker.flow_control``). Before: nothing was ever answered busy, however long a request waited
(issue 23, T18).

A handler that blocks the loop stands for a put held on a busy page cache: the commands read
with it wait at least that long, on any machine (no timing margin is asserted).
"""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.flow_control import SEND_CODES, apply_config, queue_wait_of
from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand, decode_command
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.limits import PCBUSY_REMARK, TIMEOUT_REMARK, QueueWait
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig

STALL = 9201  # blocks the loop for HOLD seconds, then answers
ECHO = 9202
OTHER = 9203  # no limit
HOLD = 0.3
BUSY = "broker busy, start flow control for a while, period in queue: "


# ------------------------------------------------------------------------------ the table
def test_verdict_table() -> None:
    qw = QueueWait({ECHO: 0.2}, held_limit=1.0, pc_codes=frozenset({ECHO}))
    assert qw.shortest == 0.2
    assert qw.verdict(ECHO, 10.0, 10.1, 5) is None  # under its limit
    assert qw.verdict(OTHER, 0.0, 100.0, 5) is None  # a code without a limit waits as long as it takes
    assert qw.verdict(ECHO, 10.0, 10.25, 7) == TIMEOUT_REMARK % (250, 7)
    assert TIMEOUT_REMARK % (250, 7) == (
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 250ms, size of queue: 7"
    )
    qw.held(10.0, 10.5)  # not longer than held_limit: not a page-cache hold
    assert qw.held_until == 0.0
    qw.held(10.0, 11.5)
    assert qw.held_until == 11.5
    # read before the hold ended: the page-cache remark, whatever the wait
    assert qw.verdict(ECHO, 10.0, 11.6, 0) == PCBUSY_REMARK % (1600, 0)
    assert qw.verdict(ECHO, 11.55, 11.6, 0) is None  # read after it, short wait
    assert qw.busy_replies == 2
    qw.update({}, held_limit=float("inf"), pc_codes=frozenset())  # brokerFastFailureEnable=false
    assert qw.shortest == float("inf") and qw.verdict(ECHO, 0.0, 100.0, 0) is None


def test_broker_keys_map_to_rocketmq_queues() -> None:
    cfg = BrokerConfig()
    qw = queue_wait_of(cfg)
    assert {c: qw.limits[c] for c in SEND_CODES} == dict.fromkeys(SEND_CODES, 0.2)
    assert qw.limits[int(RequestCode.PULL_MESSAGE)] == 5.0
    assert qw.limits[int(RequestCode.HEART_BEAT)] == 31.0
    assert qw.limits[int(RequestCode.END_TRANSACTION)] == 3.0
    assert qw.held_limit == 1.0 and qw.pc_codes == SEND_CODES
    apply_config(qw, cfg.model_copy(update={"broker_fast_failure_enable": False}))
    assert qw.limits == {} and qw.shortest == float("inf")


# ------------------------------------------------------------------------- over a socket
async def _burst(qw: QueueWait | None, n: int, *, oneway: bool = False) -> tuple[list[RemotingCommand], int]:
    """One write of a STALL request then ``n`` ECHO requests; the replies (ECHO ones) in order
    of opaque, and how many requests the ECHO handler ran."""
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1", queue_wait=qw))
    handled = 0

    def stall(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        time.sleep(HOLD)  # noqa: ASYNC251 - on purpose: a put holding the loop (the put lock)
        return RemotingCommand.response_to(req)

    def echo(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        nonlocal handled
        handled += 1
        return RemotingCommand.response_to(req, body=req.body)

    srv.register(STALL, stall)
    srv.register(ECHO, echo)
    await srv.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        frames = [RemotingCommand(STALL, 0).encode()]
        for k in range(1, n + 1):
            cmd = RemotingCommand(ECHO, k, body=b"x")
            if oneway:
                cmd.flag |= RPC_ONEWAY
            frames.append(cmd.encode())
        writer.write(b"".join(frames))
        replies = []
        for _ in range(1 if oneway else n + 1):
            (length,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30))
            replies.append(decode_command(await reader.readexactly(length)))
        if oneway:  # the server answers nothing more: an ECHO round trip proves it is done
            writer.write(RemotingCommand(ECHO, n + 1).encode())
            (length,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30))
            assert decode_command(await reader.readexactly(length)).opaque == n + 1
        writer.close()
        return sorted((r for r in replies if r.opaque), key=lambda r: r.opaque), handled
    finally:
        await srv.stop()


@pytest.mark.parametrize("held_limit", [5.0, 0.25])
async def test_requests_that_waited_past_their_limit_are_answered_busy(held_limit: float) -> None:
    qw = QueueWait({ECHO: 0.2}, held_limit=held_limit, pc_codes=frozenset({ECHO}))
    replies, handled = await _burst(qw, 1000)
    assert [r.opaque for r in replies] == list(range(1, 1001))  # every request answered once
    busy = [r for r in replies if r.code == 2]
    ok = [r for r in replies if r.code == 0]
    assert busy and len(ok) == handled == 1000 - len(busy)  # a busy request is not handled
    # the requests read with the stall and queued behind it (past the first slice)
    prefix = "[PCBUSY_CLEAN_QUEUE]" if held_limit < HOLD else "[TIMEOUT_CLEAN_QUEUE]"
    for r in busy:
        assert r.remark is not None and r.remark.startswith(prefix + BUSY)
        waited = int(r.remark.split("period in queue: ")[1].split("ms")[0])
        assert waited >= 200
    assert qw.busy_replies == len(busy)


async def test_no_limit_no_busy_reply() -> None:
    replies, handled = await _burst(None, 300)
    assert all(r.code == 0 for r in replies) and handled == 300
    qw = QueueWait({OTHER: 0.2})  # limits for other codes only
    replies, handled = await _burst(qw, 300)
    assert all(r.code == 0 for r in replies) and handled == 300


async def test_oneway_requests_past_their_limit_are_dropped_unanswered() -> None:
    qw = QueueWait({ECHO: 0.2})
    replies, handled = await _burst(qw, 500, oneway=True)
    handled -= 1  # the closing ECHO round trip
    assert replies == [] and handled < 500 and qw.busy_replies == 500 - handled
