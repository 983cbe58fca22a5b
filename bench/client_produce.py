"""Producer throughput against a real mqnamesrv + mqbroker (1 KB bodies, one client process).

Runs: one at a time; 128 in flight; batches of 64 with 4 in flight; and 128 in flight against a
SYNC_FLUSH broker, with the default broker config and with ``indexProcessEnable=true`` (the
IndexFiles built by a second process: ~3 us less broker CPU per message). Prints one JSON line
per run. Usage: ``python bench/client_produce.py [secs]``.
"""

from __future__ import annotations

import json
import sys

from client_common import cluster, run_bench


def main() -> None:
    secs = sys.argv[1] if len(sys.argv) > 1 else "10"
    index_proc = ("indexProcessEnable=true",)
    runs: list[tuple[str, tuple[str, ...], list[str]]] = [
        ("ASYNC_FLUSH", (), ["produce", "-d", secs, "-t", "BenchSingle", "-w", "1"]),
        ("ASYNC_FLUSH", (), ["produce", "-d", secs, "-t", "BenchInflight", "-w", "128"]),
        ("ASYNC_FLUSH", (), ["produce", "-d", secs, "-t", "BenchBatch", "-w", "4", "-b", "64"]),
        ("SYNC_FLUSH", (), ["produce", "-d", secs, "-t", "BenchSync", "-w", "128"]),
        ("SYNC_FLUSH", index_proc, ["produce", "-d", secs, "-t", "BenchSync", "-w", "128"]),
        ("SYNC_FLUSH", (), ["produce", "-d", secs, "-t", "BenchSyncBatch", "-w", "8", "-b", "32"]),
    ]
    for flush, sets, args in runs:
        with cluster(flush, sets=sets) as c:
            result = run_bench(args, c)
        result["flush"] = flush
        result["broker_sets"] = list(sets)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
