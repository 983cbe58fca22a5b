"""Schedule service benchmark: delayed messages re-put per second, printed as one JSON object.

A fresh store in a temp dir (or ``--dir``) is filled with ``--count`` messages in
``SCHEDULE_TOPIC_XXXX`` (spread over ``--levels`` delay levels, as the send path writes them:
``DELAY``, ``REAL_TOPIC``/``REAL_QID``, TAGS, KEYS and a UNIQ_KEY, so two index entries per
re-put), then the clock jumps past every delay so all of them are due at once, and the broker's
:class:`ScheduleMessageService` runs on the event loop exactly as in the broker (store services
running, yielding between level batches):

* ``reput_per_s``: messages re-put to their real topics per second (the service's own clock:
  from its first run until its ``delivered`` counter reaches ``--count``);
* ``reput_incl_dispatch_per_s``: until the re-put messages are also dispatched to their
  ConsumeQueues and the index (pullable);
* ``deliver_loop_per_s``: ``deliver_level`` called back to back without the event loop (the
  service's CPU cost alone), on a second copy of the data.

Target (issue 6): >= 50k re-puts/s with 100k due messages. Numbers on a shared 2-core VM are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

from pocketmq.broker.schedule import ScheduleMessageService
from pocketmq.remoting.protocol.message import UniqIdGenerator, properties_to_string
from pocketmq.store import MessageInner, MessageStore, MessageStoreConfig

HOST = (b"\x7f\x00\x00\x01", 10911)
SCHEDULE = "SCHEDULE_TOPIC_XXXX"
LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


class Clock:
    """Wall clock with a jump: the store and the service share it."""

    def __init__(self) -> None:
        self.skew = 0

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.skew


def _config(root: str) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log=128 << 20,
        max_hash_slot_num=500_000,
        max_index_num=2_000_000,
        message_delay_level=LEVELS,
    )


async def _fill(store: MessageStore, count: int, body_size: int, levels: int) -> None:
    gen = UniqIdGenerator(ip=b"\x0a\x00\x00\x05")
    body = os.urandom(body_size)
    for i in range(count):
        level = 1 + i % levels
        props = properties_to_string(
            {
                "TAGS": "TagA",
                "KEYS": f"order-{i}",
                "UNIQ_KEY": gen.create(),
                "CLUSTER": "DefaultCluster",
                "DELAY": str(level),
                "REAL_TOPIC": "BenchTopic",
                "REAL_QID": str(i % 8),
            }
        )
        msg = MessageInner(SCHEDULE, body, level - 1, 0, props, 0, 1, HOST, HOST)
        if not store.put_message(msg).status.is_ok:
            raise RuntimeError("fill failed")
        if i % 4096 == 0:
            await asyncio.sleep(0)
    await _drain(store)


async def _drain(store: MessageStore) -> None:
    while store.dispatch_behind_bytes:  # noqa: ASYNC110 - reput has no "idle" event
        await asyncio.sleep(0.001)


@contextlib.asynccontextmanager
async def _filled_store(
    root: str, count: int, body_size: int, levels: int
) -> AsyncIterator[tuple[MessageStore, Clock]]:
    """A started store on ``root`` holding ``count`` delayed messages (dispatched), shut down on exit."""
    clock = Clock()
    store = MessageStore(_config(root), clock=clock)
    store.load()
    await store.start()
    try:
        await _fill(store, count, body_size, levels)
        yield store, clock
    finally:
        await store.shutdown()


async def _service_run(root: str, count: int, body_size: int, levels: int) -> dict[str, Any]:
    async with _filled_store(root, count, body_size, levels) as (store, clock):
        svc = ScheduleMessageService(store, None, message_delay_level=LEVELS, now_ms=clock, first_delay_ms=0)
        clock.skew = 3 * 3_600_000  # every message is due now
        t0 = time.perf_counter()
        svc.start()
        while svc.delivered < count:  # noqa: ASYNC110 - a counter, no event to wait on
            await asyncio.sleep(0.001)
        t1 = time.perf_counter()
        await _drain(store)
        t2 = time.perf_counter()
        await svc.stop()
        pulled = sum(store.get_max_offset_in_queue("BenchTopic", q) for q in range(8))
        if pulled != count:
            raise RuntimeError(f"{pulled} of {count} re-put messages dispatched")
        return {
            "reput_per_s": round(count / (t1 - t0)),
            "reput_incl_dispatch_per_s": round(count / (t2 - t0)),
            "seconds": round(t1 - t0, 3),
        }


async def _loop_run(root: str, count: int, body_size: int, levels: int) -> dict[str, Any]:
    async with _filled_store(root, count, body_size, levels) as (store, clock):
        svc = ScheduleMessageService(
            store, None, message_delay_level=LEVELS, now_ms=clock, level_budget=1 << 30
        )
        clock.skew = 3 * 3_600_000
        t0 = time.perf_counter()
        for level in range(1, levels + 1):
            svc.deliver_level(level, clock())
        t1 = time.perf_counter()
        if svc.delivered != count:
            raise RuntimeError(f"delivered {svc.delivered} of {count}")
        return {"deliver_loop_per_s": round(count / (t1 - t0))}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    base = args.dir or tempfile.mkdtemp(prefix="pocketmq-schedule-bench-")
    try:
        result: dict[str, Any] = {"count": args.count, "body_size": args.body_size, "levels": args.levels}
        result.update(await _service_run(os.path.join(base, "a"), args.count, args.body_size, args.levels))
        shutil.rmtree(os.path.join(base, "a"), ignore_errors=True)
        result.update(await _loop_run(os.path.join(base, "b"), args.count, args.body_size, args.levels))
        return result
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=100_000)
    p.add_argument("--body-size", type=int, default=128)
    p.add_argument("--levels", type=int, default=4, help="delay levels the messages are spread over")
    p.add_argument("--dir", help="store directory (default: a temp dir, removed afterwards)")
    args = p.parse_args(argv)
    if not 1 <= args.levels <= 18:
        p.error("--levels must be 1..18")
    print(json.dumps(asyncio.run(main_async(args)), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
