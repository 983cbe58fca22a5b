"""Child process for T16/T14: a healthy client sending at a steady rate, its latency measured in
its own process (in the parent, the hostile clients' tasks share its event loop and their bursts
would be counted as the broker's latency).

Usage: healthy_child.py BROKER_ADDR TOPIC RATE TAG

Sends ``TAG-<n>`` bodies to TOPIC at RATE msg/s, one at a time, until stdin says ``STOP``; a
``MARK`` line starts a new latency window. Then prints one JSON object: ``windows`` (the
latencies in seconds of each window), ``starts`` (when each send began, ``time.monotonic``: the
system-wide clock, so the parent can tell which of its phases a slow send fell in) and ``acked``
(the bodies answered SUCCESS).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.testing.wire import Wire


async def main() -> None:
    addr, topic, rate, tag = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    loop = asyncio.get_running_loop()
    windows: list[list[float]] = [[]]
    starts: list[list[float]] = [[]]
    acked: list[str] = []
    stop = asyncio.Event()

    def commands() -> None:
        for line in sys.stdin:
            if line.strip() == "MARK":
                loop.call_soon_threadsafe(_mark, windows, starts)
            elif line.strip() == "STOP":
                break
        loop.call_soon_threadsafe(stop.set)

    loop.run_in_executor(None, commands)
    w = Wire(addr)
    i = 0
    print("READY", flush=True)
    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            began = time.monotonic()
            body = f"{tag}-{i}"
            i += 1
            try:
                r = await w.send(topic, body.encode(), queue_id=i % 4)
            except Exception:
                continue
            dt = time.perf_counter() - t0
            windows[-1].append(dt)
            starts[-1].append(began)
            if r.code == ResponseCode.SUCCESS:
                acked.append(body)
            await asyncio.sleep(max(0.0, 1 / rate - dt))
    finally:
        await w.close()
    print(json.dumps({"windows": windows, "starts": starts, "acked": acked}), flush=True)


def _mark(windows: list[list[float]], starts: list[list[float]]) -> None:
    windows.append([])
    starts.append([])


if __name__ == "__main__":
    asyncio.run(main())
