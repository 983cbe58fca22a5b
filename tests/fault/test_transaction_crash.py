"""T12 at a small scale: ``kill -9`` of a real broker process ten times during commits and checks.

A producer runs the 80/10/10 transactional mix (``tests/integration/tx_mix.py``) while a consumer
reads the topic; the broker is killed in the middle of each round of sends (while checks of
earlier UNKNOW halves are running too) and restarted. Afterwards:

* the consumed set equals the committed set: nothing lost, nothing rolled back visible;
* no check arrives for a message whose commit was already visible to the consumer (the op record
  survived the crash and the restart re-read it): RocketMQ's "UnexpectedCheck" = 0;
* unresolved halves are still checked after the restarts: every UNKNOW one is asked about, and
  the check service's progress reaches the end of the half queue.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Producer
from pocketmq.testing.procs import servers
from tests.integration.tx_mix import (
    ROLLBACK,
    UNKNOW,
    Ledger,
    all_resolved,
    consumer,
    plan,
    produce_with,
    stored_keys,
    topic_total,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.fault]

KILLS = 10
PER_ROUND = 30
TOPIC = "TxAccept"
#: checks every 300 ms, halves due 1.5 s after birth
BROKER_KEYS = {"transactionCheckInterval": "300", "transactionTimeOut": "1500"}
#: a check generated before its commit may still be on its way this long after the commit
IN_FLIGHT_MARGIN = 1.0


def test_kill9_ten_times_during_commits_and_checks(tmp_path: Path) -> None:
    with servers(tmp_path, BROKER_KEYS, topics={TOPIC: 4}) as s:
        ledger = Ledger()
        got: list[Any] = []
        first_seen: dict[str, float] = {}
        stored: Counter[str] = Counter()
        read = [0]  # how much of ``got`` seen() has looked at

        def seen() -> None:
            now = time.monotonic()
            for m in got[read[0] :]:
                first_seen.setdefault(m.keys, now)
            read[0] = len(got)

        async def main() -> None:
            loop = asyncio.get_running_loop()
            namesrv = s.namesrv.addr
            async with (
                Producer("TxPG", namesrv=namesrv, transaction_checker=ledger.checker) as producer,
                consumer(namesrv, TOPIC, got),
            ):
                sending = asyncio.create_task(
                    produce_with(producer, TOPIC, range(10**6), ledger, concurrency=8, pause_on_failure=0.2)
                )
                for kill in range(KILLS + 1):
                    # PER_ROUND more transactions ran their local part since the last restart:
                    # kill in the middle of the stream of sends, commits and check answers
                    target = len(ledger.local) + PER_ROUND
                    await wait_until(lambda t=target: len(ledger.local) >= t, timeout=60)  # type: ignore[misc]
                    if kill == KILLS:
                        ledger.stop = True
                        break
                    s.broker.kill9()
                    await loop.run_in_executor(None, s.restart_broker)
                await sending
                seen()
                # everything resolved (committed, rolled back, or discarded after 15 checks)
                await wait_until(lambda: all_resolved(s.broker.addr), timeout=180, step=0.2)
                expected = ledger.expected()

                async def consumed_all() -> bool:
                    seen()
                    return expected <= set(first_seen) and await topic_total(s.broker.addr) <= len(got)

                await wait_until(consumed_all, timeout=120, step=0.1)
                stored.update(await stored_keys(s.broker.addr))

        asyncio.run(main())
        expected = ledger.expected()
        consumed = Counter(m.keys for m in got)
        assert set(consumed) == expected, (
            sorted(set(consumed) - expected)[:10],
            sorted(expected - set(consumed))[:10],
        )
        rolled_back = {k for k, st in ledger.local.items() if st is ROLLBACK}
        assert not set(consumed) & rolled_back
        # UnexpectedCheck: a check for a commit the consumer had already seen
        unexpected = [
            k for k, times in ledger.check_times.items()
            if k in first_seen and any(t > first_seen[k] + IN_FLIGHT_MARGIN for t in times)
        ]  # fmt: skip
        assert unexpected == [], unexpected[:10]
        # every UNKNOW half whose local transaction ran was asked about (some across a restart)
        unknown = {k for k in ledger.local if plan(int(k)) is UNKNOW}
        assert unknown <= set(ledger.checks)
        assert len(ledger.local) >= (KILLS + 1) * PER_ROUND
        assert set(stored) == expected
        # at-least-once: a crash between a commit's two puts commits again after a check (rare);
        # the consumer may see more repeats (its offsets are committed to the broker every 5 s)
        duplicates = sum(v - 1 for v in stored.values())
        print(
            f"T12: {len(ledger.local)} local, {ledger.send_failures} failed sends, {sum(ledger.checks.values())} checks, {len(expected)} committed, {duplicates} duplicates"
        )
        assert duplicates <= KILLS, duplicates
