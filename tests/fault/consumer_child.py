"""Child process for the consumer fault scenarios (T9/T10, T11): one SDK push consumer.

Usage: consumer_child.py NAMESRV GROUP TOPIC ORDERLY(0|1)

Prints ``READY`` once started, ``Q <CLOCK_MONOTONIC ns> <queue ids>`` every 0.25 s (the queues of
TOPIC it owns: its rebalance's process queues), and ``M <CLOCK_MONOTONIC ns> <body>`` for every message its
listener receives (written before the listener returns success, so a line is a delivery; the
clock is the machine's, so the parent can merge several consumers' lines in time order). Short rebalance,
heartbeat and offset-persist intervals make a run fit in a test. SIGTERM shuts it down cleanly;
the parent also SIGKILLs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, PushConsumer
from pocketmq.client.consumer.listener import SUCCESS


async def main() -> None:
    namesrv, group, topic, orderly = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    out = sys.stdout

    async def listener(msgs: list, ctx: object) -> object:  # type: ignore[type-arg]
        now = time.monotonic_ns()
        out.write("".join(f"M {now} {m.body.decode()}\n" for m in msgs))
        out.flush()
        return SUCCESS if orderly else CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        namesrv=namesrv,
        listener=listener,
        orderly=orderly,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        rebalance_interval=1000,
        heartbeat_broker_interval=1000,
        persist_consumer_offset_interval=500,
    )
    consumer.subscribe(topic, "*")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with consumer:
        out.write("READY\n")
        out.flush()
        while not stop.is_set():  # the queues this consumer owns now, for the ownership check
            owned = sorted(mq.queue_id for mq in consumer.rebalance.process_queue_table if mq.topic == topic)
            out.write(f"Q {time.monotonic_ns()} {','.join(map(str, owned))}\n")
            out.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)


if __name__ == "__main__":
    asyncio.run(main())
