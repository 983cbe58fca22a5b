"""The SDK's own CPU per plain send and per transaction (issues 17 and 21), printed as JSON lines.

A real ``mqnamesrv`` + ``mqbroker`` (separate processes, loopback, temp store) and this process
as the client, 1 KB bodies. Three workloads, alternated in ``--rounds`` rounds (the VM's speed
drifts within minutes):

* ``send64``: 64 coroutines each awaiting ``Producer.send`` in turn (transaction_bench's plain run);
* ``win128``: ``Producer.send_async`` with a completion callback releasing a semaphore of 128
  (the peers bench's ``window`` test);
* ``tx64``: 64 coroutines each awaiting ``Producer.send_in_transaction`` with a local commit.

Reported per run: operations, client user and system CPU per operation
(``resource.getrusage`` of this process: the SDK, its event loop and its socket calls; the
servers are other processes) and the load average. ``--profile MODE`` instead runs one MODE
under cProfile and prints its top functions by own time.

Usage: ``python bench/client_sendcpu.py [--secs 3] [--rounds 3] [--modes send64,win128,tx64] [--uvloop]``.
Run it with another install's interpreter to measure that install's SDK (and servers).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client_common import cluster

from pocketmq.client import Message, Producer, SendResult
from pocketmq.client.producer.transaction import TransactionState

BODY = os.urandom(1024)


async def _commit(msg: Message, result: SendResult) -> TransactionState:
    return TransactionState.COMMIT_MESSAGE


async def _workers(n: int, stop_at: float, ops: int, op: Callable[[], Awaitable[Any]]) -> int:
    done = 0

    async def worker() -> None:
        nonlocal done
        while done < ops and time.monotonic() < stop_at:
            await op()
            done += 1

    await asyncio.gather(*(worker() for _ in range(n)))
    return done


async def _window(producer: Producer, topic: str, size: int, stop_at: float, ops: int) -> int:
    free = asyncio.Semaphore(size)
    errors = 0

    def sent(result: SendResult | None, err: BaseException | None) -> None:
        nonlocal errors
        free.release()
        if err is not None:
            errors += 1

    n = 0
    while n < ops and time.monotonic() < stop_at:
        await free.acquire()
        producer.send_async(Message(topic, BODY), sent)
        n += 1
    for _ in range(size):  # every send answered
        await free.acquire()
    if errors:
        raise RuntimeError(f"{errors} async sends failed")
    return n


async def _run(
    namesrv: str, mode: str, secs: float, profile: cProfile.Profile | None, ops: int = 1 << 62
) -> dict[str, Any]:
    async with Producer("CpuTxPG" if mode == "tx64" else "CpuPG", namesrv=namesrv) as producer:
        topic = f"Cpu_{mode}"
        for _ in range(200):  # route, connection, topic creation, caches
            if mode == "tx64":
                await producer.send_in_transaction(Message(topic, BODY), _commit)
            else:
                await producer.send(Message(topic, BODY))
        stop_at = time.monotonic() + secs
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        if profile is not None:
            profile.enable()
        if mode == "send64":
            n = await _workers(64, stop_at, ops, lambda: producer.send(Message(topic, BODY)))
        elif mode == "tx64":
            n = await _workers(
                64, stop_at, ops, lambda: producer.send_in_transaction(Message(topic, BODY), _commit)
            )
        else:
            n = await _window(producer, topic, 128, stop_at, ops)
        if profile is not None:
            profile.disable()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    user = (r1.ru_utime - r0.ru_utime) / n * 1e6
    sys_ = (r1.ru_stime - r0.ru_stime) / n * 1e6
    return {
        "mode": mode, "ops": n, "ops_per_s": round(n / secs),
        "client_us_per_op": round(user + sys_, 2), "user": round(user, 2), "sys": round(sys_, 2),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--secs", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="send64,win128,tx64")
    ap.add_argument(
        "--uvloop", action="store_true", help="run the client on uvloop (the servers use it when installed)"
    )
    ap.add_argument("--profile", choices=("send64", "win128", "tx64"))
    ap.add_argument("--profile-out", help="with --profile: also write the pstats file here")
    ap.add_argument(
        "--ops", type=int, default=1 << 62,
        help="stop each run after this many operations (for instruction counts under callgrind:"
        " the difference of two counts over the difference of their --ops)",
    )  # fmt: skip
    args = ap.parse_args()
    factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    if args.uvloop:
        import uvloop

        factory = uvloop.new_event_loop

    def run(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(coro)

    with cluster() as c:
        if args.profile:
            prof = cProfile.Profile()
            print(json.dumps(run(_run(c.namesrv, args.profile, args.secs, prof))), flush=True)
            if args.profile_out:
                prof.dump_stats(args.profile_out)
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
            return
        modes = args.modes.split(",")
        for r in range(args.rounds):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                print(json.dumps(run(_run(c.namesrv, mode, args.secs, None, args.ops))), flush=True)


if __name__ == "__main__":
    main()
