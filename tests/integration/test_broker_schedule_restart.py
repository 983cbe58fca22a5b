"""Delayed messages across ``kill -9`` of a real mqbroker process (issue 6).

Level 1 is 1 s and level 2 is 4 s; delayOffset.json is written every 300 ms
(``flushDelayOffsetInterval``). Messages of level 1 are delivered and their progress written
before the kill; those of level 2 are still waiting. After the restart every message is in its
topic exactly once: nothing lost, and nothing re-put again that the written progress covered.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import decode_messages
from pocketmq.testing.procs import servers
from pocketmq.testing.wire import Wire

pytestmark = [pytest.mark.integration, pytest.mark.fault]

KEYS = {"messageDelayLevel": "1s 4s 1s", "flushDelayOffsetInterval": "300"}
N = 10


async def max_offset(wire: Wire, topic: str, queue_id: int = 0) -> int:
    r = await wire.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
    return int(r.ext_fields["offset"])


async def wait_max_offset(wire: Wire, topic: str, n: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while await max_offset(wire, topic) < n:
        assert time.monotonic() < deadline, f"{topic} did not reach {n}"
        await asyncio.sleep(0.05)


def test_kill9_while_messages_wait_neither_loses_nor_repeats(tmp_path: Path) -> None:
    with servers(tmp_path, broker_keys=KEYS, topics={"Later": 1}) as s:
        delay_file = s.store_dir / "config" / "delayOffset.json"

        async def before_kill() -> None:
            w = Wire(s.broker.addr)
            try:
                for i in range(N):
                    for level in ("1", "2"):
                        body = f"L{level}-{i}".encode()
                        r = await w.send("Later", body, props={"DELAY": level})
                        assert r.code == ResponseCode.SUCCESS, r.remark
                await wait_max_offset(w, "Later", N)  # the level-1 half is delivered
                deadline = time.monotonic() + 10
                while "1:10" not in (delay_file.read_text().replace(" ", "") if delay_file.exists() else ""):
                    assert time.monotonic() < deadline, "delayOffset.json not written"
                    await asyncio.sleep(0.05)
                assert await max_offset(w, "Later") == N  # level 2 still waits
            finally:
                await w.close()

        asyncio.run(before_kill())
        s.broker.kill9()
        s.restart_broker()

        async def after_restart() -> list[bytes]:
            w = Wire(s.broker.addr)
            try:
                await wait_max_offset(w, "Later", 2 * N)
                await asyncio.sleep(1.5)  # a repeated re-put would show up by now
                assert await max_offset(w, "Later") == 2 * N
                r = await w.pull("Later", 0, 0, max_nums=32, sys_flag=0x4)
                assert r.code == ResponseCode.SUCCESS
                return [m.body for m in decode_messages(r.body or b"")]
            finally:
                await w.close()

        bodies = asyncio.run(after_restart())
        saved = delay_file.read_text()
    assert sorted(bodies) == sorted(f"L{level}-{i}".encode() for i in range(N) for level in "12")
    assert bodies[:N] == [f"L1-{i}".encode() for i in range(N)]
    assert "2:10" in saved.replace(" ", "")
