"""Membership changes: consumers join and a consumer process is killed with SIGKILL.

Remaining members take over the dead member's queues within two rebalance periods (the broker
notices the closed connection and notifies the group), and no message is lost.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.testing import Cluster
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.fault]


REBALANCE_MS = 2000

CHILD = """
import asyncio, sys
from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, PushConsumer
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - autouse fixture

async def main():
    async def listener(msgs, ctx):
        for m in msgs:
            sys.stdout.write(m.body.decode() + "\\n")
        sys.stdout.flush()
        await asyncio.sleep(0.002)
        return CONSUME_SUCCESS
    c = PushConsumer("RBG", namesrv=sys.argv[1], listener=listener, instance_name="child",
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, rebalance_interval=int(sys.argv[2]))
    c.subscribe("Rebal")
    await c.start()
    sys.stdout.write("started\\n"); sys.stdout.flush()
    await asyncio.Event().wait()

asyncio.run(main())
"""


async def test_join_and_kill9_rebalance_without_loss(pmq: Cluster) -> None:
    await pmq.create_topic("Rebal", queues=8)
    consumed: dict[str, set[str]] = {"A": set(), "B": set(), "child": set()}

    def make(name: str) -> PushConsumer:
        async def listener(msgs, ctx):
            consumed[name].update(m.body.decode() for m in msgs)
            await asyncio.sleep(0.002)
            return CONSUME_SUCCESS

        c = PushConsumer("RBG", namesrv=pmq.namesrv_addr, listener=listener, instance_name=name,
                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, rebalance_interval=REBALANCE_MS)  # fmt: skip
        c.subscribe("Rebal")
        return c

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD,
        pmq.namesrv_addr,
        str(REBALANCE_MS),
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None

    async def read_child() -> None:
        assert child.stdout is not None
        async for line in child.stdout:
            text = line.decode().strip()
            if text == "started":
                child_started.set()
            elif text:
                consumed["child"].add(text)

    child_started = asyncio.Event()
    reader = asyncio.create_task(read_child())
    a = make("A")
    b = make("B")
    n = 3000
    try:
        await asyncio.wait_for(child_started.wait(), 30)
        await a.start()
        await b.start()
        async with Producer("RPG", namesrv=pmq.namesrv_addr) as producer:
            sent = 0
            # all three members consume (produce until the child has had some)
            while sent < n // 3 or not consumed["child"]:
                await producer.send(Message("Rebal", b"%d" % sent))
                sent += 1
                if sent % 200 == 0:
                    await asyncio.sleep(0.05)
                assert sent < n, "the child consumer never got a message"
            for i in range(sent, 2 * n // 3):
                await producer.send(Message("Rebal", b"%d" % i))
            child.send_signal(signal.SIGKILL)  # kill -9: no unregister, no offset persist
            await child.wait()
            killed_at = asyncio.get_running_loop().time()

            # the survivors own all 8 queues within two rebalance periods
            def owned() -> int:
                tables = (a.rebalance.process_queue_table, b.rebalance.process_queue_table)
                return sum(1 for t in tables for mq in t if mq.topic == "Rebal")

            await wait_until(lambda: owned() == 8, timeout=2 * REBALANCE_MS / 1000)
            took = asyncio.get_running_loop().time() - killed_at
            for i in range(2 * n // 3, n):
                await producer.send(Message("Rebal", b"%d" % i))
        everything = {str(i) for i in range(n)}
        await wait_until(
            lambda: everything <= (consumed["A"] | consumed["B"] | consumed["child"]), timeout=60
        )
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        await reader
        await b.shutdown()
        await a.shutdown()
    assert took <= 2 * REBALANCE_MS / 1000
    assert consumed["A"] and consumed["B"] and consumed["child"]
