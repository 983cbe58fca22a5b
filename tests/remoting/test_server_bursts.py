"""Bursts of connections cost the server's loop no long turn (issue 23, T16: 11,100 connections
accepted within ~2 s, 10,000 idle ones timing out together, healthy clients' sends waiting).

* the sweeper closes idle connections a few per loop turn, with one log line per sweep (it held
  the loop ~10 ms per sweep and wrote 10,000 log lines);
* the descriptor table is grown once at startup (each doubling under the burst blocked the loop
  thread 10-20 ms in the kernel, waiting for an RCU grace period).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap

import pytest

from pocketmq.remoting.transport import server
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig
from tests.waiting import wait_until

#: more than one sweep step closes at once (the scan period is split in ~6 steps here)
N = 300


async def test_idle_connections_timing_out_together_close_a_few_per_loop_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1", idle_timeout=0.5, sweep_interval=0.02))
    await srv.start()
    loop = asyncio.get_running_loop()
    lost = [0]
    per_turn: list[int] = []

    def on_close(conn: RemotingConnection) -> None:
        lost[0] += 1

    def turn() -> None:  # runs once per pass over the ready callbacks
        per_turn.append(lost[0])
        lost[0] = 0
        if not done:
            loop.call_soon(turn)

    srv.dispatcher.on_close.append(on_close)
    done = False
    writers = []
    try:
        with caplog.at_level(logging.INFO, logger=server.logger.name):
            for _ in range(N):
                _reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
                writers.append(writer)
            await wait_until(lambda: len(srv.connections) == N)
            loop.call_soon(turn)
            await wait_until(lambda: not srv.connections, timeout=10)
            done = True
            await asyncio.sleep(0)
    finally:
        done = True
        for writer in writers:
            writer.close()
        await srv.stop()
    assert sum(per_turn) == N
    assert max(per_turn) <= server._CLOSES_PER_TURN
    lines = [r for r in caplog.records if "idle connection" in r.getMessage()]
    closed = sum(1 if r.getMessage().startswith("closing idle") else int(r.args[0]) for r in lines)  # type: ignore[index, arg-type]
    assert closed == N
    assert len(lines) < N // 10  # one line per sweep, naming a few addresses


FD_CHILD = textwrap.dedent(
    """
    import os, resource, sys
    from pocketmq.remoting.transport.limits import reserve_fd_table

    def fd_size():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("FDSize:"))

    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    before, opened = fd_size(), sorted(os.listdir("/proc/self/fd"))
    print(before, reserve_fd_table(3000), fd_size())
    taken = os.open(os.devnull, os.O_RDONLY)
    os.dup2(taken, 11999)  # an open descriptor where the next reservation looks: left alone
    ino = os.fstat(11999).st_ino
    reserve_fd_table(12000)
    print(os.fstat(11999).st_ino == ino)
    os.close(11999)
    os.close(taken)
    print(sorted(os.listdir("/proc/self/fd")) == opened)
    """
)


def test_the_descriptor_table_is_grown_once_at_start() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FD_CHILD], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    first, untouched, closed = done.stdout.splitlines()
    before, asked, after = (int(n) for n in first.split())
    assert before < 3000  # a fresh process's table: the kernel doubles it on demand
    assert asked == 3000 and after >= 3000
    assert untouched == "True"
    assert closed == "True"  # no descriptor left open
