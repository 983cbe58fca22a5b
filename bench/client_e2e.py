"""End-to-end latency through the SDK (producer + push consumer in one process, one clock)
at 2,000 msg/s against a real mqnamesrv + mqbroker. Usage: ``python bench/client_e2e.py [secs]``."""

from __future__ import annotations

import json
import sys

from client_common import cluster, run_bench


def main() -> None:
    secs = sys.argv[1] if len(sys.argv) > 1 else "20"
    with cluster("ASYNC_FLUSH") as c:
        print(json.dumps(run_bench(["e2e", "-t", "BenchE2E", "-r", "2000", "-d", secs], c)), flush=True)


if __name__ == "__main__":
    main()
