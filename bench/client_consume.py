"""Consumer drain rate against a real mqnamesrv + mqbroker: 200k stored 1 KB messages are
consumed with offset commits, by a push consumer and by a lite-pull consumer (own groups).

Usage: ``python bench/client_consume.py [count]``. Prints one JSON line per consumer kind.
"""

from __future__ import annotations

import json
import sys

from client_common import cluster, run_bench


def main() -> None:
    count = sys.argv[1] if len(sys.argv) > 1 else "200000"
    with cluster("ASYNC_FLUSH") as c:
        fill = run_bench(
            ["produce", "-t", "BenchDrain", "-w", "4", "-b", "256", "--count", count, "-d", "600"], c
        )
        print(json.dumps({"fill": fill}), flush=True)
        for mode in ("push", "lite"):
            res = run_bench(["consume", "-t", "BenchDrain", "--mode", mode, "--group", f"drain_{mode}",
                             "--count", count, "-d", "600"], c)  # fmt: skip
            print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
