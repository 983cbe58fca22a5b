"""Full-size clustering acceptance run (the in-suite test uses 10k): 100k messages on 8 queues,
3 consumer *processes* in one group, against a real mqnamesrv + mqbroker.

Membership is stable while messages flow, so every message must be consumed exactly once.
Usage: ``python bench/client_clustering.py [count]``; prints one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from client_common import cluster, run_bench

CONSUMER = """
import asyncio, sys
from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, PushConsumer

async def main():
    out = open(sys.argv[2], "w")
    async def listener(msgs, ctx):
        out.write("".join(f"{m.queue_id}:{m.queue_offset}\\n" for m in msgs))
        return CONSUME_SUCCESS
    c = PushConsumer("ClusterAcceptance", namesrv=sys.argv[1], listener=listener, instance_name=sys.argv[3],
                     consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, consume_message_batch_max_size=32)
    c.subscribe("BenchClustering")
    loop = asyncio.get_running_loop()
    async with c:
        deadline = loop.time() + float(sys.argv[4])
        last = -1
        while loop.time() < deadline:  # stop after 5 s without a message (once some came)
            await asyncio.sleep(5)
            n = out.tell()
            if n and n == last:
                break
            last = n
    out.close()

asyncio.run(main())
"""


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    tmp = tempfile.mkdtemp(prefix="pocketmq-clustering-")
    with cluster("ASYNC_FLUSH", queues=8) as c:
        first = run_bench(
            ["produce", "-t", "BenchClustering", "--count", "1", "-d", "5"], c
        )  # creates 8 queues
        files = [os.path.join(tmp, f"c{i}.txt") for i in range(3)]
        procs = [
            subprocess.Popen([sys.executable, "-c", CONSUMER, c.namesrv, f, f"c{i}", "300"])
            for i, f in enumerate(files)
        ]
        time.sleep(8)  # membership settles before anything flows
        begin = time.monotonic()
        bulk = run_bench(
            ["produce", "-t", "BenchClustering", "-w", "4", "-b", "100", "--count", str(count), "-d", "600"],
            c,
        )
        for p in procs:
            p.wait(timeout=400)
        seen: dict[str, int] = {}
        per_consumer = []
        for f in files:
            with open(f) as fh:
                lines = fh.read().split()
            per_consumer.append(len(lines))
            for line in lines:
                seen[line] = seen.get(line, 0) + 1
    total = int(first["messages"]) + int(bulk["messages"]) + 2  # + one warm-up send per run
    print(json.dumps({
        "bench": "clustering", "messages": total, "consumed_distinct": len(seen),
        "duplicates": sum(v - 1 for v in seen.values()), "per_consumer": per_consumer,
        "ok": len(seen) == total and all(v == 1 for v in seen.values()),
        "seconds_after_first_send": round(time.monotonic() - begin, 1),
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
