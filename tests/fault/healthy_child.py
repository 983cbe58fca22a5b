"""Child process for T16/T14: a healthy client sending at a steady rate, its latency measured in
its own process (in the parent, the hostile clients' tasks share its event loop and their bursts
would be counted as the broker's latency).

Usage: healthy_child.py BROKER_ADDR TOPIC RATE TAG

Sends ``TAG-<n>`` bodies to TOPIC at RATE msg/s, one at a time, until stdin says ``STOP``; a
``MARK`` line starts a new latency window. Then prints one JSON object: ``windows`` (the
latencies in seconds of each window), ``starts`` (when each send began, ``time.monotonic``: the
system-wide clock, so the parent can tell which of its phases a slow send fell in) and ``acked``
(the bodies answered SUCCESS).

``BROKER_ADDR`` ``echo`` is the control: the same client against an echo server in a third
process instead of the broker (a request and a reply of a send's size). What the machine does to
two processes talking over loopback (other processes' CPU, the kernel's network work) shows in
it too; what only the broker does does not.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable

from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.testing.wire import Wire

#: bytes of the control's request and reply (a healthy send and its reply are ~300 and ~200)
ECHO_SIZE = 300

Sender = Callable[[int, str], Awaitable[bool]]


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
    send, close = await (_echo() if addr == "echo" else _broker(addr, topic))
    i = 0
    print("READY", flush=True)
    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            began = time.monotonic()
            body = f"{tag}-{i}"
            i += 1
            try:
                ok = await send(i, body)
            except Exception:
                continue
            dt = time.perf_counter() - t0
            windows[-1].append(dt)
            starts[-1].append(began)
            if ok:
                acked.append(body)
            await asyncio.sleep(max(0.0, 1 / rate - dt))
    finally:
        await close()
    print(json.dumps({"windows": windows, "starts": starts, "acked": acked}), flush=True)


async def _broker(addr: str, topic: str) -> tuple[Sender, Callable[[], Awaitable[None]]]:
    w = Wire(addr)

    async def send(i: int, body: str) -> bool:
        r = await w.send(topic, body.encode(), queue_id=i % 4)
        return r.code == ResponseCode.SUCCESS

    return send, w.close


async def _echo() -> tuple[Sender, Callable[[], Awaitable[None]]]:
    server = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "serve-echo", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert server.stdout is not None
    port = int(await server.stdout.readline())
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = b"e" * ECHO_SIZE

    async def send(i: int, body: str) -> bool:
        writer.write(request)
        await reader.readexactly(ECHO_SIZE)
        return False  # nothing is stored: no body is acknowledged

    async def close() -> None:
        writer.close()
        server.kill()
        await server.wait()

    return send, close


async def _serve_echo() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)

    srv = await asyncio.start_server(echo, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    # serve until stdin closes: this process ends with its client's, however that one ends
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    srv.close()


def _mark(windows: list[list[float]], starts: list[list[float]]) -> None:
    windows.append([])
    starts.append([])


if __name__ == "__main__":
    asyncio.run(_serve_echo() if sys.argv[1] == "serve-echo" else main())
