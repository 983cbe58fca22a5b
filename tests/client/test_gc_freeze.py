"""The process's first client start freezes the heap (``freezeGcAtStart``, issue 21).

Each case runs in a fresh interpreter: the freeze is once per process, and this one's heap (pytest's)
is no measure of a client's.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import asyncio, gc, json, sys
from pocketmq.client import Producer

async def main() -> None:
    if sys.argv[2] == "off":
        gc.disable()
    before = gc.get_freeze_count()
    tracked = len(gc.get_objects())
    full = gc.get_stats()[2]["collections"]
    options = {"freeze_gc_at_start": False} if sys.argv[2] == "option" else {}
    producers = [Producer(f"PG{i}", namesrv=sys.argv[1], **options) for i in range(2)]
    for p in producers:
        await p.start()
    out = {
        "before": before,
        "tracked": tracked,
        "frozen": gc.get_freeze_count(),
        "left": len(gc.get_objects()),
        "collections": gc.get_stats()[2]["collections"] - full,
    }
    for p in producers:
        await p.shutdown()
    print(json.dumps(out))

asyncio.run(main())
"""


def _probe(mode: str) -> dict[str, int]:
    # no name server needs to listen: a producer's start does not reach one
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "127.0.0.1:9", mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_first_start_collects_once_then_freezes_what_is_alive() -> None:
    seen = _probe("default")
    assert seen["before"] == 0
    # the modules' objects left the collector's reach: a full collection walks what is left only
    assert seen["frozen"] >= seen["tracked"] // 2 > 10_000
    assert seen["left"] < seen["tracked"] // 10
    assert seen["collections"] == 1  # the second producer's start (same instance) did not collect


def test_the_option_and_a_disabled_collector_leave_the_heap_alone() -> None:
    for mode in ("option", "off"):
        seen = _probe(mode)
        assert seen["frozen"] == 0 and seen["collections"] == 0, mode
